"""Loading causal LMs: packaged offline models (GGUF converted once to a safetensors cache), local paths, hub ids."""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from .api.errors import LabelTokenError
from .api.registry import UnknownNameError
from .api.run_spec import ModelIdentity
from .defaults import DEFAULT_MODEL as DEFAULT_MODEL
from .packaged_models import PACKAGED_MODELS, check_memory
from .paths import cache_root, file_sha256, locked, staged_folder, umask
from .prompts import Turn

log = logging.getLogger(__name__)

CACHE_FORMAT = 2
_MARKER = "CONVERTED.json"


@dataclass
class LanguageModel:
    """A loaded causal LM with its tokenizer and the way its prompts are rendered. `revision` is resolved: for a
    packaged model `package==version@sha256:<GGUF sha256>`, for a hub model its commit, for a folder its path."""

    name: str
    revision: str
    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    chat: bool

    @property
    def device(self) -> torch.device:
        return self.model.device

    @property
    def dtype(self) -> str:
        return str(self.model.dtype).removeprefix("torch.")

    @property
    def identity(self) -> ModelIdentity:
        """Which weights these are, in which dtype and on which device (what a run spec records)."""
        return ModelIdentity(self.name, self.revision, self.dtype, str(self.device), self.model.num_parameters())

    @property
    def pad_token_id(self) -> int:
        tok = self.tokenizer
        return next(i for i in (tok.pad_token_id, tok.eos_token_id, 0) if i is not None)

    def render(self, turns: Sequence[Turn]) -> str:
        """The conversation as text; an open last assistant turn is continued, otherwise a new one is opened."""
        is_open = turns[-1].role == "assistant"
        if self.chat:
            messages = [{"role": t.role, "content": t.content} for t in turns]
            return self.tokenizer.apply_chat_template(
                messages, tokenize=False, continue_final_message=is_open, add_generation_prompt=not is_open
            )
        text = "\n".join(f"{t.role.capitalize()}: {t.content}" for t in turns)
        return text if is_open else text + "\nAssistant:"

    def encode(self, text: str, *, continuation: bool = False) -> list[int]:
        """Token ids; a prompt start gets the tokenizer's special tokens unless the chat template wrote them."""
        add_special = not continuation and not self.chat
        return self.tokenizer(text, add_special_tokens=add_special)["input_ids"]

    def label_token_ids(self, labels: Sequence[str], *, leading_space: bool) -> tuple[int, ...]:
        """The single next-token id of each label, as it would follow the prompt (eq. 7): with a leading space
        after a prompt that ends in a word (the direct prompt of a base model), without one after a prompt that
        ends in whitespace (a chat template's open assistant turn, the CoT answer cue "The best answer is: ")."""
        ids, form = [], "with a leading space" if leading_space else "without a leading space"
        for label in labels:
            pieces = self.encode((" " if leading_space else "") + label, continuation=True)
            if len(pieces) != 1:
                raise LabelTokenError(
                    f"label {label!r} {form} is {len(pieces)} tokens for {self.name} (needs exactly one): {pieces}"
                )
            ids.append(pieces[0])
        if len(set(ids)) != len(ids):
            raise LabelTokenError(f"labels {list(labels)} {form} share a token for {self.name}: {ids}")
        return tuple(ids)


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _gguf_fingerprint(gguf: Path) -> dict[str, object]:
    stat = gguf.stat()
    return {"format": CACHE_FORMAT, "gguf": gguf.name, "bytes": stat.st_size}


def _recorded_files(folder: Path, fingerprint: dict[str, object]) -> dict[str, dict[str, object]] | None:
    """The files the cache's marker records ({name: {"bytes", "sha256"}}) when it was made from this GGUF in this
    format; None when there is no such marker."""
    try:
        recorded = json.loads((folder / _MARKER).read_text())
    except (OSError, ValueError):
        return None
    files = recorded.get("files") if recorded.get("source") == fingerprint else None
    return files if isinstance(files, dict) and files else None


