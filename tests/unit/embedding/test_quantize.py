"""lcg.embedding.quantize without the `onnx` package: a clear error naming the extra, and the
model directory left as it was."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from lcg.embedding import quantize
from lcg.errors import ConfigError


def test_quantising_without_onnx_names_the_extra_and_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "model.onnx").write_bytes(b"float32 model")
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        return None if name == "onnx" else real(name, *args)

    monkeypatch.setattr(quantize.importlib.util, "find_spec", find_spec)
    with pytest.raises(ConfigError, match=r"lcg\[embeddings\]"):
        quantize.quantize_int8(tmp_path)
    assert (tmp_path / "model.onnx").read_bytes() == b"float32 model"
    assert [p.name for p in tmp_path.iterdir()] == ["model.onnx"]


def test_a_directory_without_a_model_is_refused(tmp_path: Path) -> None:
    if importlib.util.find_spec("onnx") is None:
        pytest.skip("checked after the onnx check; needs onnx installed")
    with pytest.raises(ConfigError, match=r"holds no model\.onnx"):
        quantize.quantize_int8(tmp_path)
