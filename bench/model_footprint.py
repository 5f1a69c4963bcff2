"""What each installed packaged model costs on this machine: seconds to load from its converted cache, prefill
tokens/s (float32, a batch of 4 × 256 tokens) and the peak RSS of the process, each model in a process of its own;
with `--convert` also the one-time conversion of its GGUF, into a temporary cache. The `memory_gb` and
`convert_memory_gb` of `packaged_models.PACKAGED_MODELS` come from this script."""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time

BATCH, LENGTH = 4, 256


def _peak_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def _measure(name: str, step: str) -> None:
    import torch

    from recoe_causaldiag import models

    started = time.perf_counter()
    if step == "convert":
        models.packaged_model_dir(name)
        print(f"{name:<28} convert {time.perf_counter() - started:7.1f} s   peak RSS {_peak_gb():5.2f} GB")
        return
    lm = models.load_model(name, device="cpu", dtype=torch.float32)
    loaded = time.perf_counter() - started
    ids = torch.randint(100, 20_000, (BATCH, LENGTH), generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        lm.model(ids[:1, :32])
        started = time.perf_counter()
        lm.model(ids)
        prefill = BATCH * LENGTH / (time.perf_counter() - started)
    print(
        f"{name:<28} load {loaded:7.1f} s   prefill {prefill:7.1f} tokens/s   peak RSS {_peak_gb():5.2f} GB   "
        f"({lm.revision})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--convert", action="store_true", help="also time each conversion, in a temporary cache")
    parser.add_argument("--only", help="one packaged model")
    parser.add_argument("--step", choices=("load", "convert"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.step:
        _measure(args.only, args.step)
        return
    from recoe_causaldiag.packaged_models import PACKAGED_MODELS

    print(f"packaged models on {os.cpu_count()} CPU cores, float32:")
    for name in [args.only] if args.only else PACKAGED_MODELS.names():
        if not PACKAGED_MODELS.get(name).installed():
            print(f"{name:<28} not installed")
            continue
        if args.convert:
            with tempfile.TemporaryDirectory(prefix="footprint-") as scratch:
                _child(name, "convert", CAUSALDIAG_CACHE=scratch)
        _child(name, "load")


def _child(name: str, step: str, **env: str) -> None:
    command = [sys.executable, __file__, "--only", name, "--step", step]
    subprocess.run(command, check=True, env={**os.environ, **env})


if __name__ == "__main__":
    main()
