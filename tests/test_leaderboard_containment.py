"""Containment of submitted metrics (issue 14), each layer tested by a hostile module that escapes with the layer
switched off: the supervisor kills a `setsid` grandchild and the worker never waits for it; Landlock's scoping
keeps the metric from signalling processes outside its sandbox; Landlock's network rules refuse TCP; the network
namespace refuses everything else (UDP); the PID namespace hides the app's processes; the narrowed /dev keeps it
out of /dev/shm; the resource limits cap its memory; the pids cgroup stops a fork bomb."""

from __future__ import annotations

import dataclasses
import functools
import os
import signal
import socket
import time

import pytest
from submitted_modules import submitted_module

from recoe_causaldiag.leaderboard import landlock, metric_sandbox, supervisor
from recoe_causaldiag.leaderboard.metric_sandbox import Confinement, Isolation, MetricRunError, score_submitted_metric
from recoe_causaldiag.leaderboard.supervisor import available_namespaces

HOSTILE = submitted_module(
    "Hostile",
    """
            what = os.environ["HOSTILE"]
            variant = SHOWN[what]() if what in SHOWN else attempt(ACTIONS[what])
            return {"variant": variant, "scores": [1.0] * len(explanations)}
""",
    """
    import mmap
    import os
    import signal
    import socket
    import subprocess

    def attempt(action):
        try:
            action()
            return "escaped"
        except OSError:
            return "stopped"

    def grandchild():
        process = subprocess.Popen(["sleep", "600"], start_new_session=True, stdin=subprocess.DEVNULL)
        return f"pid {process.pid}"

    def signal_outside():
        os.kill(int(os.environ["HOSTILE_TARGET"]), signal.SIGUSR1)

    def tcp():
        socket.create_connection(("127.0.0.1", int(os.environ["HOSTILE_PORT"])), timeout=2).close()

    def udp():
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(b"x", ("127.0.0.1", int(os.environ["HOSTILE_PORT"])))

    def shm():
        with open("/dev/shm/causaldiag-hostile", "w") as f:
            f.write("left behind")

    def big_file():
        with open("big", "wb") as f:
            f.write(b"x" * (300 * 2**20))

    def processes():
        for _ in range(600):
            subprocess.Popen(["sleep", "60"], stdin=subprocess.DEVNULL)

    def memory():
        mmap.mmap(-1, 9 * 2**30).close()  # reserved, never touched: no memory is used when it is allowed

    SHOWN = {"grandchild": grandchild, "pid": lambda: f"pid {os.getpid()}"}
    ACTIONS = {"signal": signal_outside, "tcp": tcp, "udp": udp, "shm": shm, "memory": memory,
               "processes": processes, "big_file": big_file}
""",
)

pytestmark = [
    pytest.mark.security("hostile modules"),  # a sandboxed process per case, run by `make test-security`
    pytest.mark.skipif(
        landlock.abi_version() < 1, reason="submitted metrics run only confined: needs a kernel with Landlock"
    ),
]
needs_scoping = pytest.mark.skipif(
    landlock.abi_version() < landlock.SCOPING_ABI, reason="needs Landlock ABI 6 (signal scoping)"
)
needs_network_rules = pytest.mark.skipif(
    landlock.abi_version() < landlock.NETWORK_ABI, reason="needs Landlock ABI 4 (TCP rules)"
)


def can_make(namespace: str) -> bool:
    return namespace in available_namespaces()


@pytest.fixture
def hostile(tmp_path, monkeypatch, factcheck_pairs):
    """Run the hostile module doing `what` with the Landlock `layers_off` left out; its variant says what came of
    it."""
    module = tmp_path / "hostile"
    module.mkdir()
    (module / "hostile.py").write_text(HOSTILE)
    for_run = Confinement.for_run

    def run(
        what: str,
        layers_off: tuple[str, ...] = (),
        *,
        namespaces: tuple[str, ...] = ("network", "pid"),
        subreaper: bool = True,
        writable: tuple[str, ...] = (),
        time_limit_s: float = 120,
    ) -> str:
        monkeypatch.setenv("HOSTILE", what)

        def confinement(cls, *args):
            default = for_run(*args)
            return dataclasses.replace(default, read_write=default.read_write + writable, without=layers_off)

        monkeypatch.setattr(Confinement, "for_run", classmethod(confinement))
        scored = score_submitted_metric(
            str(module),
            "smollm2-135m-instruct",
            factcheck_pairs[:1],
            time_limit_s=time_limit_s,
            secrets=(),
            isolation=Isolation(namespaces, subreaper),
        )
        return scored.variant

    return run


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return not open(f"/proc/{pid}/stat").read().split(") ")[1].startswith("Z")


def test_a_setsid_grandchild_is_killed_and_never_holds_the_worker(hostile, monkeypatch):
    def outlives_its_metric(**isolation) -> bool:
        started = time.monotonic()
        pid = int(hostile("grandchild", **isolation).split()[1])  # pids as this process sees them: no PID namespace
        assert time.monotonic() - started < 60, "the worker waited for the grandchild"
        deadline = time.monotonic() + 5
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        survived = alive(pid)
        if survived:
            os.kill(pid, signal.SIGKILL)
        return survived

    assert not outlives_its_metric(namespaces=("network",)), "the subreaper kills it"
    without_cgroup = functools.partial(metric_sandbox.Limits, tasks=0)  # the escaped grandchild would pin a cgroup
    monkeypatch.setattr(metric_sandbox, "Limits", without_cgroup)
    assert outlives_its_metric(namespaces=("network",), subreaper=False), "control: without the subreaper it lives on"


