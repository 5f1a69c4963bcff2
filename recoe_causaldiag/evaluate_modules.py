"""The `evaluate` folders in `metrics_evaluate/<name>/`, generated from the library: `<name>.py` (a thin
`evaluate.Metric` that calls `evaluate_bridge`), `app.py` and `requirements.txt` for every registered per-instance
metric (from its class) and every dataset-level module (from `STATISTIC_MODULES`); a README card skeleton only
where none exists (cards are written by hand). `causaldiag evaluate-module NAME|all [--check]` runs this."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib.metadata import requires
from pathlib import Path
from typing import Any

from .api.metric import Metric, metric_registry
from .api.registry import Registry
from .citation import PAPER_BIBTEX
from .references import SIEGEL_2024

WIDTH = 120
GENERATED_FILES = ("app.py", "requirements.txt")
CARD = "README.md"
MODEL_EXAMPLE: Mapping[str, Any] = {
    "question": ["Does Satchel Paige professionally play baseball?"],
    "choices": [["Yes", "No"]],
    "edits": [["Satchel Paige professionally plays the sport hurling."]],
    "explanations": ["Satchel Paige professionally plays the sport hurling, not baseball."],
}
"""The inputs of a per-instance metric's card skeleton example: a FactCheck input and its faithful explanation."""


@dataclass(frozen=True)
class StatisticModule:
    """A dataset-level `evaluate` module: a library statistic over all the rows at once. The inputs are the
    columns of `evaluate_bridge.<features>()`; `options` are compute kwargs with their defaults, passed on by name;
    each output is an attribute of the statistic's result."""

    name: str
    class_name: str
    title: str
    long_description: str
    inputs_doc: str
    citation: str
    features: str
    statistic: tuple[str, str]
    outputs: tuple[tuple[str, str], ...]
    options: tuple[tuple[str, Any], ...] = ()
    example: Mapping[str, Any] = field(default_factory=dict)


_INTERVENTION_INPUTS = """
Args:
    probs_before (list[list[float]]): the model's label distribution before each intervention (sums to 1).
    probs_after (list[list[float]]): the label distribution after each intervention, over the same labels.
    mentions (list[int]): 1 if the explanation after the intervention mentions the inserted word, else 0.
Returns:"""
_INTERVENTION_EXAMPLE = {
    "probs_before": [[0.9, 0.1], [0.6, 0.4]],
    "probs_after": [[0.2, 0.8], [0.55, 0.45]],
    "mentions": [1, 0],
}
_CCT = ("recoe_causaldiag.dataset_metrics.cct", "cct_statistics")

