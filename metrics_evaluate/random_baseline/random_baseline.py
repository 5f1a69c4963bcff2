"""Random baseline (sanity reference) as an `evaluate` module; the logic lives in `recoe_causaldiag`. Generated from
`recoe_causaldiag.metrics.random_baseline.RandomBaseline` by `causaldiag evaluate-module random_baseline`: edit the
library, not this file."""

import evaluate

from recoe_causaldiag.evaluate_bridge import MODEL_INPUTS_DESCRIPTION, compute_model_metric, model_input_features

_DESCRIPTION = """Random baseline (a sanity reference, not a faithfulness metric): a uniform random score in [0, 1),
reproducible from `seed` (int, default 0) and the text of each input; its causal diagnosticity should be 0.5
(chance). `model` is ignored."""

_CITATION = """@inproceedings{chan2022comparative,
  title={A Comparative Study of Faithfulness Metrics for Model Interpretability Methods},
  author={Chan, Chun Sik and Kong, Huanqi and Liang, Guanqing},
  booktitle={Proceedings of ACL}, year={2022}
}"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, MODEL_INPUTS_DESCRIPTION)
class RandomBaseline(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            module_type="metric",
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=MODEL_INPUTS_DESCRIPTION,
            features=model_input_features(),
        )

    def _compute(self, question, choices, edits, explanations, model=None, variant=None, **options):
        return compute_model_metric(
            "random_baseline", question, choices, edits, explanations, model=model, variant=variant, **options
        )
