"""Anthropic model names: the default and the `primary:fallback` spec.

Kept apart from the provider so that choosing a provider (`lcg.extraction.select`) does not
import the Anthropic SDK, which costs about a second of start-up for every command.
"""

from __future__ import annotations

__all__ = ["DEFAULT_ANTHROPIC_MODEL", "parse_model_spec"]

DEFAULT_ANTHROPIC_MODEL = "claude-sonnet-5-5"


def parse_model_spec(spec: str | None) -> tuple[str, ...]:
    """`primary` or `primary:fallback` -> the models in the order to try them."""
    if spec is None or not spec.strip():
        return (DEFAULT_ANTHROPIC_MODEL,)
    models = tuple(part.strip() for part in spec.split(":"))
    if len(models) > 2 or not all(models):
        raise ValueError("must be 'model' or 'primary:fallback'")
    return models
