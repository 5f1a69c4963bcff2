"""How a run's edits reach the model (`EDITORS`): told in context (ICE: new facts before the input, one set of
weights for every prompt) or written into the weights (ROME, MEMIT: each prompt is asked of the model holding its
edits' rewrites, its conversation carrying no facts). A weight edit is computed once per set of facts, kept as
low-rank factors, and applied only while the prompts asked under it run; afterwards the weights are the loaded ones
bit for bit, so one loaded model serves every pair."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

import torch
from tqdm.auto import tqdm

from .. import prompts
from ..api.records import PairRecord, Rewrite
from ..prompts import Prompt, Turn
from .covariance import statistics_record
from .memit import MemitOptions, memit_deltas
from .rome import EditTarget, RomeOptions, rome_deltas
from .settings import SEARCH_OPTIONS, architecture, layout, search_overrides
from .weights import EditError, WeightDelta, edited, mlp_output

EditState = tuple[str, ...]
"""The facts a prompt is asked under, in order: the key of one edited model."""


class InContextEditor:
    """ICE (paper 000 §3): the edits are told before the first turn's input; the weights never change."""

    name = "ice"
    in_context = True

    def conversation(self, prompt: Prompt) -> tuple[Turn, ...]:
        return prompts.in_context(prompt)

    def state(self, prompt: Prompt) -> EditState:
        return ()

    def learn_counterfactual(self, edits: Sequence[str], counterfactual: Sequence[str], where: str) -> None:
        """Nothing to learn: counterfactual facts are told in context like any other."""

    def prepare(self, states: Iterable[EditState], *, progress: bool = False) -> None:
        """Nothing to compute: every prompt runs on the loaded weights."""

    def applied(self, state: EditState) -> AbstractContextManager[Any]:
        return nullcontext()


IN_CONTEXT = InContextEditor()


def changes_the_fact(rewrite: Rewrite) -> bool:
    """Whether writing `rewrite` changes what the model is meant to believe (an edit restating the true object,
    such as Analogy's fact about the other country's capital, is left to the unedited weights)."""
    return rewrite.target_new.strip() != rewrite.target_true.strip()