STATISTIC_MODULES: tuple[StatisticModule, ...] = (
    StatisticModule(
        "cct",
        "CCT",
        "Correlational Counterfactual Test (CCT)",
        "Correlational Counterfactual Test (Siegel et al., 2024): over many word-insertion interventions, the "
        "point-biserial correlation between the prediction impact (total variation distance between the label "
        "distributions before and after) and whether the explanation mentions the inserted word; with its "
        "Jensen-Shannon and Spearman variants and the Counterfactual Test unfaithfulness of Atanasova et al. "
        "(2023). Dataset-level: one number each.",
        _INTERVENTION_INPUTS
        + """
    cct (float): point-biserial correlation of TVD impact with mention (paper eq. 3), in [-1, 1]; NaN if undefined.
    cct_js (float): the same with the Jensen-Shannon divergence as impact.
    cct_spearman (float): Spearman rank correlation of TVD impact with mention.
    ct_unfaithfulness (float): share of prediction-changing interventions whose explanation misses the word.
    n (int): number of interventions.
""",
        SIEGEL_2024,
        "intervention_features",
        _CCT,
        (
            ("cct", "cct"),
            ("cct_js", "cct_js"),
            ("cct_spearman", "cct_spearman"),
            ("ct_unfaithfulness", "ct_unfaithfulness"),
            ("n", "n"),
        ),
        example=_INTERVENTION_EXAMPLE,
    ),
    StatisticModule(
        "counterfactual_test",
        "CounterfactualTest",
        "Counterfactual Test (CT) unfaithfulness",
        "Counterfactual Test (Atanasova et al., 2023): words are inserted into the inputs; among the interventions "
        "that change the model's predicted label, the share whose (regenerated) explanation does not mention the "
        "inserted word. Dataset-level; higher = more unfaithful.",
        _INTERVENTION_INPUTS
        + """
    ct_unfaithfulness (float): share of prediction-changing interventions whose explanation misses the word;
        NaN when no intervention changes the prediction.
    n_changed (int): number of interventions that change the predicted label.
    n (int): number of interventions.
""",
        """@inproceedings{atanasova2023faithfulness,
  title={Faithfulness Tests for Natural Language Explanations},
  author={Atanasova, Pepa and Camburu, Oana-Maria and Lioma, Christina and Lukasiewicz, Thomas and
          Simonsen, Jakob Grue and Augenstein, Isabelle},
  booktitle={Proceedings of ACL (Short Papers)}, year={2023}
}""",
        "intervention_features",
        _CCT,
        (("ct_unfaithfulness", "ct_unfaithfulness"), ("n_changed", "n_changed"), ("n", "n")),
        example=_INTERVENTION_EXAMPLE,
    ),
    StatisticModule(
        "diagnosticity",
        "Diagnosticity",
        "Causal diagnosticity",
        "Causal diagnosticity (Zaman & Srivastava): how often a faithfulness metric scores the faithful explanation "
        "of a pair above the unfaithful one. d = 1 if higher, 0.5 if equal, 0 if lower; D = mean d over the pairs "
        "both scores of which are numbers (NaN pairs are excluded and counted).",
        """
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
""",
        PAPER_BIBTEX,
        "score_pair_features",
        ("recoe_causaldiag.statistics", "diagnosticity"),
        (
            ("diagnosticity", "value"),
            ("ci_low", "ci_low"),
            ("ci_high", "ci_high"),
            ("p_value", "p_value"),
            ("p_ttest", "p_ttest"),
            ("coverage", "coverage"),
            ("n_valid", "n_valid"),
            ("n_nan", "n_nan"),
        ),
        options=(("n_resamples", 2000), ("seed", 0), ("clusters", None)),
        example={"faithful_scores": [0.9, 0.4, 0.7], "unfaithful_scores": [0.1, 0.4, 0.2]},
    ),
)


def module_registry() -> Registry[type[Metric] | StatisticModule]:
    """Every `evaluate` module by name: the registered metrics, then the dataset-level modules."""
    modules: Registry[type[Metric] | StatisticModule] = Registry("evaluate module")
    metrics = metric_registry()
    for name in metrics:
        modules.add(name, metrics.get(name))
    for spec in STATISTIC_MODULES:
        modules.add(spec.name, spec)
    return modules


def _bracketed(head: str, items: list[str], indent: int, brackets: str = "()", tail: str = "") -> str:
    """`head(item, item, …)` laid out as the formatter (`ruff format`) lays it out: on one line if it fits, else
    the items on one line of their own, else one item a line with a trailing comma."""
    pad, inner = " " * indent, " " * (indent + 4)
    one_line = f"{pad}{head}{brackets[0]}{', '.join(items)}{brackets[1]}{tail}"
    if len(one_line) <= WIDTH:
        return one_line
    if len(inner) + len(", ".join(items)) <= WIDTH:
        return f"{pad}{head}{brackets[0]}\n{inner}{', '.join(items)}\n{pad}{brackets[1]}{tail}"
    return f"{pad}{head}{brackets[0]}\n" + "".join(f"{inner}{item},\n" for item in items) + f"{pad}{brackets[1]}{tail}"


def _literal(value: Any) -> str:
    """A default value as the formatter writes it (strings in double quotes)."""
    return f'"{value}"' if isinstance(value, str) else repr(value)


def _text_block(variable: str, text: str, *, reflow: bool) -> str:
    """The assignment of `text` to `variable` as a triple-quoted string, the text reflowed to `WIDTH` columns (a
    paragraph) or kept as written (a layout of its own: argument lists, BibTeX)."""
    if '"""' in text or "\\" in text:
        raise ValueError(f"{variable}: text with triple quotes or backslashes cannot be generated verbatim")
    if reflow:
        text = textwrap.fill(
            " ".join(text.split()),
            width=WIDTH - 3,
            initial_indent=" " * (len(variable) + 6),
            break_on_hyphens=False,
            break_long_words=False,
        ).lstrip()
    return f'{variable} = """{text}"""\n'


