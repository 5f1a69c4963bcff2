"""Causal Faithfulness as an `evaluate` module; the logic lives in `recoe_causaldiag`. Generated from
`recoe_causaldiag.metrics.causal_faithfulness.CausalFaithfulness` by `causaldiag evaluate-module
causal_faithfulness`: edit the library, not this file."""

import evaluate

from recoe_causaldiag.evaluate_bridge import MODEL_INPUTS_DESCRIPTION, compute_model_metric, model_input_features
from recoe_causaldiag.models import DEFAULT_MODEL

_DESCRIPTION = """Causal Faithfulness (Yeo et al., 2024): activation patching with symmetric token replacement gives
the causal effect of every (input token, layer) hidden state on the model's answer (C_a) and on its post-hoc
explanation (C_e); the score is 1 − cosine distance(C_e, C_a). Variants caf, caf_m (10-layer windows), caf_t (token
level), caf_l (layer level)."""

_OPTIONS_DESCRIPTION = """
    layers (list[int], optional): the decoder layers to patch. Default: all (the paper's setting).
    window (int, optional): layers patched together for caf_m. Default: 10.
    positions (str, optional): "input" (every input position from the first replaced token on, the paper's) or
        "changed_and_question" (fewer patches). Default: "input".
    require_flip (bool, optional): score only inputs whose counterfactual changes the model's answer (the
        paper's condition; others are NaN). Default: True.
    patching (str, optional): "exact" (one patched run per cell, the paper's) or "attribution" (first-order
        attribution patching, one forward and one batched backward pass for a prompt's explanations, with the
        `verified_cells` highest-ranked cells patched exactly; caf_m, whose windows patch ten layers at once, is
        NaN). Default: "exact".
    verified_cells (int, optional): with patching="attribution", the cells patched exactly. Default: 64.
"""

_CITATION = """@inproceedings{yeo2025towards,
  title={Towards Faithful Natural Language Explanations: A Study Using Activation Patching in Large Language Models},
  author={Yeo, Wei Jie and Satapathy, Ranjan and Cambria, Erik}, booktitle={Proceedings of EMNLP}, year={2025},
  pages={10436--10458}, eprint={2410.14155}, archivePrefix={arXiv}, url={https://arxiv.org/abs/2410.14155}
}"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, MODEL_INPUTS_DESCRIPTION + _OPTIONS_DESCRIPTION)
class CausalFaithfulness(evaluate.Metric):
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
            "causal_faithfulness", question, choices, edits, explanations, model=model, variant=variant, **options
        )
