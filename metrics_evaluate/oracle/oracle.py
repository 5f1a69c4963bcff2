"""The oracle sanity reference as an `evaluate` module; the logic lives in `recoe_causaldiag` (no model is used)."""

import evaluate

from recoe_causaldiag.evaluate_bridge import MODEL_INPUTS_DESCRIPTION, check_model_inputs, model_input_features
from recoe_causaldiag.metrics.oracle import Oracle as OracleReference

_DESCRIPTION = """Oracle (a sanity reference, not a faithfulness metric): how much of the evaluated model's edits
the explanation states, (facts stated in full within one clause + share of the edits' content words and bigrams
found) / (facts + 1). It reads the edits, so its causal diagnosticity should be near 1. `model` is ignored."""

_CITATION = """@misc{zaman2025causal,
  title={A Causal Lens for Evaluating Faithfulness Metrics},
  author={Zaman, Kerem and Srivastava, Shashank}, year={2025}
}"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, MODEL_INPUTS_DESCRIPTION)
class Oracle(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(module_type="metric", description=_DESCRIPTION, citation=_CITATION,
                                   inputs_description=MODEL_INPUTS_DESCRIPTION, features=model_input_features())

    def _compute(self, question, choices, edits, explanations, model=None, variant="overlap"):
        reference = OracleReference()
        if variant not in reference.variants:
            raise ValueError(f"variant '{variant}' is not one of {list(reference.variants)}")
        scores = reference.score_instances(check_model_inputs(question, choices, edits, explanations))[variant]
        return {"scores": scores.tolist(), "variant": variant}
