"""`make bench`: how long the command line takes to answer `--help`, `run --help`, `--version` and `ls`, each in a
fresh interpreter as a user would run it (median of `--repeats`). `ls` is timed twice: listing the registries
(an empty cache: every metric and task imported) and answering from the catalogue cached for the same sources.
The goal is under 1 s for all but the first listing."""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

GOAL_S = 1.0


def seconds(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "recoe_causaldiag.cli", *argv], env=env, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "CAUSALDIAG_CACHE": cache}
        rows = [("ls, listing the registries (empty cache)", seconds(["ls"], env), None)]
        for label, argv in (
            ("--help", ["--help"]),
            ("run --help", ["run", "--help"]),
            ("--version", ["--version"]),
            ("ls, from the cached catalogue", ["ls"]),
        ):
            rows.append((label, statistics.median(seconds(argv, env) for _ in range(args.repeats)), GOAL_S))
    print(f"command line, fresh interpreter each (median of {args.repeats}):")
    for label, took, goal in rows:
        verdict = "" if goal is None else (" meets" if took < goal else " MISSES") + f" the {goal:.0f} s goal"
        print(f"  {label:<42} {took:6.2f} s{verdict}")


if __name__ == "__main__":
    main()
