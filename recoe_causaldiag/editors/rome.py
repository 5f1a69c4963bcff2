"""ROME (Meng et al., 2022, "Locating and Editing Factual Associations in GPT"): one fact (subject, relation prompt,
new object) written into one MLP output matrix W as a rank-one update.

The key k is the MLP's hidden activation at the subject's last token of the rewrite prompt. The value v* is found by
gradient descent on a vector δ added to the MLP's output there, so that the model completes the prompt with the new
object (with weight decay, and ‖δ‖ clamped to `clamp`·‖v‖). The update is ΔW = δ (C⁻¹k)ᵀ / (kᵀC⁻¹k), C the second
moment of the layer's keys (`covariance`; the identity when the option says so), so ΔW k = δ and keys unlike k move
least. Differences from the authors' code: the key is taken from the prompt alone (no sampled prefixes averaged), and
no KL term on an "essence" prompt; the specificity test measures what that costs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ..api.records import Rewrite
from .covariance import layer_second_moment
from .settings import SearchOverrides, ValueSearch, architecture, layout
from .weights import EditError, WeightDelta, edited, mlp_output

COVARIANCES = ("sampled", "identity")


@dataclass(frozen=True)
class RomeOptions:
    """The editor's settings (`--editor-option`): the edited `layer`, the `module` path when the architecture is not
    in `settings.ARCHITECTURES`, the value `search` settings that differ from the architecture's, and the key
    statistics: 'sampled' (`covariance.key_second_moment`) or 'identity'. Unset, the architecture's defaults hold."""

    layer: int | None = None
    module: str | None = None
    search: SearchOverrides = ()
    covariance: str = "sampled"

    def __post_init__(self) -> None:
        if self.covariance not in COVARIANCES:
            raise EditError(f"covariance must be one of {', '.join(COVARIANCES)}, not {self.covariance!r}")

    def edited_layers(self, model) -> tuple[int, ...]:
        depth = model.config.num_hidden_layers
        return architecture(model, self.module).layers("rome", depth) if self.layer is None else (self.layer,)

    def value_search(self, model) -> ValueSearch:
        return architecture(model, self.module).search("rome", self.search)


@dataclass(frozen=True)
class EditTarget:
    """A rewrite as tokens: the prompt with the subject filled in, the subject's last token position, and the new
    object's tokens as they follow the prompt."""

    prompt_ids: tuple[int, ...]
    subject_position: int
    target_ids: tuple[int, ...]

    @classmethod
    def of(cls, tokenizer, rewrite: Rewrite, where: str = "rewrite") -> EditTarget:
        """The tokens of `rewrite`; an EditError names `where` (the pair and field) when the prompt has no '{}' for
        the subject or the subject's tokens do not begin the filled-in prompt's."""
        if rewrite.prompt.count("{}") != 1 or not rewrite.subject.strip():
            raise EditError(f"{where}: the prompt needs one '{{}}' for the subject and the subject must be given")
        text = rewrite.prompt.format(rewrite.subject)
        prompt_ids = tokenizer(text)["input_ids"]
        through_subject = tokenizer(rewrite.prompt.split("{}")[0] + rewrite.subject)["input_ids"]
        if prompt_ids[: len(through_subject)] != through_subject:
            raise EditError(f"{where}: the subject {rewrite.subject!r} is not found as tokens of the prompt {text!r}")
        target = rewrite.target_new if rewrite.target_new.startswith(" ") else " " + rewrite.target_new
        target_ids = tokenizer(target, add_special_tokens=False)["input_ids"]
        if not target_ids:
            raise EditError(f"{where}: the new object is empty")
        return cls(tuple(prompt_ids), len(through_subject) - 1, tuple(target_ids))


def subject_activations(model, module, targets: Sequence[EditTarget]) -> tuple[torch.Tensor, torch.Tensor]:
    """`module`'s input and output at the subject's last token of each target's prompt, as rows (a block's output
    is its hidden state)."""
    inputs, outputs, position = [], [], [0]

    def capture(_module, args, output) -> None:
        hidden = output[0] if isinstance(output, tuple) else output
        inputs.append(args[0][0, position[0]].detach())
        outputs.append(hidden[0, position[0]].detach())

    hook = module.register_forward_hook(capture)
    try:
        with torch.no_grad():
            for target in targets:
                position[0] = target.subject_position
                model(torch.tensor([target.prompt_ids], device=model.device))
    finally:
        hook.remove()
    return torch.stack(inputs), torch.stack(outputs)


def value_shift(model, module, target: EditTarget, value: torch.Tensor, search: ValueSearch) -> torch.Tensor:
    """δ: what added to `module`'s output at the subject makes the new object the prompt's completion."""
    ids = torch.tensor([target.prompt_ids + target.target_ids[:-1]], device=model.device)
    first = len(target.prompt_ids) - 1
    targets = torch.tensor(target.target_ids, device=model.device)
    delta = torch.zeros_like(value, dtype=torch.float32, requires_grad=True)
    optimiser = torch.optim.Adam([delta], lr=search.learning_rate)
    largest = search.clamp * value.float().norm()

    def shifted(_module, _inputs, output):
        hidden = (output[0] if isinstance(output, tuple) else output).clone()
        hidden[0, target.subject_position] += delta.to(hidden.dtype)
        return (hidden, *output[1:]) if isinstance(output, tuple) else hidden

    trainable = [p for p in model.parameters() if p.requires_grad]
    for parameter in trainable:
        parameter.requires_grad_(False)
    try:
        for _ in range(search.steps):
            hook = module.register_forward_hook(shifted)
            try:
                logits = model(ids).logits[0, first : first + len(targets)].float()
            finally:
                hook.remove()
            nll = torch.nn.functional.cross_entropy(logits, targets)
            optimiser.zero_grad()
            (nll + search.weight_decay * delta.norm() ** 2).backward()
            optimiser.step()
            with torch.no_grad():
                if delta.norm() > largest:
                    delta.mul_(largest / delta.norm())
            if nll.item() < search.target_nll:
                break
    finally:
        for parameter in trainable:
            parameter.requires_grad_(True)
    return delta.detach()


def _rank_one(model, module, target: EditTarget, search: ValueSearch, second_moment: torch.Tensor | None):
    """ΔW (out × in) that writes `target` into `module`, as its rank-one factors (`second_moment`: the layer's key
    statistics, None for the identity)."""
    keys, values = subject_activations(model, module, [target])
    delta = value_shift(model, module, target, values[0], search)
    key = keys[0].float()
    direction = key if second_moment is None else torch.linalg.solve(second_moment.to(key), key)
    return delta[:, None], (direction / (direction @ key))[None, :]


def rome_deltas(lm, rewrites: Sequence[Rewrite], options: RomeOptions, where: str = "rewrites") -> list[WeightDelta]:
    """The updates that write every rewrite into the loaded model `lm`, one after another (each computed on the model
    already holding the ones before; applied together they are that sequence). The key statistics are estimated
    once per layer and cached (`covariance`)."""
    model, tokenizer = lm.model, lm.tokenizer
    mlp = layout(model, options.module)
    (layer,) = options.edited_layers(model)
    module = mlp_output(model, layer, mlp)
    second_moment = layer_second_moment(lm, mlp, layer) if options.covariance == "sampled" else None
    search = options.value_search(model)
    deltas: list[WeightDelta] = []
    for index, rewrite in enumerate(rewrites):
        target = EditTarget.of(tokenizer, rewrite, f"{where}[{index}]")
        with edited(model, deltas):
            deltas.append(mlp.delta(layer, *_rank_one(model, module, target, search, second_moment)))
    return deltas
