"""Turning `lcg eval` options into clients, and the guards every run (dry or real) enforces.

Guards: backend names are unique and the reference is one of them; no two backends replay the
same or a byte-identical cassette (that would compare a model with a copy of itself and report
a perfect score); every cassette parses and has no duplicate keys (a duplicate makes replay
order-dependent); a cassette being recorded is not also replayed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lcg.config import Settings
from lcg.errors import ConfigError, InvalidRequestError
from lcg.evals.backends import BackendSpec
from lcg.extraction.cassette import (
    CassetteRecorder,
    CassetteReplayer,
    DuplicateCassetteKeyError,
    duplicate_keys,
    load_cassette,
)
from lcg.extraction.llm import LlmClient
from lcg.extraction.providers.anthropic_models import DEFAULT_ANTHROPIC_MODEL
from lcg.extraction.providers.openai_compat import OpenAICompatProvider
from lcg.extraction.wrappers import RetryOnTruncation
from lcg.telemetry import EventSink

__all__ = ["CassetteInfo", "build_client", "check_plan", "describe_plan"]


@dataclass(frozen=True)
class CassetteInfo:
    path: Path
    records: int
    sha256: str


def _inspect_cassette(path: Path) -> CassetteInfo:
    records = load_cassette(path)  # raises CassetteError naming a corrupt line
    duplicates = duplicate_keys(records)
    if duplicates:
        raise DuplicateCassetteKeyError(path, duplicates)
    return CassetteInfo(path, len(records), hashlib.sha256(path.read_bytes()).hexdigest())


def check_plan(backends: Sequence[BackendSpec], reference: str) -> dict[str, CassetteInfo]:
    """Enforce the guards; returns what each replayed cassette holds, by backend name.

    Raises:
        InvalidRequestError: duplicate names, unknown reference, one cassette used twice.
        CassetteError / DuplicateCassetteKeyError: a cassette is corrupt or has duplicate keys.
    """
    names = [b.name for b in backends]
    if len(set(names)) != len(names):
        raise InvalidRequestError(f"backend names must be unique: {names}", "backend")
    if reference not in names:
        raise InvalidRequestError(
            f"--reference {reference!r} is not one of the backends ({', '.join(names)})",
            "reference",
        )
    cassettes: dict[str, CassetteInfo] = {}
    by_path: dict[Path, str] = {}
    by_hash: dict[str, str] = {}
    recorded = {b.record_to.resolve() for b in backends if b.record_to is not None}
    for b in backends:
        path = b.cassette_path
        if path is None:
            continue
        resolved = path.resolve()
        if resolved in by_path:
            raise InvalidRequestError(
                f"backends {by_path[resolved]} and {b.name} replay the same cassette {path}",
                "backend",
            )
        if resolved in recorded:
            raise InvalidRequestError(f"cassette {path} is both replayed and recorded", "backend")
        info = _inspect_cassette(path)
        if info.sha256 in by_hash:
            raise InvalidRequestError(
                f"backends {by_hash[info.sha256]} and {b.name} replay byte-identical "
                f"cassettes ({path}): that compares a model with a copy of itself",
                "backend",
            )
        by_path[resolved] = b.name
        by_hash[info.sha256] = b.name
        cassettes[b.name] = info
    return cassettes


def describe_plan(
    backends: Sequence[BackendSpec],
    cassettes: dict[str, CassetteInfo],
    articles: int,
    calls: int,
    *,
    judge: str | None,
    judge_mode: str,
) -> dict[str, Any]:
    """What a run would do, without doing any of it (`calls`: extraction calls per backend)."""
    rows = []
    live_calls = 0
    for b in backends:
        replay = b.replay
        if not replay:
            live_calls += calls
        rows.append(
            {
                "name": b.name,
                "spec": b.describe(),
                "mode": "replay" if replay else "live",
                "cassette_records": cassettes[b.name].records if replay else None,
                "record_to": str(b.record_to) if b.record_to else None,
                "calls": calls,
            }
        )
    n = len(backends)
    judge_calls = 0
    if judge is not None:
        if judge_mode in ("reference", "both"):
            judge_calls += articles * 2 * (n - 1)  # entities and facts alignment per backend
        if judge_mode in ("pairwise", "both"):
            judge_calls += articles * 2 * (n * (n - 1) // 2)  # both slot orders per pair
    return {
        "dry_run": True,
        "articles": articles,
        "backends": rows,
        "live_llm_calls": live_calls,
        "judge": judge,
        "judge_mode": judge_mode if judge else None,
        "judge_calls_at_most": judge_calls,
        "note": "judge calls already in the cache are not repeated",
    }


def build_client(spec: BackendSpec, settings: Settings, events: EventSink) -> LlmClient:
    """The LLM client a backend spec names, with lcg's own truncation retry (and recording).

    Raises:
        ConfigError: `anthropic` without ANTHROPIC_API_KEY.
    """
    timeout_s = settings.extraction_timeout_ms / 1000
    client: LlmClient
    if spec.kind == "cassette":
        client = CassetteReplayer(spec.options["path"])
    elif spec.kind == "anthropic":
        if not settings.anthropic_api_key:
            raise ConfigError(f"backend {spec.name}: anthropic needs ANTHROPIC_API_KEY")
        # Imported here: the SDK costs a second of start-up that replay-only runs skip.
        from lcg.extraction.providers.anthropic_provider import AnthropicProvider

        client = AnthropicProvider(
            api_key=settings.anthropic_api_key,
            models=(spec.options.get("model", DEFAULT_ANTHROPIC_MODEL),),
            timeout_s=timeout_s,
            events=events,
        )
    elif spec.kind == "oai-http":
        client = OpenAICompatProvider(
            base_url=spec.options["url"],
            model=spec.options.get("model", "local"),
            timeout_s=timeout_s,
        )
    else:
        client = OpenAICompatProvider(
            uds_path=spec.options["path"],
            model=spec.options.get("model", "local"),
            timeout_s=timeout_s,
        )
    if spec.record_to is not None:
        client = CassetteRecorder(client, spec.record_to)
    return RetryOnTruncation(client, settings.extraction_max_tokens_ceiling, events)