class WeightEditor:
    """Edits written into the weights by ROME or MEMIT (as `settings` say). The facts a pair can be asked under are
    learned from its `rewrites` and `counter_rewrites` (`learn`: one rewrite per edit, in the edits' order); a set
    of facts is written as the rewrites of those among them that change a fact."""

    in_context = False

    def __init__(self, name: str, lm: Any, settings: RomeOptions | MemitOptions) -> None:
        mlp = layout(lm.model, settings.module)
        for layer in settings.edited_layers(lm.model):
            mlp_output(lm.model, layer, mlp)
        self.name, self.lm, self.settings = name, lm, settings
        self.rewrites: dict[str, Rewrite] = {}
        self.deltas: dict[EditState, tuple[WeightDelta, ...]] = {}
        self.active: EditState | None = None

    def learn(self, pairs: Iterable[PairRecord]) -> None:
        """The rewrite of every edit of `pairs`; an EditError names the pair and field of a rewrite that is missing,
        cannot be tokenised (its subject not found in its prompt) or contradicts an earlier one for the same edit."""
        for pair in pairs:
            sides = (
                ("rewrites", pair.edits, pair.rewrites),
                ("counter_rewrites", pair.counter_edits, pair.counter_rewrites),
            )
            for field, facts, rewrites in sides:
                if len(facts) != len(rewrites):
                    raise EditError(
                        f"pair {pair.id}: field '{field}' has {len(rewrites)} rewrites for {len(facts)} edits; a "
                        "weight editor needs one rewrite per edit"
                    )
                for index, (fact, rewrite) in enumerate(zip(facts, rewrites, strict=True)):
                    EditTarget.of(self.lm.tokenizer, rewrite, f"pair {pair.id}: field '{field}'[{index}]")
                    known = self.rewrites.setdefault(fact, rewrite)
                    if (known.prompt, known.subject, known.target_new) != (
                        rewrite.prompt,
                        rewrite.subject,
                        rewrite.target_new,
                    ):
                        raise EditError(f"pair {pair.id}: field '{field}'[{index}] rewrites {fact!r} unlike before")

    def learn_counterfactual(self, edits: Sequence[str], counterfactual: Sequence[str], where: str) -> None:
        """The rewrite of every fact of `counterfactual` (edits of the same length, as a task's CaF counterfactual
        makes them) that replaces the fact at its place in `edits` by stating another object: the replaced fact's
        rewrite with that object as its new target. An EditError, naming `where`, when a replaced fact has no known
        rewrite or the new fact is not its statement with another object."""
        if len(edits) != len(counterfactual):
            raise EditError(f"{where}: the counterfactual has {len(counterfactual)} edits for {len(edits)}")
        for index, (fact, new) in enumerate(zip(edits, counterfactual)):
            if new == fact or new in self.rewrites:
                continue
            known = self.rewrites.get(fact)
            tail = f" {known.target_new}." if known else ""
            if known is None or not fact.endswith(tail) or not new.startswith(fact.removesuffix(tail) + " "):
                raise EditError(f"{where}: counterfactual edit [{index}] {new!r} is not {fact!r} with another object")
            target = new.removeprefix(fact.removesuffix(tail) + " ").removesuffix(".")
            rewrite = Rewrite(known.prompt, known.subject, target, known.target_true)
            EditTarget.of(self.lm.tokenizer, rewrite, f"{where}: counterfactual edit [{index}]")
            self.rewrites[new] = rewrite

    def conversation(self, prompt: Prompt) -> tuple[Turn, ...]:
        return prompt.turns

    def state(self, prompt: Prompt) -> EditState:
        return prompt.edits or ()

    def written(self, state: EditState) -> tuple[Rewrite, ...]:
        """The rewrites that put the model in `state`; an EditError for a fact no pair gave a rewrite for."""
        unknown = [fact for fact in state if fact not in self.rewrites]
        if unknown:
            raise EditError(f"no rewrite is known for the edit {unknown[0]!r}, so it cannot be written into weights")
        return tuple(r for r in map(self.rewrites.__getitem__, state) if changes_the_fact(r))

    def prepare(self, states: Iterable[EditState], *, progress: bool = False) -> None:
        """Compute the edits of `states` not computed yet."""
        todo = [s for s in dict.fromkeys(states) if s not in self.deltas]
        write = rome_deltas if isinstance(self.settings, RomeOptions) else memit_deltas
        with torch.inference_mode(False), torch.enable_grad():
            for state in tqdm(todo, desc=f"{self.name} edits", unit="edit", disable=not progress or len(todo) < 2):
                rewrites = self.written(state)
                self.deltas[state] = (
                    tuple(write(self.lm, rewrites, self.settings, f"edits {state!r}")) if rewrites else ()
                )

    def statistics(self) -> list[dict[str, Any]]:
        """The key statistics the edits divide by: each edited layer's cache record ('sampled'), or the identity."""
        if self.settings.covariance == "identity":
            return [{"covariance": "identity"}]
        mlp = layout(self.lm.model, self.settings.module)
        return [statistics_record(self.lm, mlp, layer) for layer in self.settings.edited_layers(self.lm.model)]

    def resolved_settings(self) -> dict[str, Any]:
        """The settings the edits are made with, the architecture's defaults filled in, and where those come from."""
        model, settings = self.lm.model, self.settings
        family = architecture(model, settings.module)
        record: dict[str, Any] = {
            "layers": list(settings.edited_layers(model)),
            "module": family.mlp.path,
            "search": dataclasses.asdict(settings.value_search(model)),
            "covariance": settings.covariance,
        }
        if isinstance(settings, MemitOptions):
            record["moment_weight"] = settings.moment_weight
        return record | {"defaults_from": f"{family.reference} ({family.depth} layers): {family.source}"}

    @contextmanager
    def applied(self, state: EditState) -> Iterator[None]:
        """The model holding `state`'s edit while the block runs (a RuntimeError when another edit is applied: edits
        are computed and applied on the loaded weights only)."""
        if self.active is not None:
            raise RuntimeError(f"the {self.name} edit {self.active!r} is still applied")
        self.prepare([state])
        self.active = state
        try:
            with edited(self.lm.model, self.deltas[state]):
                yield
        finally:
            self.active = None


Editor = InContextEditor | WeightEditor

WEIGHT_EDITORS: dict[str, type[RomeOptions] | type[MemitOptions]] = {"rome": RomeOptions, "memit": MemitOptions}
"""The weight editors and their settings."""


def editor_options(name: str, options: Sequence[tuple[str, Any]]) -> RomeOptions | MemitOptions:
    """The settings of weight editor `name` from `--editor-option KEY=VALUE` pairs (the value search's `steps`,
    `learning_rate`, `weight_decay`, `clamp`, `target_nll` among them), over the edited architecture's defaults
    (`settings.ARCHITECTURES`); an EditError names an unknown key or a value out of range."""
    if name not in WEIGHT_EDITORS:
        raise EditError(f"the {name} editor has no options (weight editors: {', '.join(WEIGHT_EDITORS)})")
    kind = WEIGHT_EDITORS[name]
    own = {f.name for f in dataclasses.fields(kind)} - {"search"}
    unknown = [key for key, _ in options if key not in own and key not in SEARCH_OPTIONS]
    if unknown:
        raise EditError(
            f"editor {name} has no option '{unknown[0]}' (options: {', '.join(sorted(own | set(SEARCH_OPTIONS)))})"
        )
    search = search_overrides({key: value for key, value in options if key in SEARCH_OPTIONS})
    given = {key: tuple(value) if key == "layers" else value for key, value in options if key in own}
    return kind(**given, search=search)


def make_editor(name: str, lm: Any, options: Sequence[tuple[str, Any]] = ()) -> Editor:
    """The editor `name` ('ice', 'rome', 'memit') over the loaded model `lm`."""
    if name == "ice" and not options:
        return IN_CONTEXT
    return WeightEditor(name, lm, editor_options(name, options))
