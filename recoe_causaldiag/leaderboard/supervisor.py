"""The process between the worker and a submitted metric: it holds the metric to its time limit and leaves no
process of it behind, whatever the metric starts.

It makes itself a child subreaper (`PR_SET_CHILD_SUBREAPER`), so every process the metric starts and orphans,
`setsid()` or double fork included, becomes its child rather than init's; when the metric exits or its time is up,
it kills its children until none is left. Where it may (as root), it first unshares namespaces (`NAMESPACES`):
a network namespace, which holds only a loopback that is down, so the metric can reach no address by any protocol
(TCP, UDP, unix sockets in the abstract namespace), the worker's own ports included; and a PID namespace, in which
the metric is process 1 and sees no process outside it (it cannot name the app's processes, let alone signal them),
and whose every process the kernel kills when the metric ends. The metric's output goes to the files the worker gave
this process, never to pipes the worker waits on, so nothing the metric leaves can hold the worker.

Where it may (as root), it also puts the metric in a pids cgroup (`PidsCgroup`) that caps its processes and threads
together, so a fork bomb stops there.

Run as ``python -m recoe_causaldiag.leaderboard.supervisor PLAN -- COMMAND...``, PLAN a `Plan` as JSON; its status
file receives ``{"returncode", "timed_out", "namespaces", "pids_cgroup", "killed"}``.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

_PR_SET_CHILD_SUBREAPER = 36
NAMESPACES = {"network": 0x40000000, "pid": 0x20000000}
"""The namespaces the supervisor makes where it may, by name, with their `unshare` flags."""
KILL_ROUNDS_S = 10.0
REMOVE_WAIT_S = 5.0
PIDS_HIERARCHIES = (Path("/sys/fs/cgroup/pids"), Path("/sys/fs/cgroup"))
"""Where a pids cgroup may be made: the cgroup v1 pids hierarchy, or the v2 unified one."""


class PidsCgroup:
    """A cgroup of the pids controller that caps how many processes and threads its members may have together (a
    fork bomb stops there; `RLIMIT_NPROC` cannot do this for root, whom the kernel exempts)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    @classmethod
    def make(cls, limit: int) -> PidsCgroup | None:
        """A new cgroup capped at `limit` tasks, in the first hierarchy that allows one; None where none does."""
        for hierarchy in PIDS_HIERARCHIES:
            folder = hierarchy / f"causaldiag-{os.getpid()}"
            try:
                folder.mkdir()
            except OSError:
                continue
            try:
                (folder / "pids.max").write_text(str(limit))
                return cls(folder)
            except OSError:
                folder.rmdir()
        return None

    def join(self) -> None:
        """Move this process (and so what it starts) into the cgroup."""
        (self.folder / "cgroup.procs").write_text(str(os.getpid()))

    def remove(self) -> None:
        """Move this process back to its hierarchy's root and delete the cgroup, once the kernel has let go of the
        killed members (it refuses while they are being freed, for up to REMOVE_WAIT_S); one that still has
        members then is left for the operator, named on stderr."""
        (self.folder.parent / "cgroup.procs").write_text(str(os.getpid()))
        deadline = time.monotonic() + REMOVE_WAIT_S
        while True:
            try:
                self.folder.rmdir()
                return
            except OSError as err:
                if time.monotonic() > deadline:
                    print(f"supervisor: could not remove {self.folder}: {err}", file=sys.stderr)
                    return
                time.sleep(0.02)


def pids_cgroup_available() -> bool:
    """Whether this process may make a pids cgroup (one is made and removed)."""
    cgroup = PidsCgroup.make(1)
    if cgroup is None:
        return False
    cgroup.folder.rmdir()
    return True


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def become_subreaper() -> None:
    if _libc().prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")


def enter_namespaces(names: Sequence[str]) -> tuple[str, ...]:
    """Unshare the named `NAMESPACES` (the PID namespace takes effect for the processes started after this); the
    ones made: each on its own, so one the kernel refuses leaves the others."""
    return tuple(name for name in names if _libc().unshare(NAMESPACES[name]) == 0)


def available_namespaces() -> tuple[str, ...]:
    """The `NAMESPACES` this process may make (tried in a forked child, which exits at once)."""
    found = []
    for name in NAMESPACES:
        pid = os.fork()
        if pid == 0:
            os._exit(0 if enter_namespaces((name,)) else 1)
        if os.waitpid(pid, 0)[1] == 0:
            found.append(name)
    return tuple(found)


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid`, from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat[stat.rindex(")") + 2 :].split()[1]) == pid:
            found.append(int(entry.name))
    return found


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def kill_descendants() -> int:
    """Kill every process below this one, round after round (a killed process's children are orphaned to this
    subreaper and killed in the next round), until none is left or KILL_ROUNDS_S have passed; how many were
    killed."""
    me, killed, deadline = os.getpid(), 0, time.monotonic() + KILL_ROUNDS_S
    while time.monotonic() < deadline:
        _reap()
        alive = children(me)
        if not alive:
            break
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
        time.sleep(0.01)
    return killed


@dataclass(frozen=True)
class Plan:
    """What the supervisor does: run the command as `uid`/`gid` (-1: the worker's) for at most `limit_s` seconds,
    in the `namespaces` it may make, with at most `max_tasks` processes and threads where it may make a pids cgroup
    (0: none), as a child subreaper (`subreaper`; only tests that show what it stops leave it out), and write its
    status to the file `status`."""

    status: str
    limit_s: float
    uid: int = -1
    gid: int = -1
    namespaces: tuple[str, ...] = ()
    max_tasks: int = 0
    subreaper: bool = True


def supervise(command: Sequence[str], plan: Plan) -> dict:
    """Run `command` as `plan` says, then kill everything it left."""
    if plan.subreaper:
        become_subreaper()
    made = enter_namespaces(plan.namespaces)
    cgroup = PidsCgroup.make(plan.max_tasks) if plan.max_tasks > 0 else None
    if cgroup is not None:
        cgroup.join()
    identity = {"user": plan.uid, "group": plan.gid, "extra_groups": []} if plan.uid >= 0 else {}
    child = subprocess.Popen(command, stdin=subprocess.DEVNULL, start_new_session=True, **identity)
    try:
        returncode, timed_out = child.wait(timeout=plan.limit_s), False
    except subprocess.TimeoutExpired:
        returncode, timed_out = None, True
    killed = kill_descendants()
    if timed_out:
        child.wait()
    if cgroup is not None:
        cgroup.remove()
    return {
        "returncode": returncode,
        "timed_out": timed_out,
        "namespaces": list(made),
        "pids_cgroup": cgroup is not None,
        "killed": killed,
    }


def main(argv: Sequence[str]) -> int:
    plan_json, separator, *command = argv
    if separator != "--" or not command:
        raise SystemExit("usage: supervisor PLAN -- COMMAND...")
    plan = json.loads(plan_json)
    plan = Plan(**{**plan, "namespaces": tuple(plan["namespaces"])})
    Path(plan.status).write_text(json.dumps(supervise(command, plan)), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
