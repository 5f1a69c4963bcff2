"""The input fuzzer of the security campaign: hundreds of malformed and hostile values in every field a submitter
or an admin fills in, each with the outcome a rule independent of the implementation expects (accepted, or
rejected with a reason). A case is "accepted wrongly" when the Space accepts what the rule rejects, "crashed" when
an exception escapes instead of an answer (or the board or queue cannot be shown afterwards), and "escaped" when an
answer carries a hostile string back as markup or names a server path."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from recoe_causaldiag.api.run_spec import PRECISIONS
from recoe_causaldiag.leaderboard.queue import STATUSES
from recoe_causaldiag.leaderboard.render import board_frame, board_plot, board_records, queue_table
from recoe_causaldiag.leaderboard.service import Leaderboard
from recoe_causaldiag.leaderboard.settings import LeaderboardSettings
from recoe_causaldiag.metrics import METRICS
from recoe_causaldiag.models import DEFAULT_MODEL
from recoe_causaldiag.tasks import TASKS

pytestmark = pytest.mark.security

HOSTILE = (
    "",
    " ",
    "\t\n",
    "a" * 5000,
    "../../etc/passwd",
    "/etc/passwd",
    "/usr/lib/python3",
    "~root/.ssh/id_rsa",
    "//etc//passwd",
    "file:///etc/passwd",
    "http://127.0.0.1:7860/config",
    "C:\\Windows\\System32",
    "nul\x00byte",
    "/tmp/nul\x00byte",
    "\u202eevil\u202c",
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "[click](javascript:alert(1))",
    "**bold** `code` # heading",
    "$\\undefinedmacro{x}$",
    "'; DROP TABLE jobs; --",
    "%s%s%s%n",
    "{0.__class__.__mro__}",
    "org/../secret",
    "org/name--x",
    "a/b/c",
    "\U0001f600" * 40,
    "NaN",
    "1e309",
    "-1",
    "null",
    f" {DEFAULT_MODEL}",
    f"{DEFAULT_MODEL}\n",
    "FACTCHECK",
    "factcheck;analogy",
    "random,oracle",
)
"""Values tried in every text field."""

MARKUP = re.compile(r"<(script|img)|\]\(javascript", re.IGNORECASE)


@dataclass(frozen=True)
class Outcome:
    """What one case came to: its field and value, what the rule expects, and what the Space answered."""

    field: str
    value: str
    expected: str
    result: str
    reason: str = ""


def classify(field: str, value: str, expect_accept: bool, call: Callable[[], str], server_paths: tuple[Path, ...]):
    """Run one case and say what it came to."""
    expected = "accepted" if expect_accept else "rejected"
    try:
        answer = call()
    except Exception as err:  # what the fuzzer looks for: an exception instead of an answer
        return Outcome(field, value, expected, "crashed", f"{type(err).__name__}: {err}"[:200])
    if MARKUP.search(answer) or any(str(p) in answer.replace("\\", "") for p in server_paths):
        return Outcome(field, value, expected, "escaped", answer[:200])
    accepted = answer.startswith(("Submitted", "An identical request", "Approved", "sha256 "))
    if accepted and not expect_accept:
        return Outcome(field, value, expected, "accepted wrongly", answer[:200])
    if not accepted and expect_accept:
        return Outcome(field, value, expected, "rejected wrongly", answer[:200])
    reason = "" if accepted else answer.removeprefix("Rejected: ")[:200]
    return Outcome(field, value, expected, "accepted" if accepted else "rejected", reason)


@pytest.fixture()
def space(tmp_path) -> Leaderboard:
    """A deployment with an admin token, a generous rate limit (so each case meets the checks, not the limit) and
    one valid local model folder."""
    folder = tmp_path / "models" / "tiny"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"model_type": "llama"}))
    (folder / "model.safetensors").write_bytes(b"\0" * 16)
    settings = LeaderboardSettings(
        db_url=f"sqlite:///{tmp_path / 'queue.sqlite'}",
        rate_limit_per_hour=100_000,
        admin_token="the-admin-token",
        local_model_roots=(tmp_path / "models",),
    )
    return Leaderboard(settings)


def model_cases(local: Path) -> list[tuple[str, str, bool]]:
    """(field, value, accepted?) for the model submission form: each field hostile, the others valid."""
    root = local.parent
    aliases = (str(local), f"/{local}", f"{root}/./tiny", f"{root}/../models/tiny", f"{local}/")
    cases = [("model", value, value in (DEFAULT_MODEL, *aliases)) for value in (*HOSTILE, *aliases)]
    cases += [("revision", value, value.strip() in ("", "main")) for value in HOSTILE]
    cases += [("precision", value, value in PRECISIONS) for value in HOSTILE]
    cases += [("tasks", value, value.strip() in TASKS.names()) for value in HOSTILE]
    cases += [("metrics", value, value.strip() in METRICS.names()) for value in HOSTILE]
    cases += [("submitter", value, 0 < len(value.strip()) <= 200 and value.strip().isprintable()) for value in HOSTILE]
    return cases


def submit_model(space: Leaderboard, field: str, value: str) -> Callable[[], str]:
    form = {
        "model": DEFAULT_MODEL,
        "revision": "main",
        "precision": "auto",
        "tasks": ["factcheck"],
        "metrics": ["random_baseline"],
        "submitter": "fuzzer",
    }
    form[field] = [value] if field in ("tasks", "metrics") else value
    return lambda: space.submit_model(**form)


NAME = re.compile(r"[a-z][a-z0-9_]{1,63}")


def metric_cases() -> list[tuple[str, str, bool]]:
    """(field, value, accepted?) for the metric submission form (an uploaded module; a Hub id is refused offline)."""
    cases = [("name", value, bool(NAME.fullmatch(value)) and value not in METRICS) for value in HOSTILE]
    cases += [("hub_id", value, False) for value in HOSTILE if value.strip()]
    cases += [("metric model", value, value == DEFAULT_MODEL) for value in HOSTILE]
    cases += [("metric tasks", value, value.strip() in TASKS.names()) for value in HOSTILE]
    return cases


def submit_metric(space: Leaderboard, module: Path, field: str, value: str) -> Callable[[], str]:
    name = value if field == "name" else "fuzzed_metric"
    hub_id = value if field == "hub_id" else ""
    files = [] if field == "hub_id" else [module.with_name(f"{name}.py")] if NAME.fullmatch(name) else [module]
    model = value if field == "metric model" else DEFAULT_MODEL
    tasks = [value] if field == "metric tasks" else ["factcheck"]
    return lambda: space.submit_metric(name, hub_id, files, model, tasks, "fuzzer")


def run_cases(cases, call_for, server_paths) -> list[Outcome]:
    return [classify(field, value, accept, call_for(field, value), server_paths) for field, value, accept in cases]


def report(campaign, name: str, outcomes: list[Outcome]) -> None:
    for outcome in outcomes:
        campaign.record(name, f"{outcome.field}={outcome.value[:40]!r}", outcome.result, outcome.reason)
    wrong = [o for o in outcomes if o.result not in ("accepted", "rejected")]
    assert not wrong, "\n".join(map(str, wrong))
    assert all(o.reason for o in outcomes if o.result == "rejected"), "every rejection says why"


def test_fuzzed_model_submissions(space, tmp_path, campaign):
    local = tmp_path / "models" / "tiny"
    outcomes = run_cases(model_cases(local), lambda f, v: submit_model(space, f, v), (tmp_path,))
    board = space.board()
    board_frame(board_records(board)), board_plot(board_records(board)).to_json(), queue_table(space.queue.jobs())
    report(campaign, "input fuzzer: model form", outcomes)
    assert len(outcomes) >= 200


def test_fuzzed_metric_submissions(space, tmp_path, campaign):
    upload = tmp_path / "upload"
    upload.mkdir()
    module = upload / "fuzzed_metric.py"
    module.write_text("# an evaluate module\n")
    for value in HOSTILE:
        if NAME.fullmatch(value):
            module.with_name(f"{value}.py").write_text("# an evaluate module\n")
    outcomes = run_cases(metric_cases(), lambda f, v: submit_metric(space, module, f, v), (tmp_path,))
    report(campaign, "input fuzzer: metric form", outcomes)


def test_fuzzed_admin_actions(space, tmp_path, campaign):
    module = tmp_path / "upload" / "reviewed_metric.py"
    module.parent.mkdir()
    module.write_text("# the module under review\n")
    space.submit_metric("reviewed_metric", "", [module], DEFAULT_MODEL, ["factcheck"], "author")
    listing = space.review_metric(1, "the-admin-token", "admin")
    sha256 = listing.split()[1]
    cases = [("admin token", value, False) for value in HOSTILE]
    cases += [("sha256", value, False) for value in HOSTILE]
    cases += [("job id", str(value), False) for value in (-(2**70), -1, 0, 2, 2**31, 2**63 - 1, 2**63, 2**70)]

    def call_for(field: str, value: str) -> Callable[[], str]:
        client = f"fuzzer-{len(value)}-{hash(value)}"  # a client each, so the lock-out does not mask the checks
        if field == "admin token":
            return lambda: space.approve_metric(1, value, sha256, client)
        if field == "sha256":
            return lambda: space.approve_metric(1, "the-admin-token", value, client)
        return lambda: space.approve_metric(int(value), "the-admin-token", sha256, client)

    outcomes = run_cases(cases, call_for, (tmp_path,))
    outcomes.append(
        classify("sha256", sha256, True, lambda: space.approve_metric(1, "the-admin-token", sha256, "admin"), ())
    )
    report(campaign, "input fuzzer: admin", outcomes)


def page_of(space: Leaderboard, **query) -> Callable[[], str]:
    """A Queue API call as an answer: 'Approved' when it gives page 1 (or a page at all, for a status filter),
    'Rejected: why' when the query is refused."""

    def call() -> str:
        try:
            page = space.queue.jobs_page(**query)
        except ValueError as err:
            return f"Rejected: {err}"
        return "Approved" if page.page == 1 else f"page {page.page}"

    return call


def test_fuzzed_queue_pages(space, campaign):
    """The Queue API's status filter refuses anything but a status; a hostile submitter filter or page number
    still gives a page."""
    cases = [("queue status", value, value in STATUSES) for value in HOSTILE]
    cases += [("queue submitter", value, True) for value in HOSTILE]
    cases += [("queue page", str(number), True) for number in (-(2**63), -1, 0, 10**9, 2**63 - 1)]
    fields = {"queue status": "status", "queue submitter": "submitter", "queue page": "page"}

    def call_for(field: str, value: str) -> Callable[[], str]:
        return page_of(space, **{fields[field]: int(value) if field == "queue page" else value})

    report(campaign, "input fuzzer: queue pages", run_cases(cases, call_for, ()))
