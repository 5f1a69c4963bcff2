"""Submitted metrics run here: in a child process of its own process group, with a time limit (the whole group
is killed), on a copy of the module in a scratch folder, and with an environment stripped of the queue's database
URL, every token and password.

The child is confined before it loads the submitted code, by Landlock (`landlock`): it may read the Python
installation, this package, the model caches and a few system folders, and write only its scratch folder and
/dev, so it cannot open the queue's SQLite file or anything else of the app's; it cannot read the app's /proc
entries either (a child running as root first drops every capability). Where the kernel has no Landlock, a
submitted metric runs only as a separate sandbox user (the app running as root), and is refused otherwise. With a
sandbox user, the child runs as that user and is confined too where Landlock exists.

Run as ``python -m recoe_causaldiag.leaderboard.metric_sandbox IN.json OUT.json``: IN holds the module source,
the model and the instances; OUT receives ``{"variant", "scores"}`` as the module returned them. The child runs
untrusted code and may write anything there, so the parent checks the answer (`read_answer`) before any of it
becomes a score.
"""

from __future__ import annotations

import json
import math
import os
import pwd
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from ..api.records import PairRecord
from ..paths import cache_root
from . import landlock
from .integrity import InvalidData, check_name, check_scores
from .module_source import ModuleFetchError, ModuleSource, fetch_module
from .settings import ALLOW_REDUCED_ENV, SECRET_ENV_VARS
from .supervisor import NAMESPACES, Plan, available_namespaces, pids_cgroup_available

OUTPUT_TAIL_CHARS = 3000
GRACE_S = 30.0
"""How long past the metric's time limit the worker waits for the supervisor (which kills what is left)."""
MAX_ANSWER_BYTES = 16 * 2**20
PACKAGE_DIR = Path(__file__).resolve().parents[1]


class MetricRunError(RuntimeError):
    """The submitted metric failed, timed out or returned something other than one score per instance."""


@dataclass(frozen=True)
class SubmittedScores:
    """Scores of the faithful and unfaithful explanation of each pair under one variant of a submitted metric."""

    variant: str
    faithful: np.ndarray
    unfaithful: np.ndarray


def sandbox_environment(secrets: Sequence[str], scratch: Path) -> dict[str, str]:
    """The parent's environment without credentials (named secret variables, tokens, passwords, PostgreSQL
    settings, any variable holding a secret), with home and caches in the scratch folder."""
    hidden = [s for s in secrets if s]
    kept = {
        k: v
        for k, v in os.environ.items()
        if k not in SECRET_ENV_VARS
        and not k.startswith("PG")
        and not k.endswith("_TOKEN")
        and "PASSWORD" not in k
        and "SECRET" not in k
        and not any(s in v for s in hidden)
    }
    return {
        **kept,
        "HOME": str(scratch),
        "HF_HOME": str(scratch / "huggingface"),
        "XDG_CACHE_HOME": str(scratch),
        "TMPDIR": str(scratch),
        "MPLCONFIGDIR": str(scratch / "matplotlib"),
    }


SYSTEM_READABLE = (
    "/usr",
    "/lib",
    "/lib64",
    "/lib32",
    "/bin",
    "/sbin",
    "/sys",
    "/proc",
    "/etc/ssl",
    "/etc/pki",
    "/etc/ca-certificates",
    "/etc/hosts",
    "/etc/resolv.conf",
    "/etc/nsswitch.conf",
    "/etc/host.conf",
    "/etc/gai.conf",
    "/etc/passwd",
    "/etc/group",
    "/etc/localtime",
    "/etc/ld.so.cache",
    "/etc/mime.types",
)


DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
"""The only device files a metric may open: no /dev/shm (where it could leave data behind or read another
process's), no /dev/kvm."""


