"""CC-SHAP as an `evaluate` module; the logic lives in `recoe_causaldiag`. Generated from
`recoe_causaldiag.metrics.cc_shap.CCShap` by `causaldiag evaluate-module cc_shap`: edit the library, not this file."""

import evaluate

from recoe_causaldiag.evaluate_bridge import MODEL_INPUTS_DESCRIPTION, compute_model_metric, model_input_features
from recoe_causaldiag.models import DEFAULT_MODEL

_DESCRIPTION = """CC-SHAP (Parcalabescu & Frank, 2023): 1 − cosine distance between the Shapley values of the
question tokens for the model's prediction and for its explanation (post-hoc or chain of thought)."""

_OPTIONS_DESCRIPTION = """
    n_samples (int, optional): the budget per attribution: permutations, or for "leverage" n_samples × the
        question's tokens coalitions (what as many permutations cost). Default: 6.
    long_question_samples (int, optional): the least budget for a question of more than 10 tokens, beyond the
        exact study's reach: there Leverage SHAP at 6 spread 1.4 times as much from seed to seed as the original
        code's 16 permutations, and at 16 half as much (22 and 10 explanations of 16-40 question tokens;
        bench/cc_shap_long_questions.py). Default: 16.
    seed (int, optional): seed of the permutations or coalitions. Default: 0.
    estimator (str, optional): "leverage" (Leverage SHAP: complementary pairs of coalitions, an equal share at
        every size, and the Kernel SHAP regression with efficiency exact), "orthogonal" (antithetic pairs of
        permutations along the orthogonal directions of a random basis), "antithetic" (each permutation followed by
        its reverse) or "sampling" (independent random permutations, captum's and the original code's). Default:
        "leverage": at n_samples 6 its error against the exact Shapley values is 15% below that of 8 orthogonal
        permutations, the default before it, at 90% of their forwards, and 16% below 16 independent permutations'
        at 55% of theirs (bench/cc_shap_convergence.py).
    Only the requested variant is computed (CC-SHAP costs about n_samples × question-length forwards per input).
"""

_CITATION = """@inproceedings{parcalabescu2024measuring,
  title={On Measuring Faithfulness or Self-consistency of Natural Language Explanations},
  author={Parcalabescu, Letitia and Frank, Anette}, booktitle={Proceedings of ACL}, year={2024}
}"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, MODEL_INPUTS_DESCRIPTION + _OPTIONS_DESCRIPTION)
class CCShap(evaluate.Metric):
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
            "cc_shap", question, choices, edits, explanations, model=model, variant=variant, **options
        )
