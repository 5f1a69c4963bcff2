"""Artifact probes: text-only scorers that never see which edit set is which, run on every built dataset.

Each probe scores an explanation from its text (with the question, and the pair's real-world facts where the
builder records them in `metadata["facts"]`); its diagnosticity D over a task's pairs is the share of pairs where
it scores the faithful explanation higher. A probe that separates the two explanations (D far from 0.5 in
either direction: "longer is faithful" and "shorter is faithful" are one probe, D and 1 - D) shows a text
artifact that any metric could exploit without looking at the model. A probe fails when its 95% CI is not
inside [0.40, 0.60]."""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .api.records import PairRecord
from .statistics import diagnosticity

BAND = (0.40, 0.60)
CONFIDENCE = 0.95
MIN_PAIRS = 100  # below this a 95% CI cannot fit inside BAND even for a balanced probe
PASS, FAIL, TOO_FEW, NOT_RUN = "PASS", "FAIL", "FEW", "n/a"

_TOKEN = re.compile(r"\d+(?:,\d{3})*(?:\.\d+)?|[A-Za-z]+(?:['-][A-Za-z]+)*|[^\sA-Za-z\d]")
_NUMERAL = re.compile(r"\d+(?:,\d{3})*(?:\.\d+)?")
_WORD = re.compile(r"\d+(?:,\d{3})*(?:\.\d+)?|[A-Za-z]+(?:['-][A-Za-z]+)*")
_MASK = "<M>"
_TINY = 1e-9  # keeps a log ratio finite when a number is 0
FUNCTION_WORDS = frozenset(
    "a an the and or but nor so as than that this these those it its is are was were be been being has have had do "
    "does did of in on at to for from by with into onto about over under between among within without not no "
    "which who whom whose what when where why how if then there here also just".split()
)
"""Left out of the overlap probes: matching them is grammar, not content ("a" would match the option label (A),
"in" the question's "Fill in")."""


def normal_word(word: str) -> str:
    """A word as the probes compare it: lower case, without a possessive 's, plurals in -ies/-s made singular."""
    word = word.lower()
    word = word[:-2] if word.endswith("'s") else word
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def words(text: str) -> list[str]:
    """The normalised words and numerals of a text, in order."""
    return [normal_word(w) for w in _WORD.findall(text)]


def numerals(text: str) -> list[float]:
    """The numbers written in a text (thousands separators allowed)."""
    return [float(n.replace(",", "")) for n in _NUMERAL.findall(text)]


def world_facts(metadata: Mapping[str, Any]) -> tuple[str, ...]:
    """The pair's real-world facts as the builder records them: `metadata["facts"]`, a list of sentences or of
    objects with a `sentence` (empty when the builder records none)."""
    facts = metadata.get("facts") or ()
    return tuple(f["sentence"] if isinstance(f, Mapping) else str(f) for f in facts)


@dataclass(frozen=True)
class PairText:
    """What the probes see of one pair. `fact_words` is the vocabulary of both edit sets together (and of the
    real-world facts): it cannot tell which explanation is faithful, and the template probe masks it so that a
    template is the prose a builder wraps around the facts, not the facts' content."""

    id: str
    cluster: str
    question: str
    faithful: str
    unfaithful: str
    facts: tuple[str, ...]
    fact_words: frozenset[str]

    @classmethod
    def from_record(cls, record: PairRecord) -> PairText:
        meta = record.meta
        facts = world_facts(meta)
        vocabulary = frozenset(w for text in (*record.edits, *record.counter_edits, *facts) for w in words(text))
        return cls(
            record.id,
            record.id if record.cluster is None else record.cluster,
            record.question,
            record.explanation_faithful,
            record.explanation_unfaithful,
            facts,
            vocabulary,
        )


TextScorer = Callable[[str, PairText], float]
"""Scores one explanation of a pair (the pair gives the question and the facts); NaN when it cannot."""


@dataclass(frozen=True)
class Probe:
    """A text-only scorer over a whole task: (faithful scores, unfaithful scores) of its pairs."""

    name: str
    meaning: str
    score: Callable[[Sequence[PairText]], tuple[np.ndarray, np.ndarray]]
    not_applicable: str = "no pair can be scored"


def per_text(scorer: TextScorer) -> Callable[[Sequence[PairText]], tuple[np.ndarray, np.ndarray]]:
    """A probe's scoring from a scorer of single explanations."""

    def score(pairs: Sequence[PairText]) -> tuple[np.ndarray, np.ndarray]:
        return (
            np.array([scorer(p.faithful, p) for p in pairs], dtype=float),
            np.array([scorer(p.unfaithful, p) for p in pairs], dtype=float),
        )

    return score