def _cache_is_complete(folder: Path, fingerprint: dict[str, object]) -> bool:
    """Every recorded file is there with its recorded size (the quick check of every load)."""
    files = _recorded_files(folder, fingerprint)
    return files is not None and all(
        (folder / name).is_file() and (folder / name).stat().st_size == entry["bytes"] for name, entry in files.items()
    )


def _cache_is_intact(folder: Path, fingerprint: dict[str, object]) -> bool:
    """Every recorded file is there with its recorded sha256 (a same-size corruption included)."""
    files = _recorded_files(folder, fingerprint)
    return files is not None and all(
        (folder / name).is_file() and file_sha256(folder / name) == entry["sha256"] for name, entry in files.items()
    )


def _convert_gguf(gguf: Path, target: Path, fingerprint: dict[str, object]) -> None:
    """Dequantize a GGUF once and store it as float16 safetensors, with a marker that records each file's size and
    sha256; the folder appears whole or not at all."""
    log.warning("converting %s to a float16 safetensors cache in %s (one time, 20-60 s)", gguf.name, target)
    with staged_folder(target) as staging:
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
        if getattr(model, "hf_quantizer", None) is not None:
            model.hf_quantizer.remove_quantization_config(model)
        model.to(torch.float16).save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        for path in staging.iterdir():
            path.chmod(0o666 & ~umask())
        files = {
            p.name: {"bytes": p.stat().st_size, "sha256": file_sha256(p)} for p in staging.iterdir() if p.is_file()
        }
        marker = {"source": fingerprint, "files": files, "gguf_sha256": file_sha256(gguf)}
        (staging / _MARKER).write_text(json.dumps(marker, indent=1))


def _converted(name: str, *, verify: bool) -> tuple[Path, bool]:
    """The converted safetensors folder of a packaged model, and whether it passed its check: sizes only, or with
    `verify` every file's sha256. One that fails (or is missing) is rebuilt from the packaged GGUF."""
    packaged = PACKAGED_MODELS.get(name)
    gguf = packaged.locate_gguf()
    fingerprint = _gguf_fingerprint(gguf)
    folder = cache_root() / "models" / name
    with locked(folder):
        passed = (_cache_is_intact if verify else _cache_is_complete)(folder, fingerprint)
        if not passed:
            if folder.exists():
                log.warning("the converted cache of %s in %s fails its check; it is rebuilt", name, folder)
            check_memory(name, packaged.convert_memory_gb, "converting")
            _convert_gguf(gguf, folder, fingerprint)
    return folder, passed


def _packaged_model(name: str) -> tuple[Path, str]:
    """The converted safetensors folder of a packaged model, (re)built when missing or incomplete, and the model's
    resolved revision: `package==version@sha256:<sha256 of the GGUF file>`."""
    folder, _ = _converted(name, verify=False)
    gguf_sha256 = json.loads((folder / _MARKER).read_text())["gguf_sha256"]
    return folder, f"{PACKAGED_MODELS.get(name).release()}@sha256:{gguf_sha256}"


def packaged_model_dir(name: str) -> Path:
    """The converted safetensors folder of a packaged model, (re)built when missing or incomplete."""
    return _packaged_model(name)[0]


def verify_packaged_model(name: str) -> bool:
    """Check every file of a packaged model's converted folder against the sha256 its marker records; False when
    one differs (a same-size corruption included), and the folder was rebuilt. What a worker does before each task,
    so a corrupted cache is never scored."""
    return _converted(name, verify=True)[1]


def gguf_depth(gguf: Path) -> int:
    """The number of decoder layers a GGUF file's header declares (`<architecture>.block_count`): read without
    converting or loading the weights."""
    from gguf import GGUFReader

    fields = GGUFReader(gguf).fields
    return int(fields[f"{fields['general.architecture'].contents()}.block_count"].contents())


def decoder_depth(name: str, revision: str | None = None) -> int | None:
    """The number of decoder layers of a model (packaged name, folder or hub id), read from its configuration
    without loading its weights; None where no configuration is reachable here (a hub id offline)."""
    if name in PACKAGED_MODELS:
        return gguf_depth(PACKAGED_MODELS.get(name).locate_gguf())
    if Path(name).expanduser().is_dir():
        source, revision = str(Path(name).expanduser()), None
    else:
        source = name
    try:
        config = AutoConfig.from_pretrained(source, revision=revision, trust_remote_code=False)
    except (OSError, ValueError):
        return None
    return getattr(config.get_text_config(), "num_hidden_layers", None)