@dataclass(frozen=True)
class Confinement:
    """What the metric's process may read and what it may also write (Landlock rules); `without` names Landlock
    layers left out (`landlock.layers`), which only the tests that show what a layer stops do."""

    read_only: tuple[str, ...]
    read_write: tuple[str, ...]
    without: tuple[str, ...] = ()

    @classmethod
    def for_run(cls, scratch: Path, model: str, protected: Sequence[Path]) -> Confinement:
        """The Python installation, this package, the model caches (and the model's folder when it is a local
        path), system folders; writable: the scratch folder and the `DEVICES`. Refuses a layout in which one of
        these folders holds a `protected` path (the queue's database)."""
        import site

        roots = {
            sys.prefix,
            sys.base_prefix,
            sys.exec_prefix,
            sys.base_exec_prefix,
            *site.getsitepackages(),
            str(PACKAGE_DIR),
            str(cache_root() / "models"),
            str(cache_root() / "gguf"),
            *SYSTEM_READABLE,
        }
        folder = Path(model).expanduser()
        if folder.is_dir():  # a Hub cache snapshot's files link to its repository's blobs, so that folder is read
            roots.add(str(folder.parents[1] if folder.parent.name == "snapshots" else folder))
        confinement = cls(tuple(sorted(roots)), (str(scratch), *DEVICES))
        for path in protected:
            for root in confinement.read_only + confinement.read_write:
                if Path(path).resolve().is_relative_to(Path(root).resolve()):
                    raise MetricRunError(
                        f"the sandbox must read {root}, which holds {path}: move the queue's "
                        "database out of it to run submitted metrics"
                    )
        return confinement


PIDS_CGROUP = "pids cgroup"
LAYERS = (*landlock.ALL_LAYERS, *(f"{name} namespace" for name in NAMESPACES), PIDS_CGROUP)
"""The containment layers that depend on the host (the supervisor's subreaper and the resource limits do not)."""


@dataclass(frozen=True)
class Containment:
    """The containment layers of submitted metrics this host has (`LAYERS`), and those it lacks."""

    available: tuple[str, ...]

    @property
    def missing(self) -> tuple[str, ...]:
        return tuple(layer for layer in LAYERS if layer not in self.available)

    def describe(self, allow_reduced: bool) -> str:
        """One line for the queue's status: full, reduced and allowed by the operator, or reduced and refused."""
        if not self.missing:
            return f"Submitted metrics run fully contained: {', '.join(self.available)}, a subreaper, resource limits."
        verdict = (
            "they run, as the operator allows" if allow_reduced else "they are refused until the operator allows it"
        )
        return f"Containment of submitted metrics is reduced here (missing: {', '.join(self.missing)}); {verdict}."


@cache
def host_containment() -> Containment:
    """The layers this host offers: Landlock's by its ABI version, the namespaces and the pids cgroup this process
    may make."""
    namespaces = tuple(f"{name} namespace" for name in available_namespaces())
    cgroup = (PIDS_CGROUP,) if pids_cgroup_available() else ()
    return Containment((*landlock.layers(landlock.abi_version()), *namespaces, *cgroup))


def _stage(source: str, scratch: Path, sha256: str | None) -> str:
    """The module the child loads, as a folder inside the scratch folder (`fetch_module`); with `sha256`, only when
    its files are exactly the ones approved."""
    try:
        folder = fetch_module(source, scratch)
    except ModuleFetchError as err:
        raise MetricRunError(str(err)) from None
    if sha256 is not None and ModuleSource.read(folder).sha256 != sha256:
        raise MetricRunError("the module is not the one the admin approved (its sha256 differs); it was not run")
    return str(folder)


@dataclass(frozen=True)
class Limits:
    """What one run of a submitted metric may use: wall-clock seconds and processes and threads together (`tasks`,
    held by the supervisor's pids cgroup), and the `resource.setrlimit` caps the metric's process and its children
    get: address space, size of any file written, CPU seconds."""

    time_limit_s: float
    memory_bytes: int = 8 * 2**30
    file_bytes: int = 256 * 2**20
    tasks: int = 512

    @property
    def cpu_s(self) -> int:
        return math.ceil(self.time_limit_s * (os.cpu_count() or 1)) + 10

    def to_json(self) -> dict[str, float]:
        """The caps as the child applies them (`limit_self`)."""
        return {"memory_bytes": self.memory_bytes, "file_bytes": self.file_bytes, "cpu_s": self.cpu_s}


@dataclass(frozen=True)
class Isolation:
    """The supervisor's layers a run asks for, where the host has them: the `namespaces` (`supervisor.NAMESPACES`)
    and the child subreaper; only the tests that show what a layer stops leave one out."""

    namespaces: tuple[str, ...] = tuple(NAMESPACES)
    subreaper: bool = True


