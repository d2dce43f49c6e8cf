"""lcg.embedding.catalog: which model is the default, and which cached model is chosen.

The default (what `lcg models pull` with no name fetches, and what `auto` prefers in the cache)
is the int8 variant of all-MiniLM-L6-v2 (5 ms per text); the float32 model stays in
the catalog by name, and a cache holding only it still serves it."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from lcg.embedding import quantize
from lcg.embedding.catalog import CATALOG, DEFAULT_MODEL, cached_model_dir, pull
from lcg.errors import ConfigError

FP32 = "all-MiniLM-L6-v2"
INT8 = "all-MiniLM-L6-v2-int8"


def _cache(root: Path, *names: str) -> Path:
    for name in names:
        (root / name).mkdir(parents=True)
        (root / name / "model.onnx").write_bytes(b"a model")
    return root


def test_the_default_is_the_int8_variant_and_float32_stays_by_name() -> None:
    assert DEFAULT_MODEL == INT8
    assert CATALOG[INT8].base == FP32 and CATALOG[INT8].derive == "int8"
    assert FP32 in CATALOG and CATALOG[FP32].derive is None


def test_the_cache_prefers_the_default_then_whatever_is_cached(tmp_path: Path) -> None:
    both = _cache(tmp_path / "both", FP32, INT8)
    assert cached_model_dir(both) == both / INT8
    assert cached_model_dir(both, FP32) == both / FP32
    # A user who pulled float32 before keeps it: no model is swapped under a workspace.
    only_fp32 = _cache(tmp_path / "fp32", FP32)
    assert cached_model_dir(only_fp32) == only_fp32 / FP32
    assert cached_model_dir(only_fp32, INT8) is None


def test_pulling_the_default_without_onnx_fails_before_downloading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        return None if name == "onnx" else real(name, *args)

    monkeypatch.setattr(quantize.importlib.util, "find_spec", find_spec)
    # Nothing listens on the mirror: a download attempt would be a ModelFetchError instead.
    with pytest.raises(ConfigError, match=r"lcg\[embeddings\]"):
        pull(DEFAULT_MODEL, tmp_path / "models", mirror="http://127.0.0.1:9/models")
    assert not (tmp_path / "models").exists() or not any((tmp_path / "models").iterdir())