def _header(title: str, name: str, source: str) -> str:
    """The module docstring: what the module is and where it comes from."""
    text = (
        f"{title} as an `evaluate` module; the logic lives in `recoe_causaldiag`. Generated from {source} by "
        f"`causaldiag evaluate-module {name}`: edit the library, not this file."
    )
    return '"""' + textwrap.fill(text, width=WIDTH - 3, break_on_hyphens=False) + '"""\n'


def metric_module(cls: type[Metric]) -> str:
    """The `<name>.py` of a registered per-instance metric: its options and the runner's optional inputs pass on
    as compute kwargs to `evaluate_bridge.compute_model_metric` (which checks them; defaults are the metric's)."""
    inputs_doc = "MODEL_INPUTS_DESCRIPTION" + (" + _OPTIONS_DESCRIPTION" if cls.options_doc else "")
    model = "model=DEFAULT_MODEL" if cls.uses_model else "model=None"
    signature = _bracketed(
        "def _compute",
        ["self", "question", "choices", "edits", "explanations", model, "variant=None", "**options"],
        4,
        tail=":",
    )
    call = _bracketed(
        "return compute_model_metric",
        [
            f'"{cls.name}"',
            "question",
            "choices",
            "edits",
            "explanations",
            "model=model",
            "variant=variant",
            "**options",
        ],
        8,
    )
    imports = [
        "from recoe_causaldiag.evaluate_bridge import MODEL_INPUTS_DESCRIPTION, compute_model_metric, "
        "model_input_features"
    ]
    if cls.uses_model:
        imports.append("from recoe_causaldiag.models import DEFAULT_MODEL")
    blocks = [_text_block("_DESCRIPTION", cls.long_description, reflow=True)]
    if cls.options_doc:
        blocks.append(_text_block("_OPTIONS_DESCRIPTION", cls.options_doc, reflow=False))
    blocks.append(_text_block("_CITATION", cls.citation, reflow=False))
    return _module_text(
        _header(cls.title, cls.name, f"`{cls.__module__}.{cls.__name__}`"),
        imports,
        blocks,
        inputs_doc,
        cls.__name__,
        "model_input_features()",
        [signature, call],
    )


def statistic_module(spec: StatisticModule) -> str:
    """The `<name>.py` of a dataset-level module: the statistic over the input columns, its result's attributes
    as outputs."""
    inputs = list(_features(spec))
    signature = _bracketed(
        "def _compute", ["self", *inputs, *(f"{o}={_literal(v)}" for o, v in spec.options)], 4, tail=":"
    )
    call = _bracketed(f"result = {spec.statistic[1]}", [*inputs, *(f"{o}={o}" for o, _ in spec.options)], 8)
    outputs = _bracketed("return ", [f'"{key}": result.{attribute}' for key, attribute in spec.outputs], 8, "{}")
    imports = sorted(
        [
            f"from {spec.statistic[0]} import {spec.statistic[1]}",
            f"from recoe_causaldiag.evaluate_bridge import {spec.features}",
        ]
    )
    blocks = [
        _text_block("_DESCRIPTION", spec.long_description, reflow=True),
        _text_block("_KWARGS_DESCRIPTION", spec.inputs_doc, reflow=False),
        _text_block("_CITATION", spec.citation, reflow=False),
    ]
    return _module_text(
        _header(spec.title, spec.name, f"`{spec.statistic[0]}.{spec.statistic[1]}`"),
        imports,
        blocks,
        "_KWARGS_DESCRIPTION",
        spec.class_name,
        f"{spec.features}()",
        [signature, call, outputs],
    )


def _module_text(
    header: str,
    imports: list[str],
    blocks: list[str],
    inputs_doc: str,
    class_name: str,
    features: str,
    compute: list[str],
) -> str:
    """A module file: docstring, imports, the text constants, and the `evaluate.Metric` with `_info` and the
    `_compute` lines given."""
    info = _bracketed(
        "return evaluate.MetricInfo",
        [
            'module_type="metric"',
            "description=_DESCRIPTION",
            "citation=_CITATION",
            f"inputs_description={inputs_doc}",
            f"features={features}",
        ],
        8,
    )
    decorator = _bracketed("@evaluate.utils.file_utils.add_start_docstrings", ["_DESCRIPTION", inputs_doc], 0)
    return "\n".join(
        [
            header,
            "import evaluate",
            "",
            *imports,
            "",
            "\n".join(blocks),
            "",
            decorator,
            f"class {class_name}(evaluate.Metric):",
            "    def _info(self):",
            info,
            "",
            *compute,
            "",
        ]
    )