@needs_scoping
def test_a_metric_cannot_signal_a_process_outside_its_sandbox(hostile, monkeypatch):
    received = []
    previous = signal.signal(signal.SIGUSR1, lambda *_: received.append(1))
    try:
        monkeypatch.setenv("HOSTILE_TARGET", str(os.getpid()))
        assert hostile("signal", namespaces=()) == "stopped" and not received
        assert hostile("signal", (landlock.SCOPING,), namespaces=()) == "escaped" and received, (
            "control: without scoping the signal arrives"
        )
    finally:
        signal.signal(signal.SIGUSR1, previous)


@pytest.mark.skipif(not can_make("pid"), reason="needs a PID namespace (root)")
def test_the_pid_namespace_hides_every_process_outside_it(hostile, monkeypatch):
    received = []
    previous = signal.signal(signal.SIGUSR1, lambda *_: received.append(1))
    try:
        monkeypatch.setenv("HOSTILE_TARGET", str(os.getpid()))
        assert hostile("pid") == "pid 1", "the metric is the first process of its own namespace"
        assert hostile("signal", (landlock.SCOPING,)) == "stopped" and not received, "no such process in there"
        assert hostile("signal", (landlock.SCOPING,), namespaces=("network",)) == "escaped" and received, (
            "control: without the PID namespace (and scoping) the signal arrives"
        )
    finally:
        signal.signal(signal.SIGUSR1, previous)


@pytest.fixture
def listener(monkeypatch):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        monkeypatch.setenv("HOSTILE_PORT", str(server.getsockname()[1]))
        yield server


@needs_network_rules
def test_landlock_refuses_tcp(hostile, listener):
    assert hostile("tcp", namespaces=()) == "stopped"
    assert hostile("tcp", (landlock.NETWORK,), namespaces=()) == "escaped", "control: the port is reachable"


@pytest.mark.skipif(not can_make("network"), reason="needs a network namespace (root)")
def test_the_network_namespace_refuses_what_landlock_does_not_cover(hostile, listener):
    assert hostile("udp", (landlock.NETWORK,)) == "stopped"
    assert hostile("tcp", (landlock.NETWORK,)) == "stopped"
    assert hostile("udp", (landlock.NETWORK,), namespaces=()) == "escaped", "control: UDP leaves without it"


def test_a_metric_leaves_nothing_in_dev_shm(hostile):
    left = "/dev/shm/causaldiag-hostile"
    assert hostile("shm") == "stopped" and not os.path.exists(left)
    try:
        assert hostile("shm", writable=("/dev/shm",)) == "escaped", "control: with /dev/shm writable it is written"
    finally:
        if os.path.exists(left):
            os.remove(left)


def test_the_memory_limit_refuses_a_huge_allocation(hostile, monkeypatch):
    assert hostile("memory") == "stopped"
    monkeypatch.setattr(metric_sandbox, "Limits", functools.partial(metric_sandbox.Limits, memory_bytes=2**40))
    assert hostile("memory") == "escaped", "control: without the address-space limit 9 GiB are reserved"


def test_a_hub_module_is_fetched_by_the_worker_so_the_metric_needs_no_network(tmp_path, monkeypatch, factcheck_pairs):
    import huggingface_hub

    fetched = []

    def snapshot_download(repo_id, *, repo_type, local_dir, allow_patterns):
        fetched.append((repo_id, repo_type))
        local_dir.mkdir(parents=True)
        (local_dir / "hostile.py").write_text(HOSTILE)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    monkeypatch.setenv("HOSTILE", "shm")
    scored = score_submitted_metric(
        "someone/hostile", "smollm2-135m-instruct", factcheck_pairs[:1], time_limit_s=120, secrets=()
    )
    assert fetched == [("someone/hostile", "space")] and scored.variant == "stopped"


def test_the_time_limit_still_holds(hostile):
    with pytest.raises(MetricRunError, match="time limit of 0.5 s"):
        hostile("grandchild", time_limit_s=0.5)


@pytest.mark.skipif(not supervisor.pids_cgroup_available(), reason="needs a pids cgroup (root)")
def test_the_pids_cgroup_stops_a_fork_bomb(hostile, monkeypatch):
    assert hostile("processes") == "stopped"
    monkeypatch.setattr(metric_sandbox, "Limits", functools.partial(metric_sandbox.Limits, tasks=0))
    assert hostile("processes") == "escaped", "control: without the cgroup 600 processes start"


def test_the_file_size_limit_stops_a_huge_file(hostile, monkeypatch):
    assert hostile("big_file") == "stopped"
    monkeypatch.setattr(metric_sandbox, "Limits", functools.partial(metric_sandbox.Limits, file_bytes=2**40))
    assert hostile("big_file") == "escaped", "control: without the file-size limit 300 MiB are written"
