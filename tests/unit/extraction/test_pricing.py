"""Cost estimates from the built-in price table and its JSON override."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lcg.errors import ConfigError
from lcg.extraction.llm import LlmUsage
from lcg.extraction.pricing import DEFAULT_PRICES, estimate_usd, load_price_table


def test_anthropic_models_are_priced_per_million_tokens() -> None:
    usage = LlmUsage(input_tokens=1_000_000, output_tokens=1_000_000)
    assert estimate_usd("claude-sonnet-5-5", usage) == pytest.approx(12.0)
    assert estimate_usd("claude-opus-5-5", usage) == pytest.approx(24.0)
    assert estimate_usd("claude-haiku-4-5", usage) == pytest.approx(6.0)


def test_cache_tokens_use_their_own_rates() -> None:
    usage = LlmUsage(cache_read_tokens=1_000_000, cache_write_tokens=1_000_000)
    assert estimate_usd("claude-sonnet-5-5", usage) == pytest.approx(0.10 + 2.50)
    # Standard multipliers where the page gives none: 0.1x and 1.25x input.
    assert estimate_usd("claude-sonnet-4-6", usage) == pytest.approx(0.3 + 3.75)


def test_snapshots_and_context_tags_price_like_their_alias() -> None:
    usage = LlmUsage(input_tokens=2_000_000)
    assert estimate_usd("claude-sonnet-4-5-20250929", usage) == pytest.approx(6.0)
    assert estimate_usd("claude-sonnet-5-5[1m]", usage) == pytest.approx(4.0)
    # A longer id is a different model, not a variant: opus-5-5 is not priced as opus-5.
    assert DEFAULT_PRICES["claude-opus-5-5"] != DEFAULT_PRICES["claude-opus-5"]
    assert estimate_usd("claude-opus-5-5", usage) == pytest.approx(8.0)
    assert estimate_usd("claude-opus-4-7", usage) is None


def test_local_models_have_no_price() -> None:
    assert estimate_usd("local", LlmUsage(input_tokens=10)) is None
    assert estimate_usd("qwen2.5-7b-instruct", LlmUsage(input_tokens=10)) is None


def test_a_json_file_extends_and_overrides_the_table(tmp_path: Path) -> None:
    path = tmp_path / "prices.json"
    path.write_text(
        json.dumps(
            {
                "local": {"input": 0.5, "output": 1.0},
                "claude-sonnet-5-5": {"input": 1.0, "output": 1.0, "cache_read": 0.0},
            }
        )
    )
    table = load_price_table(path)
    usage = LlmUsage(input_tokens=1_000_000, output_tokens=1_000_000)
    assert estimate_usd("local", usage, table) == pytest.approx(1.5)
    assert estimate_usd("claude-sonnet-5-5", usage, table) == pytest.approx(2.0)
    assert estimate_usd("claude-haiku-4-5", usage, table) == pytest.approx(6.0)


@pytest.mark.parametrize(
    "content", ["not json", "[1]", '{"m": {"input": 1}}', '{"m": {"input": "x", "output": 1}}']
)
def test_a_bad_price_file_is_a_config_error_naming_the_variable(
    tmp_path: Path, content: str
) -> None:
    path = tmp_path / "prices.json"
    path.write_text(content)
    with pytest.raises(ConfigError, match="LIMINIS_LLM_COST_TABLE_PATH"):
        load_price_table(path)


def test_a_missing_price_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_price_table(tmp_path / "absent.json")