def content_words(text: str) -> set[str]:
    """The distinct normalised words and numerals of a text, function words left out."""
    return set(words(text)) - FUNCTION_WORDS


def question_overlap(text: str, pair: PairText) -> float:
    """Share of the explanation's distinct content words (and numerals) that also occur in the question."""
    mine = content_words(text)
    return len(mine & content_words(pair.question)) / len(mine) if mine else float("nan")


def round_numbers(text: str, _: PairText | None = None) -> float:
    """How round the numbers are: each whole numeral counts once per power of 10, 100, 1000 that divides it."""
    total = 0
    for value in numerals(text):
        if value == int(value) and value != 0:
            total += sum(int(value) % base == 0 for base in (10, 100, 1000))
    return float(total)


def fact_overlap(text: str, pair: PairText) -> float:
    """Share of the explanation's distinct content words and numerals that occur in the pair's real-world facts."""
    if not pair.facts:
        return float("nan")
    mine = content_words(text)
    facts = {w for fact in pair.facts for w in content_words(fact)}
    return len(mine & facts) / len(mine) if mine else float("nan")


def fact_number_closeness(text: str, pair: PairText) -> float:
    """Minus the mean distance, in log ratio, from each numeral of the explanation to the nearest numeral of the
    real-world facts (0 when every number is a true value); NaN without numbers on either side."""
    truth = [v for fact in pair.facts for v in numerals(fact)]
    mine = numerals(text)
    if not truth or not mine:
        return float("nan")
    return -float(np.mean([min(abs(math.log((v + _TINY) / (t + _TINY))) for t in truth) for v in mine]))


def template(text: str, pair: PairText) -> str:
    """The explanation with numerals, capitalised words, words of the question and words of the pair's facts
    each replaced by one mask (a run of masks counts once): the prose around the content."""
    out: list[str] = []
    question = set(words(pair.question))
    for token in _TOKEN.findall(text):
        is_word = token[0].isalpha()
        if token[0].isdigit() or (
            is_word and (token[0].isupper() or normal_word(token) in question or normal_word(token) in pair.fact_words)
        ):
            token = _MASK
        if not (token == _MASK and out and out[-1] == _MASK):
            out.append(token)
    return " ".join(out)


def fold_of(cluster: str) -> int:
    """One of two folds, fixed by the cluster's name (pairs that share an entity share a fold)."""
    return hashlib.sha256(cluster.encode("utf-8")).digest()[0] % 2


def template_scores(pairs: Sequence[PairText]) -> tuple[np.ndarray, np.ndarray]:
    """Out-of-fold template identity: an explanation scores how often its template was the faithful one among
    the pairs of the other fold ((faithful + 1) / (seen + 2), so an unseen template scores 0.5). Two folds by
    cluster keep a template from scoring itself, and the leave-one-out bias (a balanced template scored lower on
    the side it sits on) away."""
    templates = [(template(p.faithful, p), template(p.unfaithful, p)) for p in pairs]
    folds = [fold_of(p.cluster) for p in pairs]
    faithful_count: list[Counter[str]] = [Counter(), Counter()]
    seen_count: list[Counter[str]] = [Counter(), Counter()]
    for (f, u), fold in zip(templates, folds):
        faithful_count[fold][f] += 1
        seen_count[fold][f] += 1
        seen_count[fold][u] += 1

    def score(t: str, fold: int) -> float:
        other = 1 - fold
        return (faithful_count[other][t] + 1) / (seen_count[other][t] + 2)

    return (
        np.array([score(f, fold) for (f, _), fold in zip(templates, folds)]),
        np.array([score(u, fold) for (_, u), fold in zip(templates, folds)]),
    )


TEXT_PROBES: tuple[Probe, ...] = (
    Probe("chars", "explanation length in characters", per_text(lambda text, _: float(len(text)))),
    Probe("words", "explanation length in words", per_text(lambda text, _: float(len(words(text))))),
    Probe("question_overlap", "share of its content words that occur in the question", per_text(question_overlap)),
    Probe("numerals", "count of numerals", per_text(lambda text, _: float(len(numerals(text))))),
    Probe("round_numbers", "roundness of its numbers (multiples of 10/100/1000)", per_text(round_numbers)),
    Probe(
        "template",
        "how often its template (names, numbers, question and fact words masked) was the faithful one, out of fold",
        template_scores,
    ),
    Probe(
        "world_fact_overlap",
        "share of its content words and numerals found in the real-world facts",
        per_text(fact_overlap),
        "no real-world facts in metadata",
    ),
    Probe(
        "world_fact_numbers",
        "closeness of its numbers to the real-world facts' numbers",
        per_text(fact_number_closeness),
        "no numbers in the explanations or no real-world facts",
    ),
)


