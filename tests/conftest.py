"""Shared fixtures. The cache lives in the project (.cache/), so the packaged model is converted once."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from security_campaign import CRASHED, ESCAPED, REJECTED, CampaignRecorder

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("CAUSALDIAG_CACHE", str(ROOT / ".cache" / "causaldiag"))
os.environ.setdefault("HF_HOME", str(ROOT / ".cache" / "huggingface"))
os.environ.setdefault("GRADIO_TEMP_DIR", str(ROOT / ".cache" / "gradio"))
os.environ.setdefault("MPLCONFIGDIR", str(ROOT / ".cache" / "matplotlib"))
os.environ["HF_HUB_OFFLINE"] = "1"
# the suite's numbers do not depend on whether the capable model is installed: the tiny helpers serve by default
os.environ["CAUSALDIAG_CAPABLE_HELPER"] = "off"
os.environ["HF_DATASETS_OFFLINE"] = "1"
if os.environ.get("PYTEST_XDIST_WORKER"):
    # one thread per worker: two workers on two cores, neither oversubscribing the other's core
    os.environ.setdefault("OMP_NUM_THREADS", "1")

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="session")
def default_lm():
    """The real embedded default model (SmolLM2-135M-Instruct), loaded once per test session."""
    from recoe_causaldiag.models import load_model

    return load_model("smollm2-135m-instruct", device="cpu")


@pytest.fixture(scope="session")
def factcheck_dir(tmp_path_factory):
    """FactCheck built once into a temporary folder (Hub layout)."""
    from recoe_causaldiag.dataset_building import build_dataset

    return build_dataset("factcheck", tmp_path_factory.mktemp("datasets"))


@pytest.fixture(scope="session")
def factcheck_pairs(factcheck_dir):
    from recoe_causaldiag.hub_layout import load_pairs

    return load_pairs(factcheck_dir)


@pytest.fixture(scope="session")
def every_dataset_dir(factcheck_dir):
    """Every registered dataset built once per test session into one folder (FactCheck's beside it)."""
    from recoe_causaldiag.dataset_building import build_dataset
    from recoe_causaldiag.tasks import DATASETS

    out = factcheck_dir.parent
    for name in DATASETS.names():
        if name != "factcheck":
            build_dataset(name, out)
    return out


@pytest.fixture(scope="session")
def task_pairs(every_dataset_dir):
    """The first 40 pairs of every registered task (for the sanity references)."""
    from recoe_causaldiag.hub_layout import load_pairs
    from recoe_causaldiag.tasks import DATASETS

    pairs = {}
    for name in DATASETS.names():
        spec = DATASETS.get(name)
        folder = every_dataset_dir / name
        pairs |= {task: load_pairs(folder, config)[:40] for task, config in zip(spec.task_names(), spec.configs)}
    return pairs


CAMPAIGN = pytest.StashKey[CampaignRecorder]()
FAILURES_LISTED = 30


def pytest_configure(config: pytest.Config) -> None:
    config.stash[CAMPAIGN] = CampaignRecorder()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked `large_model` are skipped where the capable model is not installed, `gpu` ones without CUDA."""
    wanted = {item.get_closest_marker(m) is not None for item in items for m in ("large_model", "gpu")}
    if True not in wanted:
        return
    import torch

    from recoe_causaldiag.capable_model import INSTALL_HINT, QWEN_CODER_GGUF

    reasons = {
        "large_model": None
        if QWEN_CODER_GGUF.installed()
        else f"the capable model is not installed (opt-in: {INSTALL_HINT})",
        "gpu": None if torch.cuda.is_available() else "no CUDA device",
    }
    for item in items:
        for marker, reason in reasons.items():
            if reason is not None and item.get_closest_marker(marker) is not None:
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture()
def campaign(request: pytest.FixtureRequest) -> CampaignRecorder:
    """The test's security-campaign recorder: `campaign.record(campaign_name, case, outcome, reason)` records a
    case in the session's table; `campaign.failures()` lists the test's failed cases."""
    return request.config.stash[CAMPAIGN].for_test()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """A test marked `security("<campaign>")` is one case of that campaign: passed, the layer it tests held
    ("rejected"); failed, the attack escaped; an error in its set-up is a crash."""
    report = (yield).get_result()
    marker = item.get_closest_marker("security")
    if marker is None or not marker.args or report.skipped:
        return
    if report.when == "call" and report.passed:
        outcome, reason = REJECTED, item.name.removeprefix("test_").replace("_", " ")
    elif report.when in ("setup", "call") and report.failed:
        outcome = ESCAPED if report.when == "call" else CRASHED
        reason = (str(call.excinfo.value).splitlines() or [""])[0][:200] if call.excinfo else ""
    else:
        return
    item.config.stash[CAMPAIGN].record(marker.args[0], item.name, outcome, reason)


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """The campaign table, when any case was recorded, and the cases that failed."""
    recorder = config.stash[CAMPAIGN]
    if not recorder.cases:
        return
    terminalreporter.write_sep("=", "security campaign")
    for line in recorder.table():
        terminalreporter.write_line(line)
    failures = recorder.failures()
    for case in failures[:FAILURES_LISTED]:
        terminalreporter.write_line(f"FAILED CASE {case}")
    if len(failures) > FAILURES_LISTED:
        terminalreporter.write_line(f"... and {len(failures) - FAILURES_LISTED} more failed cases")
