"""What a language-model call costs: USD per million tokens, by model.

The built-in table holds Anthropic list prices as published on the model pages (November 2026):
input, output, cache read and 5-minute cache write. Where a page gives no cache rates, the
standard multipliers apply (reads 0.1x input, writes 1.25x input). Haiku 5.5 is priced in two
bands by prompt length; the table holds the lower band (prompts up to 100,000 tokens). Local
models cost nothing we can know, so they are absent and `estimate_usd` returns None for them.
`LIMINIS_LLM_COST_TABLE_PATH` names a JSON file whose entries replace or extend the table:

    {"my-model": {"input": 1.0, "output": 2.0, "cache_read": 0.1, "cache_write": 1.25}}

A model id matches a key exactly, or as the key plus a snapshot date (`-20250929`) or a
context-size tag (`[1m]`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from lcg.errors import ConfigError
from lcg.extraction.llm import LlmUsage

__all__ = ["DEFAULT_PRICES", "ModelPrice", "estimate_usd", "load_price_table"]


@dataclass(frozen=True)
class ModelPrice:
    """USD per million tokens."""

    input: float
    output: float
    cache_read: float = 0.0
    cache_write: float = 0.0


def _standard(input_price: float, output_price: float) -> ModelPrice:
    return ModelPrice(input_price, output_price, input_price * 0.1, input_price * 1.25)


DEFAULT_PRICES: Mapping[str, ModelPrice] = {
    "claude-fable-5-1": _standard(10.0, 50.0),
    "claude-fable-5": _standard(10.0, 50.0),
    "claude-opus-5-5": ModelPrice(4.0, 20.0, 0.20, 5.0),
    "claude-opus-5": ModelPrice(5.0, 25.0, 0.50, 6.25),
    "claude-opus-4-8": _standard(5.0, 25.0),
    "claude-opus-4-5": ModelPrice(5.0, 25.0, 0.50, 6.25),
    "claude-opus-4-1": _standard(15.0, 75.0),
    "claude-sonnet-5-5": ModelPrice(2.0, 10.0, 0.10, 2.50),
    "claude-sonnet-5": ModelPrice(2.0, 10.0, 0.20, 2.50),
    "claude-sonnet-4-6": _standard(3.0, 15.0),
    "claude-sonnet-4-5": _standard(3.0, 15.0),
    "claude-haiku-5-5": ModelPrice(0.10, 0.50, 0.01, 0.125),
    "claude-haiku-4-5": _standard(1.0, 5.0),
}
_VARIANT = re.compile(r"(-\d{8}|\[[^\]]*\])")


def load_price_table(path: str | Path | None = None) -> dict[str, ModelPrice]:
    """The built-in table, with the entries of the JSON file at `path` on top.

    Raises:
        ConfigError: the file cannot be read, is not JSON, or an entry lacks input/output prices.
    """
    table = dict(DEFAULT_PRICES)
    if path is None:
        return table
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"LIMINIS_LLM_COST_TABLE_PATH: cannot read {path}: {exc}") from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"LIMINIS_LLM_COST_TABLE_PATH: {path} must hold a JSON object")
    for model, entry in raw.items():
        try:
            table[str(model)] = ModelPrice(
                input=float(entry["input"]),
                output=float(entry["output"]),
                cache_read=float(entry.get("cache_read", 0.0)),
                cache_write=float(entry.get("cache_write", 0.0)),
            )
        except (TypeError, KeyError, ValueError, AttributeError) as exc:
            raise ConfigError(
                f"LIMINIS_LLM_COST_TABLE_PATH: entry {model!r} in {path} needs numeric "
                f"'input' and 'output' prices ({exc!r})"
            ) from exc
    return table


def _price_for(model: str, table: Mapping[str, ModelPrice]) -> ModelPrice | None:
    if model in table:
        return table[model]
    for key, price in table.items():
        if model.startswith(key) and _VARIANT.fullmatch(model[len(key) :]):
            return price
    return None


def estimate_usd(
    model: str, usage: LlmUsage, table: Mapping[str, ModelPrice] | None = None
) -> float | None:
    """Estimated cost of `usage` on `model`, or None when the model has no known price."""
    price = _price_for(model, DEFAULT_PRICES if table is None else table)
    if price is None:
        return None
    return (
        usage.input_tokens * price.input
        + usage.output_tokens * price.output
        + usage.cache_read_tokens * price.cache_read
        + usage.cache_write_tokens * price.cache_write
    ) / 1_000_000
