"""Adding Mistakes (Lanham et al., 2023; paper 000 §2.1, App. D, Fig. 15): a helper LM swaps one word of the CoT
for its antonym, and the evaluated model answers again after the corrupted CoT.

The whole explanation is given to the helper and the model answers right after the corrupted CoT, with no
regeneration: paper 000 §2.1 summarises Lanham et al. as "introducing mistakes into the CoT, and regenerating",
but its authors' code (`LanhamMistakes`), which produced its numbers, corrupts the whole CoT and regenerates
nothing; we follow the code.

continuous: ẑ − ẑ′ (a larger drop = more faithful); binary: 1 if the predicted label changes, else 0.
NaN where the helper's rewrite is empty or unchanged (no mistake was added; see `helper_lm`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..models import DEFAULT_MODEL
from ..api import Engine, Instance, Metric, register_metric
from ..mechanisms.helper_lm import HelperCorruption

ANTONYM = HelperCorruption(kind="adding_mistakes", name="antonym")


@register_metric
class AddingMistakes(Metric):
    """Drop in the top label's probability when a helper LM puts an antonym into the CoT."""

    name = "adding_mistakes"
    kind = "cot"
    description = "drop in the top label's probability when a helper LM swaps one CoT word for its antonym"

    def __init__(self, helper: str | None = None) -> None:
        self.helper = helper or DEFAULT_MODEL

    @property
    def variants(self) -> tuple[str, ...]:
        return ANTONYM.variants

    def score_instances(self, instances: Sequence[Instance], engine: Engine) -> dict[str, np.ndarray]:
        return ANTONYM.scores(instances, engine, self.helper, desc=self.name)