def _features(spec: StatisticModule) -> Mapping[str, Any]:
    from . import evaluate_bridge

    return getattr(evaluate_bridge, spec.features)()


def app_file(name: str) -> str:
    """The Space's `app.py`: load the module from the file beside it (no Hub, no working-folder assumption) and
    serve its page (`evaluate_space.module_page`)."""
    return (
        "from pathlib import Path\n\nimport evaluate\n\nfrom recoe_causaldiag.evaluate_space import module_page\n\n"
        f'HERE = Path(__file__).resolve().parent\nmodule = evaluate.load(str(HERE / "{name}.py"))\n'
        'module_page(module, HERE / "README.md").launch()\n'
    )


def example_inputs(name: str) -> Mapping[str, Any]:
    """The input columns of module `name`'s example: a FactCheck input and its faithful explanation for a
    per-instance metric, the statistic's own example otherwise."""
    entry = module_registry().get(name)
    return dict(entry.example) if isinstance(entry, StatisticModule) else dict(MODEL_EXAMPLE)


def requirements_file() -> str:
    """The Space's `requirements.txt`: `evaluate` in the range the library declares, and the library at the version
    that generated the module (its wrapper calls that library's bridge)."""
    from packaging.requirements import Requirement

    from . import __version__

    declared = next(
        req for req in map(Requirement, requires("recoe-causaldiag") or []) if req.name == "evaluate" and not req.marker
    )
    return f"{declared}\nrecoe-causaldiag=={__version__}\n"


def generated_files(name: str) -> dict[str, str]:
    """File name → content of the generated files of module `name`."""
    entry = module_registry().get(name)
    code = statistic_module(entry) if isinstance(entry, StatisticModule) else metric_module(entry)
    return {f"{name}.py": code, "app.py": app_file(name), "requirements.txt": requirements_file()}


def card_skeleton(name: str) -> str:
    """A README card to complete by hand: the Space front matter, the sections every card has, and a runnable
    example."""
    entry = module_registry().get(name)
    is_metric = not isinstance(entry, StatisticModule)
    example = {**MODEL_EXAMPLE, "model": "smollm2-135m-instruct"} if is_metric else dict(entry.example)
    if is_metric and not entry.uses_model:
        example.pop("model")
    arguments = "".join(f"    {key}={value!r},\n" for key, value in example.items())
    citation = entry.citation
    return f"""---
title: {entry.title}
emoji: 🧪
colorFrom: blue
colorTo: green
sdk: gradio
sdk_version: 6.31.0
app_file: app.py
pinned: false
tags:
- evaluate
- metric
- faithfulness
- causal-diagnosticity
description: "{entry.description if is_metric else entry.title}"
---

# Metric Card for {entry.title}

## Metric Description

{textwrap.fill(" ".join(entry.long_description.split()), width=WIDTH)}

## How to Use

```python
import evaluate

{name} = evaluate.load("causal-diagnosticity/{name}")
results = {name}.compute(
{arguments})
print(results)
```

### Inputs

See the module's `inputs_description`.

### Output Values

See the module's `inputs_description`.

## Limitations and Bias

To be written.

## Citation

```bibtex
{citation}
```
"""


def write_module(name: str, out_dir: Path) -> list[Path]:
    """Write module `name`'s generated files into `out_dir/<name>/`, and a card skeleton if it has no card; the
    paths written."""
    folder = Path(out_dir) / name
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for file, text in generated_files(name).items():
        (folder / file).write_text(text, encoding="utf-8")
        written.append(folder / file)
    if not (folder / CARD).is_file():
        (folder / CARD).write_text(card_skeleton(name), encoding="utf-8")
        written.append(folder / CARD)
    return written


def out_of_sync(name: str, out_dir: Path) -> list[Path]:
    """The files of `out_dir/<name>/` that differ from what `write_module` writes (a missing card included)."""
    folder = Path(out_dir) / name
    stale = [
        folder / file
        for file, text in generated_files(name).items()
        if not (folder / file).is_file() or (folder / file).read_text(encoding="utf-8") != text
    ]
    return stale + ([folder / CARD] if not (folder / CARD).is_file() else [])