@dataclass(frozen=True)
class ProbeTokenizers:
    """The packaged models' tokenizers the token-length probes use, each model's identity (package==version),
    and why a packaged model's tokenizer was not used."""

    tokenizers: Mapping[str, Any]
    identities: Mapping[str, str]
    skipped: Mapping[str, str]


def _tokenizer_folder(name: str) -> Path:
    """A folder holding only the tokenizer of a packaged model: its converted model cache when complete, else a
    tokenizer-only cache read once from the GGUF file (so a probe never converts or loads weights)."""
    from transformers import AutoTokenizer

    from .packaged_models import PACKAGED_MODELS
    from .paths import cache_root, locked, staged_folder

    converted = cache_root() / "models" / name
    if (converted / "CONVERTED.json").is_file() and (converted / "tokenizer_config.json").is_file():
        return converted
    gguf = PACKAGED_MODELS.get(name).locate_gguf()
    source = {"gguf": gguf.name, "bytes": gguf.stat().st_size}
    folder = cache_root() / "tokenizers" / name
    marker = folder / "SOURCE.json"
    with locked(folder):
        if not marker.is_file() or json.loads(marker.read_text(encoding="utf-8")) != source:
            with staged_folder(folder) as staging:
                AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name).save_pretrained(staging)
                (staging / marker.name).write_text(json.dumps(source), encoding="utf-8")
    return folder


@functools.cache
def packaged_tokenizers() -> ProbeTokenizers:
    """The tokenizer of every packaged model that is installed; a model whose package is missing is skipped,
    with the reason."""
    from transformers import AutoTokenizer

    from .packaged_models import PACKAGED_MODELS
    from .split_gguf import ModelPackageError

    tokenizers, identities, skipped = {}, {}, {}
    for name in PACKAGED_MODELS:
        spec = PACKAGED_MODELS.get(name)
        try:
            folder = _tokenizer_folder(name)
        except (ImportError, FileNotFoundError, ModelPackageError) as err:
            skipped[name] = f"not installed ({str(err).splitlines()[0]})"
            continue
        tokenizers[name] = AutoTokenizer.from_pretrained(folder)
        identities[name] = spec.release()
    return ProbeTokenizers(tokenizers, identities, skipped)


def token_probe(name: str, tokenizer: Any) -> Probe:
    """Explanation length in tokens of one tokenizer (no special tokens)."""

    def score(pairs: Sequence[PairText]) -> tuple[np.ndarray, np.ndarray]:
        faithful = tokenizer([p.faithful for p in pairs], add_special_tokens=False)["input_ids"]
        unfaithful = tokenizer([p.unfaithful for p in pairs], add_special_tokens=False)["input_ids"]
        return np.array([len(t) for t in faithful], float), np.array([len(t) for t in unfaithful], float)

    return Probe(f"tokens[{name}]", f"explanation length in {name} tokens", score)


@dataclass(frozen=True)
class ProbeResult:
    """One probe on one task: D with its CI over the pairs it could score, and the verdict against the band."""

    task: str
    probe: str
    d: float
    ci_low: float
    ci_high: float
    n: int
    n_valid: int
    verdict: str
    note: str = ""

    @property
    def distance(self) -> float:
        """|D - 0.5|: how far the probe separates the two explanations, whichever side it favours."""
        return abs(self.d - 0.5)

    def describe(self) -> str:
        return (
            f"{self.task}: probe '{self.probe}' D = {self.d:.3f} "
            f"(95% CI {self.ci_low:.3f}-{self.ci_high:.3f}, not inside [{BAND[0]:.2f}, {BAND[1]:.2f}])"
        )


def verdict(ci_low: float, ci_high: float, n_valid: int) -> str:
    """PASS when the whole 95% CI lies inside the band, FAIL otherwise; FEW (shown, never gating) when fewer than
    MIN_PAIRS pairs were scored, too few for any CI to fit inside the band."""
    if n_valid < MIN_PAIRS:
        return TOO_FEW
    return PASS if BAND[0] <= ci_low and ci_high <= BAND[1] else FAIL


