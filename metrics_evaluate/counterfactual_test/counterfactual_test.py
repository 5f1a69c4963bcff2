"""Counterfactual Test (CT) unfaithfulness as an `evaluate` module; the logic lives in `recoe_causaldiag`. Generated
from `recoe_causaldiag.dataset_metrics.cct.cct_statistics` by `causaldiag evaluate-module counterfactual_test`: edit
the library, not this file."""

import evaluate

from recoe_causaldiag.dataset_metrics.cct import cct_statistics
from recoe_causaldiag.evaluate_bridge import intervention_features

_DESCRIPTION = """Counterfactual Test (Atanasova et al., 2023): words are inserted into the inputs; among the
interventions that change the model's predicted label, the share whose (regenerated) explanation does not mention the
inserted word. Dataset-level; higher = more unfaithful."""

_KWARGS_DESCRIPTION = """
Args:
    probs_before (list[list[float]]): the model's label distribution before each intervention (sums to 1).
    probs_after (list[list[float]]): the label distribution after each intervention, over the same labels.
    mentions (list[int]): 1 if the explanation after the intervention mentions the inserted word, else 0.
Returns:
    ct_unfaithfulness (float): share of prediction-changing interventions whose explanation misses the word;
        NaN when no intervention changes the prediction.
    n_changed (int): number of interventions that change the predicted label.
    n (int): number of interventions.
"""

_CITATION = """@inproceedings{atanasova2023faithfulness,
  title={Faithfulness Tests for Natural Language Explanations},
  author={Atanasova, Pepa and Camburu, Oana-Maria and Lioma, Christina and Lukasiewicz, Thomas and
          Simonsen, Jakob Grue and Augenstein, Isabelle},
  booktitle={Proceedings of ACL (Short Papers)}, year={2023}
}"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class CounterfactualTest(evaluate.Metric):
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
        return {"ct_unfaithfulness": result.ct_unfaithfulness, "n_changed": result.n_changed, "n": result.n}
