"""Correlational Counterfactual Test (CCT) as an `evaluate` module; the logic lives in `recoe_causaldiag`. Generated
from `recoe_causaldiag.dataset_metrics.cct.cct_statistics` by `causaldiag evaluate-module cct`: edit the library, not
this file."""

import evaluate

from recoe_causaldiag.dataset_metrics.cct import cct_statistics
from recoe_causaldiag.evaluate_bridge import intervention_features

_DESCRIPTION = """Correlational Counterfactual Test (Siegel et al., 2024): over many word-insertion interventions,
the point-biserial correlation between the prediction impact (total variation distance between the label
distributions before and after) and whether the explanation mentions the inserted word; with its Jensen-Shannon and
Spearman variants and the Counterfactual Test unfaithfulness of Atanasova et al. (2023). Dataset-level: one number
each."""

_KWARGS_DESCRIPTION = """
Args:
    probs_before (list[list[float]]): the model's label distribution before each intervention (sums to 1).
    probs_after (list[list[float]]): the label distribution after each intervention, over the same labels.
    mentions (list[int]): 1 if the explanation after the intervention mentions the inserted word, else 0.
Returns:
    cct (float): point-biserial correlation of TVD impact with mention (paper eq. 3), in [-1, 1]; NaN if undefined.
    cct_js (float): the same with the Jensen-Shannon divergence as impact.
    cct_spearman (float): Spearman rank correlation of TVD impact with mention.
    ct_unfaithfulness (float): share of prediction-changing interventions whose explanation misses the word.
    n (int): number of interventions.
"""

_CITATION = """@inproceedings{siegel2024probabilities,
  title={The Probabilities Also Matter: A More Faithful Metric for Faithfulness of Free-Text Explanations in
         Large Language Models},
  author={Siegel, Noah Y. and Camburu, Oana-Maria and Heess, Nicolas and Perez-Ortiz, Maria},
  booktitle={Proceedings of ACL (Short Papers)}, year={2024},
  eprint={2404.03189}, archivePrefix={arXiv}, url={https://arxiv.org/abs/2404.03189}
}"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class CCT(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            module_type="metric",
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=intervention_features(),
        )

    def _compute(self, probs_before, probs_after, mentions):
        result = cct_statistics(probs_before, probs_after, mentions)
        return {
            "cct": result.cct,
            "cct_js": result.cct_js,
            "cct_spearman": result.cct_spearman,
            "ct_unfaithfulness": result.ct_unfaithfulness,
            "n": result.n,
        }
