"""Dynamic int8 quantisation of an ONNX model directory: the catalog's `-int8` variants.

`quantize_int8(directory)` rewrites the directory's model file with ONNX Runtime's dynamic
quantisation: the weights of every MatMul/Gemm stored as int8, one scale per output channel,
activations quantised per batch at run time. Measured on all-MiniLM-L6-v2 with the Apollo
entity and fact texts (bench/embeddings.py, shared 2-core AVX2 machine): CPU time per text
1.7x lower than float32; cosine to the float32 vectors min 0.984, mean 0.992 (one scale per
tensor instead: min 0.927, mean 0.966, no faster). Pre-fusing the graph with the transformers
optimizer gained nothing over ONNX Runtime's own ORT_ENABLE_ALL, and quantising it fails.

Quantising needs the `onnx` package (part of `lcg[embeddings]`), used only here, at pull time;
running the quantised model needs only onnxruntime.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from pathlib import Path

from lcg.embedding.onnx_provider import find_model_file
from lcg.errors import ConfigError

__all__ = ["QUANTIZATION", "quantize_int8", "require_quantizer"]

QUANTIZATION = "dynamic int8, per-channel weights"


class _NoPreprocessingAdvice(logging.Filter):
    """Drops the quantiser's advice, logged on the root logger at every call, to pre-process
    the model first (its shape inference and optimisation: nothing here gained from it)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "pre-processing before quantization" not in record.getMessage()


def require_quantizer() -> None:
    """Raises ConfigError, naming the extra, when the `onnx` package is missing."""
    if importlib.util.find_spec("onnx") is None:
        raise ConfigError(
            "making an int8 model needs the onnx package: pip install 'lcg[embeddings]'"
        )


def quantize_int8(directory: Path) -> None:
    """Replace the model file of `directory` by its int8 quantisation (atomically).

    Raises:
        ConfigError: the `onnx` package is missing, the directory holds no model, or the model
            cannot be quantised.
    """
    require_quantizer()
    model_file = find_model_file(directory)
    if model_file is None:
        raise ConfigError(f"{directory} holds no model.onnx (nor onnx/model.onnx)")
    from onnxruntime.quantization import QuantType, quantize_dynamic

    partial = model_file.with_name(".int8-" + model_file.name)
    quiet = _NoPreprocessingAdvice()
    logging.getLogger().addFilter(quiet)
    try:
        quantize_dynamic(
            str(model_file), str(partial), weight_type=QuantType.QInt8, per_channel=True
        )
    except Exception as exc:  # onnx / onnxruntime raise their own exception types
        partial.unlink(missing_ok=True)
        raise ConfigError(f"could not quantise {model_file}: {exc}") from exc
    finally:
        logging.getLogger().removeFilter(quiet)
    os.replace(partial, model_file)
