"""Simulatability (Chan et al., 2022; paper 000 §2.1, App. D, Fig. 14): does the explanation help a simulator
predict the evaluated model's answer?

ŷ is the evaluated model M̄'s answer to the question under its edits (ICE, direct prompt). The simulator S gets the
same edits, which stay fixed in every prompt (paper 000 App. C.2): S(x) answers the question under the edits and
S(x, ε) the simulator prompt "If {ε}, {x}" under the edits.

binary: 1[S(x, ε) = ŷ] − 1[S(x) = ŷ] ∈ {−1, 0, 1};
continuous: p_S(ŷ | x, ε) − p_S(ŷ | x) ∈ [−1, 1] (signed, paper 000 footnote 2).
A blank explanation cannot be simulated from and scores NaN.

The simulator is by default another packaged model than the evaluated one (`packaged_models.default_helper_model`:
Gemma-3-270M when SmolLM2 is evaluated, SmolLM2 otherwise): the evaluated model simulating itself under the same
edits gives S(x) = ŷ, so the binary score could only be −1 or 0. A run records the simulator in its `run_spec`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .. import prompts
from ..api import Engine, Instance, LabelRequest, Metric, register_metric
from ..mechanisms.prompting import label_request
from ..scoring import engine_of


@register_metric
class Simulatability(Metric):
    """Gain in the simulator's agreement with the evaluated model's answer when it reads the explanation."""

    name = "simulatability"
    explanation_type = "post-hoc"
    description = "how much the explanation helps a simulator LM predict the evaluated model's answer"
    title = "Simulatability"
    long_description = (
        "Simulatability (Chan et al., 2022): how much the explanation helps a simulator LM predict the "
        "evaluated model's answer ŷ (given under its edits). Binary: 1[S(x, ε) = ŷ] − 1[S(x) = ŷ]; "
        "continuous: p_S(ŷ | x, ε) − p_S(ŷ | x). Extra argument `simulator` (str): the simulator "
        "model, default another packaged model than the evaluated one (Gemma-3-270M when SmolLM2 is "
        "evaluated, SmolLM2 otherwise)."
    )
    citation = """@inproceedings{chan2022frame,
  title={{FRAME}: Evaluating Rationale-Label Consistency Metrics for Free-Text Rationales},
  author={Chan, Aaron and Nie, Shaoliang and Tan, Liang and Peng, Xiaochang and Firooz, Hamed and Sanjabi, Maziar
          and Ren, Xiang}, booktitle={Proceedings of EMNLP}, year={2022}
}"""
    evaluate_options = ("simulator",)
    helper_option = "simulator"

    def __init__(self, simulator: str | None = None) -> None:
        self.simulator = simulator

    @property
    def variants(self) -> tuple[str, ...]:
        return ("binary", "continuous")

    def score_instances(self, instances: Sequence[Instance], engine: Engine) -> dict[str, np.ndarray]:
        scored = [i for i, inst in enumerate(instances) if inst.explanation.strip()]
        kept = [instances[i] for i in scored]
        direct = [label_request(i) for i in kept]
        told = [LabelRequest(prompts.simulator(i.edits, i.question, i.explanation), i.choices) for i in kept]
        m, simulator = len(kept), engine_of(self.simulator, engine, role="simulator")
        simulated = simulator.label_probs(direct + told, desc=self.name)
        own = simulated[:m] if simulator is engine else engine.label_probs(direct, desc=self.name)
        binary, continuous = np.full(len(instances), np.nan), np.full(len(instances), np.nan)
        for k, index in enumerate(scored):
            y_hat, p_bare, p_told = own[k].argmax(), simulated[k], simulated[m + k]
            binary[index] = float(p_told.argmax() == y_hat) - float(p_bare.argmax() == y_hat)
            continuous[index] = p_told[y_hat] - p_bare[y_hat]
        return {"binary": binary, "continuous": continuous}
