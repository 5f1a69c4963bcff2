"""Oracle (sanity reference) as an `evaluate` module; the logic lives in `recoe_causaldiag`. Generated from
`recoe_causaldiag.metrics.oracle.Oracle` by `causaldiag evaluate-module oracle`: edit the library, not this file."""

import evaluate

from recoe_causaldiag.evaluate_bridge import MODEL_INPUTS_DESCRIPTION, compute_model_metric, model_input_features

_DESCRIPTION = """Oracle (a sanity reference, not a faithfulness metric): how much of the evaluated model's edits the
explanation states, (facts stated in full within one clause + share of the edits' content words and bigrams found) /
(facts + 1), minus one for every edit fact that a clause contradicts (it holds the fact's subject and relation but
none of its object). It reads the edits, so its causal diagnosticity should be near 1. `model` is ignored."""

_CITATION = """@inproceedings{zaman2025causal,
  title     = {A Causal Lens for Evaluating Faithfulness Metrics},
  author    = {Zaman, Kerem and Srivastava, Shashank},
  booktitle = {Proceedings of the 2025 Conference on Empirical Methods in Natural Language Processing},
  pages     = {29413--29437},
  year      = {2025},
  doi       = {10.18653/v1/2025.emnlp-main.1496},
  eprint    = {2502.18848},
  archivePrefix = {arXiv},
  url       = {https://arxiv.org/abs/2502.18848}
}"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, MODEL_INPUTS_DESCRIPTION)
class Oracle(evaluate.Metric):
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
            "oracle", question, choices, edits, explanations, model=model, variant=variant, **options
        )
