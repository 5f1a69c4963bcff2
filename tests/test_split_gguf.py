"""A GGUF split over registry packages (the capable model's form): assembled only from the pinned parts, verified,
its header checked; anything else refused in one line naming the package, with nothing left in the cache."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from recoe_causaldiag import capable_model
from recoe_causaldiag.cli import main
from recoe_causaldiag.split_gguf import GGUFHeader, GGUFPart, ModelPackageError, SplitGGUF

VERSION = "0.2.0"
TOKENS = [f"t{i}" for i in range(32)]


def _tiny_gguf(path: Path) -> None:
    from gguf import GGUFWriter

    writer = GGUFWriter(str(path), "qwen2")
    writer.add_block_count(2)
    writer.add_embedding_length(8)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(TOKENS)
    writer.add_tensor("token_embd.weight", np.arange(len(TOKENS) * 8, dtype=np.float32).reshape(len(TOKENS), 8))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def _install_part(site: Path, k: int, data: bytes, version: str = VERSION) -> None:
    package = site / f"fakegguf_part{k}"
    (package / "data").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "data" / f"part{k:02d}.bin").write_bytes(data)
    info = site / f"fakegguf_part{k}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: fakegguf-part{k}\nVersion: {version}\n")


@pytest.fixture()
def split(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[SplitGGUF, Path, list[bytes]]:
    """A real (tiny) GGUF split over three installed packages, pinned as the capable model is, and its site
    folder."""
    whole = tmp_path / "tiny.gguf"
    _tiny_gguf(whole)
    data = whole.read_bytes()
    cut = len(data) // 3
    slices = [data[:cut], data[cut : 2 * cut], data[2 * cut :]]
    site = tmp_path / "site"
    for k, piece in enumerate(slices, start=1):
        _install_part(site, k, piece)
    monkeypatch.syspath_prepend(str(site))
    parts = tuple(
        GGUFPart(f"fakegguf-part{k}", f"data/part{k:02d}.bin", len(piece), hashlib.sha256(piece).hexdigest())
        for k, piece in enumerate(slices, start=1)
    )
    pinned = SplitGGUF(
        "tiny.gguf",
        VERSION,
        parts,
        hashlib.sha256(data).hexdigest(),
        GGUFHeader("qwen2", 2, 8, len(TOKENS)),
        "make setup-large",
    )
    return pinned, site, slices


def _left(folder: Path) -> list[str]:
    """What a refused assembly left in the cache folder (its lock file aside)."""
    return sorted(p.name for p in folder.iterdir() if not p.name.endswith(".lock")) if folder.exists() else []


def test_the_pinned_parts_assemble_into_the_pinned_file_once(split, tmp_path):
    pinned, _, slices = split
    cache = tmp_path / "cache"
    assembled = pinned.assemble(cache)
    assert assembled.read_bytes() == b"".join(slices)
    assert GGUFHeader.read(assembled) == pinned.header
    written = assembled.stat().st_mtime_ns
    assert pinned.assemble(cache) == assembled and assembled.stat().st_mtime_ns == written
    assert pinned.assemble(cache, verify=True).stat().st_mtime_ns == written
    assert pinned.release() == "fakegguf-part1…3==0.2.0"
    assert pinned.requirements() == tuple(f"fakegguf-part{k}==0.2.0" for k in (1, 2, 3))


def test_an_assembled_file_corrupted_in_the_cache_is_rewritten_when_verified(split, tmp_path):
    pinned, _, slices = split
    assembled = pinned.assemble(tmp_path / "cache")
    corrupted = bytearray(assembled.read_bytes())
    corrupted[-1] ^= 0xFF
    assembled.write_bytes(bytes(corrupted))
    assert pinned.assemble(tmp_path / "cache", verify=True).read_bytes() == b"".join(slices)


def test_a_missing_part_is_refused_naming_its_package(split, tmp_path):
    pinned, site, _ = split
    (site / "fakegguf_part2" / "__init__.py").unlink()
    for path in sorted((site / "fakegguf_part2").rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    (site / "fakegguf_part2").rmdir()
    with pytest.raises(ModelPackageError, match=r"fakegguf-part2 is not installed: pip .*fakegguf-part2==0\.2\.0"):
        pinned.assemble(tmp_path / "cache")
    assert _left(tmp_path / "cache") == []


def test_a_part_of_another_version_is_refused_naming_its_package(split, tmp_path):
    pinned, site, _ = split
    (site / "fakegguf_part3-0.2.0.dist-info").rename(site / "fakegguf_part3-0.3.0.dist-info")
    (site / "fakegguf_part3-0.3.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: fakegguf-part3\nVersion: 0.3.0\n"
    )
    with pytest.raises(ModelPackageError, match=r"fakegguf-part3 is version 0\.3\.0, not the pinned 0\.2\.0"):
        pinned.assemble(tmp_path / "cache")
    assert _left(tmp_path / "cache") == []


def test_a_part_with_other_bytes_is_refused_and_removes_what_was_assembled(split, tmp_path):
    pinned, site, slices = split
    cache = tmp_path / "cache"
    pinned.assemble(cache)
    tampered = bytearray(slices[1])
    tampered[0] ^= 0xFF
    (site / "fakegguf_part2" / "data" / "part02.bin").write_bytes(bytes(tampered))
    with pytest.raises(ModelPackageError, match=r"fakegguf-part2 holds other bytes than the pinned 0\.2\.0"):
        pinned.assemble(cache)
    assert _left(cache) == []


def test_a_file_whose_hash_differs_is_refused(split, tmp_path):
    pinned, _, _ = split
    with pytest.raises(ModelPackageError, match=r"tiny\.gguf assembled from fakegguf-part1…3==0\.2\.0 has sha256"):
        replace(pinned, sha256="0" * 64).assemble(tmp_path / "cache")
    assert _left(tmp_path / "cache") == []


def test_a_header_that_declares_another_model_is_refused(split, tmp_path):
    pinned, _, _ = split
    with pytest.raises(ModelPackageError, match=r"declares .*block_count=2.*not the expected .*block_count=28"):
        replace(pinned, header=GGUFHeader("qwen2", 28, 8, len(TOKENS))).assemble(tmp_path / "cache")
    assert _left(tmp_path / "cache") == []


def test_the_cli_refuses_a_missing_part_of_the_capable_model_in_one_line_exit_2(split, monkeypatch, capsys):
    pinned, _, _ = split
    missing = replace(pinned.parts[0], distribution="fakegguf-part9")
    monkeypatch.setattr(capable_model, "QWEN_CODER_GGUF", replace(pinned, parts=(missing, *pinned.parts[1:])))
    assert main(["prepare-model", capable_model.NAME]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "fakegguf-part9 is not installed" in err and "fakegguf-part9==0.2.0" in err
