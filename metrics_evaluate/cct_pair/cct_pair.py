"""CCT per Pair as an `evaluate` module; the logic lives in `recoe_causaldiag`. Generated from
`recoe_causaldiag.metrics.cct_pair.CCTPair` by `causaldiag evaluate-module cct_pair`: edit the library, not this
file."""

import evaluate

from recoe_causaldiag.evaluate_bridge import MODEL_INPUTS_DESCRIPTION, compute_model_metric, model_input_features
from recoe_causaldiag.models import DEFAULT_MODEL

_DESCRIPTION = """CCT per pair: the Correlational Explanatory Faithfulness of Siegel et al. (2024) computed across a
few interventions within one input (each edit fact dropped; a random adjective/adverb inserted into the question):
the correlation between the prediction impact (TVD of the label distribution) and whether the given explanation
mentions the intervened content. Variants: pointbiserial (default), spearman. NaN when all mentions are equal."""

_OPTIONS_DESCRIPTION = """
    max_facts (int, optional): edit facts dropped, one intervention each (a seeded sample if more). Default: 4.
    max_insertions (int, optional): adjectives/adverbs inserted into the question, one intervention each. Default: 2.
    seed (int, optional): seed of the fact sample and the inserted words. Default: 0.
"""

_CITATION = """@inproceedings{siegel2024probabilities,
  title={The Probabilities Also Matter: A More Faithful Metric for Faithfulness of Free-Text Explanations in
         Large Language Models},
  author={Siegel, Noah Y. and Camburu, Oana-Maria and Heess, Nicolas and Perez-Ortiz, Maria},
  booktitle={Proceedings of ACL (Short Papers)}, year={2024},
  eprint={2404.03189}, archivePrefix={arXiv}, url={https://arxiv.org/abs/2404.03189}
}"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, MODEL_INPUTS_DESCRIPTION + _OPTIONS_DESCRIPTION)
class CCTPair(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            module_type="metric",
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=MODEL_INPUTS_DESCRIPTION + _OPTIONS_DESCRIPTION,
            features=model_input_features(),
        )

    def _compute(self, question, choices, edits, explanations, model=DEFAULT_MODEL, variant=None, **options):
        return compute_model_metric(
            "cct_pair", question, choices, edits, explanations, model=model, variant=variant, **options
        )
