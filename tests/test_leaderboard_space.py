"""The Space end to end through `gradio_client`: submit the default model on one task and one metric with a
small pair cap, see the job reach FINISHED, and find it on the board."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(condition, timeout_s: float, what: str, poll_s: float = 1.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(poll_s)
    raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")


@pytest.fixture()
def space_url(tmp_path):
    """The Space started as `make space` does, with its own SQLite queue and a pair cap of 4."""
    port = free_port()
    env = {
        **os.environ,
        "PORT": str(port),
        "CAUSALDIAG_LEADERBOARD_DB": f"sqlite:///{tmp_path / 'queue.sqlite'}",
        "CAUSALDIAG_PAIR_CAP": "4",
        "CAUSALDIAG_RATE_LIMIT": "50",
        "GRADIO_ANALYTICS_ENABLED": "False",
        "CAUSALDIAG_SEED_RESULTS": "",
    }
    log = (tmp_path / "space.log").open("w")
    app = subprocess.Popen(
        [sys.executable, str(ROOT / "leaderboard_space" / "app.py")], env=env, stdout=log, stderr=subprocess.STDOUT
    )
    url = f"http://127.0.0.1:{port}/"
    try:

        def up() -> bool:
            assert app.poll() is None, (tmp_path / "space.log").read_text()
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", port)) == 0

        wait_for(up, 120, "the Space to listen")
        yield url
    finally:
        app.terminate()
        app.wait(timeout=30)


def test_submit_default_model_reaches_finished_and_the_board(space_url):
    from gradio_client import Client

    client = Client(space_url, verbose=False)
    answer = client.predict(
        "smollm2-135m-instruct", "main", "auto", ["factcheck"], ["filler_tokens"], "ice", api_name="/submit_model"
    )
    assert answer.startswith("Submitted: job **#1**"), answer

    def finished():
        table = client.predict("", "all", 1, api_name="/queue_status")
        row = dict(zip(table["headers"], table["data"][-1]))
        assert row["status"] != "FAILED", row
        return row if row["status"] == "FINISHED" else None

    spoofed = Client(space_url, verbose=False, headers={"X-Forwarded-For": "203.0.113.7"})
    answer = spoofed.predict(
        "smollm2-135m-instruct", "main", "auto", ["analogy"], ["random_baseline"], "ice", api_name="/submit_model"
    )
    assert answer.startswith("Submitted: job **#2**"), answer
    table = client.predict("", "all", 1, api_name="/queue_status")
    submitters = {row[table["headers"].index("job")]: row[table["headers"].index("submitter")] for row in table["data"]}
    assert submitters[1] == submitters[2], "no proxy is trusted: a forged X-Forwarded-For changes no identity"

    row = wait_for(finished, 240, "job 1 to finish", poll_s=3)
    assert row["model"] == "smollm2-135m-instruct" and "per-pair scores stored" in row["log tail"]
    board = client.predict("smollm2", "factcheck", api_name="/leaderboard")
    rows = [dict(zip(board["headers"], r)) for r in board["data"]]
    assert rows and all(r["model"] == "smollm2-135m-instruct" for r in rows)
    assert {r["metric"] for r in rows} == {"filler_tokens"} and {r["task"] for r in rows} == {"factcheck"}
    assert all(r["n"] == 4 and 0 <= r["coverage"] <= 1 and isinstance(r["D"], float) for r in rows)
