"""The CoT answer cue, two ways, on a packaged model (README, "Deviations from paper 000 and its code").

`authors`: the CoT prompt as `prompts.cot` builds it, the cue on a new line and followed by a space, the label
scored without a leading space (the authors' `Prompter.get_final_answer`); `earlier`: the cue after a space, the
label scored with its leading space (this package before issue 13); `newline`: the cue on a new line, the label
scored with its leading space. For a seeded sample of pairs per task it prints the CoT task accuracy (the top label
after the faithful explanation under the edits is the pair's `answer`), the share of prompts whose top label is
the first choice (faithful, unfaithful and empty explanation, under the edits; the share of pairs whose answer is
the first choice beside it), the share of pairs whose faithful and unfaithful explanations get different top
labels, and the mean probability of the label tokens in the full next-token distribution after the faithful
explanation.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Sequence

import numpy as np
import torch

from recoe_causaldiag import prompts
from recoe_causaldiag.api.engine import LabelRequest
from recoe_causaldiag.api.records import PairRecord
from recoe_causaldiag.models import DEFAULT_MODEL, load_model
from recoe_causaldiag.scoring import ScoringEngine
from recoe_causaldiag.task_pairs import iter_task_pairs

CotPrompt = Callable[[Sequence[str], str, str], prompts.Prompt]


def cue_after(separator: str) -> CotPrompt:
    """The CoT prompt with `separator` before the cue and no space after it (the label then has its leading
    space)."""

    def cot(edits: Sequence[str], question: str, explanation: str) -> prompts.Prompt:
        body = f" {explanation}" if explanation else ""
        continuation = f"{body}{separator}{prompts.COT_ANSWER_CUE}"
        return dataclasses.replace(prompts.cot(edits, question, explanation), continuation=continuation)

    return cot


FORMATS: dict[str, CotPrompt] = {"authors": prompts.cot, "earlier": cue_after(" "), "newline": cue_after("\n")}


def label_mass(engine: ScoringEngine, requests: Sequence[LabelRequest]) -> float:
    """Mean probability of the label tokens in the full next-token distribution after each request's prompt."""
    encoded = [engine.encode(r.prompt) for r in requests]
    masses = []
    for index, logits in engine.continuation_logits(encoded, desc="label mass"):
        ids = engine.lm.label_token_ids(requests[index].labels, leading_space=encoded[index].leading_space)
        masses.append(float(torch.softmax(logits[-1].double(), dim=-1)[list(ids)].sum()))
    return float(np.mean(masses))


def figures(engine: ScoringEngine, pairs: Sequence[PairRecord], cot: CotPrompt) -> dict[str, float]:
    """CoT accuracy, first-label share, share of answers that follow the CoT and label mass of one format on one
    task's pairs."""
    requests = [
        LabelRequest(cot(p.edits, p.question, e), tuple(p.choices))
        for p in pairs
        for e in (p.explanation_faithful, p.explanation_unfaithful, "")
    ]
    top = [int(np.argmax(probs)) for probs in engine.label_probs(requests)]
    faithful, unfaithful = top[0::3], top[1::3]
    return {
        "accuracy": float(np.mean([p.choices[t] == p.answer for p, t in zip(pairs, faithful)])),
        "first label": float(np.mean([t == 0 for t in top])),
        "follows": float(np.mean([f != u for f, u in zip(faithful, unfaithful)])),
        "label mass": label_mass(engine, requests[0::3]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--pairs", type=int, default=40)
    parser.add_argument("--tasks", default="factcheck,analogy,object_counting,multihop")
    args = parser.parse_args()
    engine = ScoringEngine(load_model(args.model, device="cpu"), progress=False)
    print(f"{args.model}, {args.pairs} pairs per task (seed 0)\n")
    print("| task | format | CoT accuracy | first label (answers) | answer follows CoT | label mass |")
    print("|---|---|---|---|---|---|")
    for task in iter_task_pairs(args.tasks.split(","), limit=args.pairs, seed=0):
        answers_first = np.mean([p.answer == p.choices[0] for p in task.pairs])
        for name, cot in FORMATS.items():
            f = figures(engine, task.pairs, cot)
            print(
                f"| {task.task} {task.dataset.version} | {name} | {f['accuracy']:.3f} | "
                f"{f['first label']:.2f} ({answers_first:.2f}) | {f['follows']:.3f} | {f['label mass']:.2g} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