def _run_child(
    command: list[str], scratch: Path, env: dict[str, str], limits: Limits, user: str | None, isolation: Isolation
) -> subprocess.CompletedProcess:
    """Run `command` under the supervisor (`supervisor.py`): within `limits.time_limit_s`, nothing left running after
    it, output to files in a folder of the worker's that the metric cannot open; with the `isolation` layers the
    supervisor may make, and at most `limits.tasks` processes and threads where it may make a pids cgroup."""
    uid = gid = -1
    if user:
        account = pwd.getpwnam(user)
        for path in (scratch, *scratch.rglob("*")):
            os.chown(path, account.pw_uid, account.pw_gid)
        uid, gid = account.pw_uid, account.pw_gid
    time_limit_s = limits.time_limit_s
    with tempfile.TemporaryDirectory(prefix="causaldiag-supervisor-") as private:
        status, out, err = (Path(private) / name for name in ("status.json", "stdout", "stderr"))
        plan = Plan(str(status), time_limit_s, uid, gid, isolation.namespaces, limits.tasks, isolation.subreaper)
        supervisor = [sys.executable, "-m", f"{__package__}.supervisor", json.dumps(asdict(plan)), "--", *command]
        try:
            with out.open("wb") as stdout, err.open("wb") as stderr:
                done = subprocess.run(
                    supervisor, cwd=scratch, env=env, stdout=stdout, stderr=stderr, timeout=time_limit_s + GRACE_S
                )
        except subprocess.TimeoutExpired:
            raise MetricRunError("the sandbox's supervisor did not end in time") from None
        if done.returncode != 0 or not status.is_file():
            raise MetricRunError("the sandbox's supervisor failed")
        state = json.loads(status.read_text(encoding="utf-8"))
        if state["timed_out"]:
            raise MetricRunError(f"the submitted metric exceeded its time limit of {time_limit_s:g} s")
        return subprocess.CompletedProcess(command, state["returncode"], _tail(out), _tail(err))


def _tail(path: Path) -> str:
    """The last OUTPUT_TAIL_CHARS characters of a file of the metric's output."""
    with path.open("rb") as file:
        file.seek(max(path.stat().st_size - 4 * OUTPUT_TAIL_CHARS, 0))
        return file.read().decode("utf-8", errors="replace")[-OUTPUT_TAIL_CHARS:]


def score_submitted_metric(
    source: str,
    model: str,
    pairs: Sequence[PairRecord],
    *,
    time_limit_s: float,
    secrets: Sequence[str],
    user: str | None = None,
    protected: Sequence[Path] = (),
    isolation: Isolation = Isolation(),
    allow_reduced: bool = False,
    sha256: str | None = None,
    revision: str = "main",
) -> SubmittedScores:
    """Score both explanations of every pair with the submitted `evaluate` module in an isolated child process
    (as `user` when given: needs root) that can read none of the `protected` paths, within `Limits` and the
    `isolation` layers the supervisor may make (as root); with `sha256`, only when the module's files hash to it
    (`ModuleSource`). The model is made local first (`fetch_model`): the metric's process has no network. Refused
    where a containment layer is missing on this host
    (`Containment.missing`) unless `allow_reduced`, and always where neither Landlock nor a sandbox user
    isolates the metric."""
    confined = landlock.abi_version() > 0
    if not confined and not user:
        raise MetricRunError(
            "submitted metrics need isolation: this kernel has no Landlock, so set "
            "CAUSALDIAG_SANDBOX_USER (with the app running as root) to run them as a separate user"
        )
    missing = host_containment().missing
    if missing and not allow_reduced:
        raise MetricRunError(
            f"containment is reduced on this host (missing: {', '.join(missing)}); submitted metrics run only "
            f"when the operator allows that ({ALLOW_REDUCED_ENV}=1)"
        )
    model = fetch_model(model, revision)
    instances = [
        {"question": p.question, "choices": list(p.choices), "edits": list(p.edits), "explanation": e}
        for p in pairs
        for e in (p.explanation_faithful, p.explanation_unfaithful)
    ]
    limits = Limits(time_limit_s)
    with tempfile.TemporaryDirectory(prefix="causaldiag-metric-") as folder:
        scratch = Path(folder)
        request, answer = scratch / "in.json", scratch / "out.json"
        confinement = Confinement.for_run(scratch, model, protected) if confined else None
        request.write_text(
            json.dumps(
                {
                    "source": _stage(source, scratch, sha256),
                    "model": model,
                    "instances": instances,
                    "confinement": asdict(confinement) if confinement else None,
                    "limits": limits.to_json(),
                }
            ),
            encoding="utf-8",
        )
        done = _run_child(
            [sys.executable, "-m", __name__, str(request), str(answer)],
            scratch,
            sandbox_environment(secrets, scratch),
            limits,
            user,
            isolation,
        )
        if done.returncode != 0:
            output = done.stderr or done.stdout
            last = next((line.strip() for line in reversed(output.splitlines()) if line.strip()), "no output")
            raise MetricRunError(f"the submitted metric failed (exit {done.returncode}): {last}\n{output}")
        return read_answer(answer, len(pairs))


