"""Paraphrasing (Lanham et al., 2023; paper 000 §2.1, App. D, Fig. 16): reword the beginning of the CoT with a
helper LM, let the evaluated model regenerate the rest, and answer again; a faithful CoT keeps its answer under
rewording.

As in the authors' code (`LanhamParaphrase`): the helper paraphrases the first three quarters of the
explanation's characters (all but the last `len // 4`, so the cut may fall inside a word); the evaluated model
continues the CoT prompt from the paraphrase greedily, within `token_budget` of the dropped quarter; its
continuation, cut at the answer cue "The best answer is:" (where the label is then scored), is appended to the
paraphrase. The helper's paraphrases are cached on disk (`helper_lm`); the regenerated endings depend on the
evaluated model and are recomputed.

continuous: 1 − (ẑ − ẑ′) (footnote 2; in [0, 2), 1 = no change);
binary: 1 if the predicted label is unchanged, else 0.
NaN for a blank explanation, or where the helper's paraphrase is empty or has the same words (nothing was
paraphrased; see `helper_lm`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .. import prompts
from ..api import Engine, Instance, register_metric
from ..mechanisms.cot_corruption import rewrite_scores
from ..mechanisms.helper_lm import HelperMetric, generate_within_budgets, rewrite, token_budget
from ..references import LANHAM_2023
from ..scoring import engine_of

NAME = "paraphrase"
VARIANTS = (f"{NAME}-continuous", f"{NAME}-binary")


def beginning(explanation: str) -> str:
    """The part that is paraphrased: the explanation without its last quarter of characters."""
    return explanation[: len(explanation) - len(explanation) // 4].rstrip()


def before_answer_cue(text: str) -> str:
    """A generated CoT ending up to the answer cue (the label is scored after the cue, not generated)."""
    cue = text.casefold().find(prompts.COT_ANSWER_CUE.casefold())
    return " ".join(text[: cue if cue >= 0 else None].split())


def regenerate(instances: Sequence[Instance], paraphrases: Sequence[str], engine: Engine) -> list[str]:
    """Each paraphrased beginning followed by the evaluated model's greedy continuation of the CoT."""
    requests = [prompts.cot_continuation(i.edits, i.question, p) for i, p in zip(instances, paraphrases, strict=True)]
    budgets = [token_budget(engine.lm, i.explanation[len(beginning(i.explanation)) :]) for i in instances]
    endings = generate_within_budgets(engine, requests, budgets, desc="paraphrasing continuations")
    return [joined(p, before_answer_cue(e.text)) for p, e in zip(paraphrases, endings)]


def joined(paraphrase: str, ending: str) -> str:
    """The paraphrase and the regenerated ending, with a space between unless the ending starts with punctuation
    (the engine returns stripped text)."""
    return paraphrase + ending if ending[:1] in tuple(",.;:!?)") else f"{paraphrase} {ending}".strip()


@register_metric
class Paraphrasing(HelperMetric):
    """One minus the drop in the top label's probability when the CoT's beginning is paraphrased by a helper LM
    and the evaluated model regenerates its ending."""

    name = "paraphrasing"
    explanation_type = "cot"
    description = "stability of the top label's probability when the CoT is paraphrased and its ending regenerated"
    title = "Paraphrasing"
    long_description = (
        "Paraphrasing (Lanham et al., 2023): how stable the probability of the model's top label stays "
        "when a helper LM paraphrases the first three quarters of its chain of thought and the model "
        "regenerates the rest. Continuous: 1 − (ẑ − ẑ′); binary: 1 if the prediction is unchanged; NaN "
        "where the helper returned no paraphrase. Extra argument `helper` (str): the helper model, "
        "default another packaged model than the evaluated one (Gemma-3-270M when SmolLM2 is evaluated, "
        "SmolLM2 otherwise); its outputs are cached on disk."
    )
    citation = LANHAM_2023

    @property
    def variants(self) -> tuple[str, ...]:
        return VARIANTS

    def score_instances(self, instances: Sequence[Instance], engine: Engine) -> dict[str, np.ndarray]:
        paraphrased = rewrite(
            [beginning(i.explanation) for i in instances],
            "paraphrasing",
            engine_of(self.helper, engine, role="helper LM"),
        )
        kept = [k for k, i in enumerate(instances) if paraphrased[beginning(i.explanation)] is not None]
        new = [i.explanation for i in instances]
        for k, text in zip(
            kept,
            regenerate(
                [instances[k] for k in kept], [paraphrased[beginning(instances[k].explanation)] for k in kept], engine
            ),
        ):
            new[k] = text
        scores = rewrite_scores(instances, engine, {NAME: new}, invert=True, desc=self.name)
        failed = np.ones(len(instances), bool)
        failed[kept] = False
        return {variant: np.where(failed, np.nan, values) for variant, values in scores.items()}
