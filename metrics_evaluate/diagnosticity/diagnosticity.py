"""Causal diagnosticity as an `evaluate` module; the logic lives in `recoe_causaldiag`. Generated from
`recoe_causaldiag.statistics.diagnosticity` by `causaldiag evaluate-module diagnosticity`: edit the library, not this
file."""

import evaluate

from recoe_causaldiag.evaluate_bridge import score_pair_features
from recoe_causaldiag.statistics import diagnosticity

_DESCRIPTION = """Causal diagnosticity (Zaman & Srivastava): how often a faithfulness metric scores the faithful
explanation of a pair above the unfaithful one. d = 1 if higher, 0.5 if equal, 0 if lower; D = mean d over the pairs
both scores of which are numbers (NaN pairs are excluded and counted)."""

_KWARGS_DESCRIPTION = """
Args:
    faithful_scores (list[float]): the metric's score of each pair's faithful explanation (NaN if unscored).
    unfaithful_scores (list[float]): the metric's score of each pair's unfaithful explanation (NaN if unscored).
    n_resamples (int): bootstrap resamples for the CI, at least 2000. Default 2000.
    seed (int): bootstrap seed. Default 0.
    clusters (list[str] | None): each pair's cluster (pairs that share an entity), resampled together by the
        bootstrap and one vote in the sign test. Default None: every pair on its own.
Returns:
    diagnosticity (float), ci_low (float), ci_high (float): D and its 95% CI (hull of the percentile bootstrap and
        the Wilson score interval: never a point);
    p_value (float): exact two-sided sign test of d against 0.5, a tie counted half a win and half a loss;
    p_ttest (float): the paper's one-sample t-test of d against 0.5 (NaN when all d are equal and not 0.5);
    coverage (float): n_valid / n; n_valid (int), n_nan (int).
"""

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


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Diagnosticity(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            module_type="metric",
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=score_pair_features(),
        )

    def _compute(self, faithful_scores, unfaithful_scores, n_resamples=2000, seed=0, clusters=None):
        result = diagnosticity(
            faithful_scores, unfaithful_scores, n_resamples=n_resamples, seed=seed, clusters=clusters
        )
        return {
            "diagnosticity": result.value,
            "ci_low": result.ci_low,
            "ci_high": result.ci_high,
            "p_value": result.p_value,
            "p_ttest": result.p_ttest,
            "coverage": result.coverage,
            "n_valid": result.n_valid,
            "n_nan": result.n_nan,
        }
