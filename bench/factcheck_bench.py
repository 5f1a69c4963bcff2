"""What both benchmarks start from: the command line (`--pairs`, `--model`), the loaded model and FactCheck's first
pairs (built into a temporary folder)."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from recoe_causaldiag.models import DEFAULT_MODEL, load_model
from recoe_causaldiag.task_pairs import iter_task_pairs


def model_and_pairs(description: str, default_pairs: int):
    """The model and the FactCheck pairs the command line asks for."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--pairs", type=int, default=default_pairs)
    parser.add_argument("--model", default=DEFAULT_MODEL)
    args = parser.parse_args()
    lm = load_model(args.model)
    with tempfile.TemporaryDirectory() as tmp:
        (factcheck,) = iter_task_pairs(("factcheck",), Path(tmp), limit=args.pairs, seed=0)
    return lm, factcheck.pairs
