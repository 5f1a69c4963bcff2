"""The random sanity reference as an `evaluate` module; the logic lives in `recoe_causaldiag` (no model is used)."""

import evaluate

from recoe_causaldiag.evaluate_bridge import MODEL_INPUTS_DESCRIPTION, check_model_inputs, model_input_features
from recoe_causaldiag.metrics.random import Random as RandomReference

_DESCRIPTION = """Random (a sanity reference, not a faithfulness metric): a uniform random score in [0, 1),
reproducible from `seed` (int, default 0) and the text of each input; its causal diagnosticity should be 0.5
(chance). `model` is ignored."""

_CITATION = """@inproceedings{chan2022comparative,
  title={A Comparative Study of Faithfulness Metrics for Model Interpretability Methods},
  author={Chan, Chun Sik and Kong, Huanqi and Liang, Guanqing},
  booktitle={Proceedings of ACL}, year={2022}
}"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, MODEL_INPUTS_DESCRIPTION)
class Random(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(module_type="metric", description=_DESCRIPTION, citation=_CITATION,
                                   inputs_description=MODEL_INPUTS_DESCRIPTION, features=model_input_features())

    def _compute(self, question, choices, edits, explanations, model=None, variant="uniform", seed=0):
        reference = RandomReference(seed)
        if variant not in reference.variants:
            raise ValueError(f"variant '{variant}' is not one of {list(reference.variants)}")
        scores = reference.score_instances(check_model_inputs(question, choices, edits, explanations))[variant]
        return {"scores": scores.tolist(), "variant": variant}