def check_layer_options(
    model: str,
    metric_options: Sequence[tuple[str, str, Any]] = (),
    editor_options: Sequence[tuple[str, Any]] = (),
    revision: str | None = None,
) -> None:
    """Refuse, before the model loads, decoder layer indices it does not have: a metric's layer options
    (`Metric.layer_options`) and a weight editor's `layer` / `layers`. A model whose depth cannot be read here is
    checked when it loads."""
    from .api.metric import metric_registry

    metrics = metric_registry()
    named = [(f"{m}.{key}", value) for m, key, value in metric_options if key in metrics.get(m).layer_options]
    named += [(f"editor option {key}", value) for key, value in editor_options if key in ("layer", "layers")]
    if not named or (depth := decoder_depth(model, revision)) is None:
        return
    for option, value in named:
        layers = (value,) if isinstance(value, int) else tuple(value or ())
        outside = [layer for layer in layers if not (isinstance(layer, int) and 0 <= layer < depth)]
        if outside:
            raise ValueError(
                f"{option}={value}: {model} has {depth} decoder layers (0-{depth - 1}); {outside} are not among them"
            )


def _from_folder(
    folder: Path | str, dtype: torch.dtype, device: torch.device, revision: str | None
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    tokenizer = AutoTokenizer.from_pretrained(folder, revision=revision, trust_remote_code=False)
    model = AutoModelForCausalLM.from_pretrained(folder, revision=revision, dtype=dtype, trust_remote_code=False)
    return model.to(device).eval(), tokenizer


def default_dtype(device: torch.device) -> torch.dtype:
    """bfloat16 on CUDA (float16's range overflows in some models' activations), float32 on CPU."""
    return torch.bfloat16 if device.type == "cuda" else torch.float32


def load_model(
    name: str = DEFAULT_MODEL,
    *,
    revision: str | None = None,
    device: str | torch.device | None = None,
    dtype: torch.dtype | None = None,
) -> LanguageModel:
    """Load a packaged model by name, a model folder by path, or a Hugging Face hub id (needs network)."""
    device = torch.device(device) if device is not None else default_device()
    dtype = dtype or default_dtype(device)
    if name in PACKAGED_MODELS:
        folder, resolved = _packaged_model(name)
        if device.type == "cpu" and dtype == torch.float32:
            check_memory(name, PACKAGED_MODELS.get(name).memory_gb, "loading in float32")
        try:
            model, tokenizer = _from_folder(folder, dtype, device, None)
        except (OSError, ValueError, RuntimeError, SafetensorError) as err:
            log.warning("model cache %s is unreadable (%s); rebuilding it", folder, err)
            shutil.rmtree(folder, ignore_errors=True)
            folder, resolved = _packaged_model(name)
            model, tokenizer = _from_folder(folder, dtype, device, None)
        return LanguageModel(name, resolved, model, tokenizer, PACKAGED_MODELS.get(name).chat)
    if Path(name).expanduser().is_dir():
        folder = Path(name).expanduser().resolve()
        model, tokenizer = _from_folder(folder, dtype, device, None)
        return LanguageModel(name, str(folder), model, tokenizer, tokenizer.chat_template is not None)
    if "/" not in name:
        raise UnknownNameError("model", name, PACKAGED_MODELS.names() + ["<local folder>", "<hub id org/name>"])
    try:
        model, tokenizer = _from_folder(name, dtype, device, revision)
    except OSError as err:
        raise UnknownNameError(
            "model", name, PACKAGED_MODELS.names() + [f"<hub id: not loadable here: {str(err).splitlines()[0]}>"]
        ) from None
    commit = getattr(model.config, "_commit_hash", None)
    return LanguageModel(name, commit or revision or "main", model, tokenizer, tokenizer.chat_template is not None)
