"""Simulatability as an `evaluate` module; the logic lives in `recoe_causaldiag`. Generated from
`recoe_causaldiag.metrics.simulatability.Simulatability` by `causaldiag evaluate-module simulatability`: edit the
library, not this file."""

import evaluate

from recoe_causaldiag.evaluate_bridge import MODEL_INPUTS_DESCRIPTION, compute_model_metric, model_input_features
from recoe_causaldiag.models import DEFAULT_MODEL

_DESCRIPTION = """Simulatability (Chan et al., 2022): how much the explanation helps a simulator LM predict the
evaluated model's answer ŷ (given under its edits). Binary: 1[S(x, ε) = ŷ] − 1[S(x) = ŷ]; continuous: p_S(ŷ | x, ε) −
p_S(ŷ | x). Extra argument `simulator` (str): the simulator model, default another packaged model than the evaluated
one (Gemma-3-270M when SmolLM2 is evaluated, SmolLM2 otherwise)."""

_CITATION = """@inproceedings{chan2022frame,
  title={{FRAME}: Evaluating Rationale-Label Consistency Metrics for Free-Text Rationales},
  author={Chan, Aaron and Nie, Shaoliang and Tan, Liang and Peng, Xiaochang and Firooz, Hamed and Sanjabi, Maziar
          and Ren, Xiang}, booktitle={Proceedings of EMNLP}, year={2022}
}"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, MODEL_INPUTS_DESCRIPTION)
class Simulatability(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            module_type="metric",
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=MODEL_INPUTS_DESCRIPTION,
            features=model_input_features(),
        )

    def _compute(self, question, choices, edits, explanations, model=DEFAULT_MODEL, variant=None, **options):
        return compute_model_metric(
            "simulatability", question, choices, edits, explanations, model=model, variant=variant, **options
        )
