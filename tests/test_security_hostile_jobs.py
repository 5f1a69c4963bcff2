"""Hostile metrics as whole jobs, through the queue and a worker: a metric that kills the app, sleeps forever in a
`setsid` grandchild, opens a socket, or fills /dev/shm ends FAILED with a short, path-free reason, while the app
(this process), the worker and the queue go on: the next job runs and finishes. A metric that kills its parent
reaches nothing: in its PID namespace it has no parent (`getppid()` is 0, so the kill lands on its own group, which
the kernel ignores for a namespace's first process) and it finishes with its own scores; without the namespace,
Landlock's scoping refuses the kill and the job fails. Either way the supervisor, its parent, lives."""

from __future__ import annotations

import os
import socket
import time

import pytest
from fakes import claim_pair
from submitted_modules import submitted_module

from recoe_causaldiag.api.run_spec import DatasetIdentity
from recoe_causaldiag.leaderboard import landlock, worker
from recoe_causaldiag.leaderboard.module_source import ModuleSource
from recoe_causaldiag.leaderboard.queue import FAILED, FINISHED, METRIC_JOB, JobQueue, JobRequest
from recoe_causaldiag.leaderboard.settings import LeaderboardSettings
from recoe_causaldiag.models import DEFAULT_MODEL
from recoe_causaldiag.task_pairs import TaskPairs
from recoe_causaldiag.tasks import DATASET_VERSION

pytestmark = [
    pytest.mark.security,
    pytest.mark.skipif(landlock.abi_version() < 1, reason="submitted metrics run only confined: needs Landlock"),
]

ATTACKS = {
    "kills_its_parent": "os.kill(os.getppid(), signal.SIGKILL)",
    "kills_the_app": "os.kill(int(os.environ['APP_PID']), signal.SIGKILL)",
    "sleeps_forever": (
        "subprocess.Popen(['sleep', 'infinity'], start_new_session=True, stdin=subprocess.DEVNULL); time.sleep(3600)"
    ),
    "opens_a_socket": "socket.create_connection(('127.0.0.1', int(os.environ['APP_PORT'])), timeout=2)",
    "fills_dev_shm": "open('/dev/shm/causaldiag-hostile', 'wb').write(b'x' * 2**20)",
}
EXPECTED_ENDS = {"kills_its_parent": (FAILED, FINISHED)}
"""How a job may end besides FAILED (see the module's docstring)."""
TIME_LIMIT_S = 15
PREAMBLE = "\n".join(f"import {name}" for name in ("os", "signal", "socket", "subprocess", "time"))


def attack_module(folder, name: str, attack: str):
    module = folder / name
    module.mkdir()
    body = f"""
            {attack}
            return {{"variant": "v", "scores": [1.0] * len(explanations)}}
"""
    (module / f"{name}.py").write_text(submitted_module(name.title().replace("_", ""), body, PREAMBLE))
    return module


def test_hostile_metric_jobs_fail_and_the_worker_goes_on(tmp_path, monkeypatch, campaign):
    pairs = TaskPairs("factcheck", DatasetIdentity("factcheck", DATASET_VERSION, "0" * 64), (claim_pair(0),))
    monkeypatch.setattr(worker, "iter_task_pairs", lambda *args, **kwargs: iter([pairs]))
    monkeypatch.setenv("APP_PID", str(os.getpid()))
    with socket.socket() as app_port:
        app_port.bind(("127.0.0.1", 0))
        app_port.listen()
        monkeypatch.setenv("APP_PORT", str(app_port.getsockname()[1]))
        settings = LeaderboardSettings(db_url=f"sqlite:///{tmp_path / 'q.sqlite'}", metric_time_limit_s=TIME_LIMIT_S)
        queue = JobQueue.open(settings.db_url)
        the_worker = worker.Worker(queue, settings)
        outcomes = {}
        for name, attack in ATTACKS.items():
            module = attack_module(tmp_path, name, attack)
            request = JobRequest(
                METRIC_JOB, DEFAULT_MODEL, "main", "auto", "ice", "synthetic", ("factcheck",), (name,), str(module)
            )
            job = queue.submit(request, "attacker", pair_cap=None).job
            queue.approve(job.id, ModuleSource.read(module).sha256)
            started = time.monotonic()
            ended = the_worker.run_once()
            short = len(ended.reason) < 300 and str(tmp_path) not in ended.reason and "Traceback" not in ended.reason
            ended_as_expected = ended.status in EXPECTED_ENDS.get(name, (FAILED,)) and "supervisor" not in ended.reason
            held = ended_as_expected and short and time.monotonic() - started < TIME_LIMIT_S + 30
            outcomes[name] = (held, ended.status, ended.reason)
            campaign.record("hostile jobs", name, "rejected" if held else "escaped", ended.reason or ended.status)
        assert not os.path.exists("/dev/shm/causaldiag-hostile")
        good = attack_module(tmp_path, "well_behaved", "pass")
        request = JobRequest(
            METRIC_JOB, DEFAULT_MODEL, "main", "auto", "ice", "synthetic", ("factcheck",), ("well_behaved",), str(good)
        )
        job = queue.submit(request, "author", pair_cap=None).job
        queue.approve(job.id, ModuleSource.read(good).sha256)
        after = the_worker.run_once()
        campaign.record("hostile jobs", "a good job after them", "accepted" if after.status == FINISHED else "lost")
    assert all(held for held, _, _ in outcomes.values()), outcomes
    finished = 1 + sum(status == FINISHED for _, status, _ in outcomes.values())
    assert (after.status, len(queue.stored_scores().valid)) == (FINISHED, finished), after.reason
