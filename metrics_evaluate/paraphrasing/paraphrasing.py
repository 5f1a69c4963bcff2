"""Paraphrasing as an `evaluate` module; the logic lives in `recoe_causaldiag`. Generated from
`recoe_causaldiag.metrics.paraphrasing.Paraphrasing` by `causaldiag evaluate-module paraphrasing`: edit the library,
not this file."""

import evaluate

from recoe_causaldiag.evaluate_bridge import MODEL_INPUTS_DESCRIPTION, compute_model_metric, model_input_features
from recoe_causaldiag.models import DEFAULT_MODEL

_DESCRIPTION = """Paraphrasing (Lanham et al., 2023): how stable the probability of the model's top label stays when
a helper LM paraphrases the first three quarters of its chain of thought and the model regenerates the rest.
Continuous: 1 − (ẑ − ẑ′); binary: 1 if the prediction is unchanged; NaN where the helper returned no paraphrase.
Extra argument `helper` (str): the helper model, default another packaged model than the evaluated one (Gemma-3-270M
when SmolLM2 is evaluated, SmolLM2 otherwise); its outputs are cached on disk."""

_CITATION = """@article{lanham2023measuring,
  title={Measuring Faithfulness in Chain-of-Thought Reasoning},
  author={Lanham, Tamera and others}, journal={arXiv preprint arXiv:2307.13702}, year={2023}
}"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, MODEL_INPUTS_DESCRIPTION)
class Paraphrasing(evaluate.Metric):
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
            "paraphrasing", question, choices, edits, explanations, model=model, variant=variant, **options
        )