def run_probe(task: str, probe: Probe, pairs: Sequence[PairText], *, seed: int = 0) -> ProbeResult:
    """D of one probe over a task's pairs (pairs it cannot score are left out and counted), its CI bootstrapped
    over the pairs' clusters (`metadata["cluster"]`, else each pair its own), as pairs that share an entity are
    not independent."""
    faithful, unfaithful = probe.score(pairs)
    clusters = [p.cluster for p in pairs]
    estimate = diagnosticity(faithful, unfaithful, clusters=clusters, confidence=CONFIDENCE, seed=seed)
    if estimate.n_valid == 0:
        nan = float("nan")
        return ProbeResult(task, probe.name, nan, nan, nan, estimate.n, 0, NOT_RUN, probe.not_applicable)
    return ProbeResult(
        task,
        probe.name,
        estimate.value,
        estimate.ci_low,
        estimate.ci_high,
        estimate.n,
        estimate.n_valid,
        verdict(estimate.ci_low, estimate.ci_high, estimate.n_valid),
        f"fewer than {MIN_PAIRS} pairs" if estimate.n_valid < MIN_PAIRS else "",
    )


@dataclass(frozen=True)
class Audit:
    """Every probe on every task of one dataset, and which tokenizers were used or skipped."""

    dataset: str
    results: tuple[ProbeResult, ...]
    tokenizers: Mapping[str, str]
    skipped_tokenizers: Mapping[str, str]

    @property
    def failures(self) -> tuple[ProbeResult, ...]:
        return tuple(r for r in self.results if r.verdict == FAIL)

    def to_manifest(self) -> dict[str, Any]:
        """The audit as the dataset's MANIFEST records it (numbers rounded, so builds stay byte-stable)."""

        def row(result: ProbeResult) -> dict[str, Any]:
            out = asdict(result)
            for key in ("d", "ci_low", "ci_high"):
                out[key] = None if math.isnan(out[key]) else round(out[key], 4)
            return out

        return {
            "band": list(BAND),
            "confidence": CONFIDENCE,
            "rule": f"a probe fails when its 95% CI is not inside the band (FEW: under {MIN_PAIRS} pairs, not judged)",
            "tokenizers": dict(self.tokenizers),
            "skipped_tokenizers": dict(self.skipped_tokenizers),
            "results": [row(r) for r in self.results],
        }


def audit_records(
    task: str, records: Sequence[PairRecord], tokenizers: ProbeTokenizers | None = None, *, seed: int = 0
) -> list[ProbeResult]:
    """Every probe on one task's records (token probes for each tokenizer given)."""
    pairs = [PairText.from_record(r) for r in records]
    probes = list(TEXT_PROBES)
    if tokenizers is not None:
        probes[1:1] = [token_probe(name, tok) for name, tok in tokenizers.tokenizers.items()]
    return [run_probe(task, probe, pairs, seed=seed) for probe in probes]


def audit_dataset(
    dataset: str,
    configs: Mapping[str, Sequence[PairRecord]],
    tokenizers: ProbeTokenizers | None = None,
    *,
    seed: int = 0,
) -> Audit:
    """Every probe on every config of a dataset (task `<dataset>` for a single default config, else
    `<dataset>/<config>`)."""
    results: list[ProbeResult] = []
    for config, records in configs.items():
        task = dataset if list(configs) == ["default"] else f"{dataset}/{config}"
        results += audit_records(task, records, tokenizers, seed=seed)
    used = dict(tokenizers.identities) if tokenizers else {}
    skipped = dict(tokenizers.skipped) if tokenizers else {}
    return Audit(dataset, tuple(results), used, skipped)


def _cell(value: float) -> str:
    return "–" if math.isnan(value) else f"{value:.3f}"


def render_table(audit: Audit) -> str:
    """The audit as a Markdown table, with the probes that could not run and the tokenizers skipped."""
    lines = [
        "| task | probe | D | 95% CI | \\|D − 0.5\\| | pairs scored | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in audit.results:
        ci = "–" if math.isnan(r.ci_low) else f"{r.ci_low:.3f}–{r.ci_high:.3f}"
        verdict_cell = f"{r.verdict} ({r.note})" if r.note else r.verdict
        lines.append(
            f"| {r.task} | {r.probe} | {_cell(r.d)} | {ci} | {_cell(r.distance)} | {r.n_valid}/{r.n} | {verdict_cell} |"
        )
    for name, reason in audit.skipped_tokenizers.items():
        lines.append(f"\nToken-length probe for {name} not run: {reason}.")
    return "\n".join(lines)


def gate_message(failures: Sequence[ProbeResult]) -> str:
    """One line naming every failing task, probe and D."""
    return "artifact probe failed: " + "; ".join(r.describe() for r in failures)


PROBE_LEGEND = "\n".join(
    f"- `{p.name}`: {p.meaning}" for p in (*TEXT_PROBES[:1], token_probe("<model>", None), *TEXT_PROBES[1:])
)
"""One line per probe, for the dataset cards."""