def fetch_model(model: str, revision: str) -> str:
    """The model as the metric's process may load it without network: a packaged model by its name, converted into
    the model cache here; a local folder as it is; a Hub model's files at `revision` fetched here, as the path of
    their folder (which the sandbox may read)."""
    from ..models import packaged_model_dir
    from ..packaged_models import PACKAGED_MODELS

    if model in PACKAGED_MODELS:
        packaged_model_dir(model)
        return model
    if model.startswith("/"):
        return model
    from huggingface_hub import snapshot_download

    try:
        return snapshot_download(model, revision=revision)
    except Exception:  # the Hub client raises many kinds (not found, gated, network); each is one refusal
        raise MetricRunError(f"the Hub model {model} at {revision} could not be fetched") from None


def read_answer(path: Path, n_pairs: int) -> SubmittedScores:
    """The child's answer, checked: a JSON object (at most MAX_ANSWER_BYTES) with a `variant` name of
    `integrity.SAFE_NAME` and `scores`, a list of the faithful and the unfaithful explanation's score of each pair in
    turn (2 × `n_pairs`), each a finite number or null / NaN where the metric declined. Anything else (±inf, strings,
    digit strings, bools, nested lists, a wrong count) is a MetricRunError with a short, path-free reason."""
    if not path.is_file():
        raise MetricRunError("the submitted metric wrote no answer")
    if path.stat().st_size > MAX_ANSWER_BYTES:
        raise MetricRunError(f"the submitted metric's answer is over {MAX_ANSWER_BYTES} bytes")
    try:
        answer = json.loads(path.read_bytes())
    except (ValueError, RecursionError):
        raise MetricRunError("the submitted metric's answer is not JSON") from None
    try:
        if not isinstance(answer, dict):
            raise InvalidData("the answer is not an object with 'variant' and 'scores'")
        variant = check_name("variant", answer.get("variant"))
        scores = check_scores(answer.get("scores"), 2 * n_pairs)
    except InvalidData as err:
        raise MetricRunError(f"the submitted metric returned an invalid answer: {err}") from None
    return SubmittedScores(variant, scores[0::2], scores[1::2])


def _plain(value: Any) -> Any:
    """A NumPy (or torch) value of compute()'s output as a Python one for JSON; the parent checks every entry."""
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"compute() returned a {type(value).__name__}, which JSON cannot hold")


def _compute(request: Mapping) -> dict:
    import evaluate

    module = evaluate.load(request["source"])
    instances = request["instances"]
    output = module.compute(
        question=[i["question"] for i in instances],
        choices=[i["choices"] for i in instances],
        edits=[i["edits"] for i in instances],
        explanations=[i["explanation"] for i in instances],
        model=request["model"],
    )
    if not isinstance(output, Mapping) or "scores" not in output:
        raise MetricRunError("the module's compute() must return a mapping with 'scores' (one per input)")
    return {"variant": output.get("variant", "default"), "scores": output["scores"]}


def confine_self(confinement: Mapping[str, Sequence[str]]) -> None:
    """Apply the parent's Landlock rules to this process, after dropping root's capabilities."""
    if os.geteuid() == 0:
        landlock.drop_capabilities()
    landlock.confine(confinement["read_only"], confinement["read_write"], without=confinement.get("without", ()))


def limit_self(limits: Mapping[str, float]) -> None:
    """Cap this process and its children (`Limits`): address space, file size, CPU seconds, no core dumps."""
    import resource

    for which, value in (
        (resource.RLIMIT_AS, limits["memory_bytes"]),
        (resource.RLIMIT_FSIZE, limits["file_bytes"]),
        (resource.RLIMIT_CPU, limits["cpu_s"]),
        (resource.RLIMIT_CORE, 0),
    ):
        resource.setrlimit(which, (int(value), int(value)))


def main(argv: Sequence[str]) -> int:
    request_path, answer_path = argv
    request = json.loads(Path(request_path).read_text(encoding="utf-8"))
    limit_self(request["limits"])
    if request["confinement"] is not None:
        confine_self(request["confinement"])
    result = _compute(request)
    Path(answer_path).write_text(json.dumps(result, default=_plain), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
