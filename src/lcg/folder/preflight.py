"""Before a long ingest: one real request to the extractor and one to the embedder.

An unreachable or misconfigured local server must be reported by name within seconds, not after
an hour of failed chunks. The probes use this process's settings (the environment `lcg ingest`
runs in); a cassette being replayed is checked by loading it (a probe would miss it), and a
cassette being recorded is bypassed (the probe must not end up in it).
"""

from __future__ import annotations

import dataclasses

import anyio

from lcg.config import Settings
from lcg.embedding.base import Embedder
from lcg.errors import ConfigError, LcgError
from lcg.extraction.cassette import load_cassette
from lcg.extraction.llm import LlmRequest
from lcg.extraction.select import UNCONFIGURED_MESSAGE, build_llm_client, plan_llm
from lcg.telemetry import NullSink

__all__ = ["PreflightError", "check_embedder", "check_extractor"]

PROBE_TIMEOUT_S = 8.0

_PROBE = LlmRequest(
    stage="preflight",
    system='Reply with the JSON object {"ok": true} and nothing else.',
    user="ping",
    schema={"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]},
    schema_name="preflight",
    max_tokens=16,
)


class PreflightError(ConfigError):
    """The extractor or the embedder did not answer a probe."""


async def check_extractor(settings: Settings) -> str:
    """Probe the configured extractor; returns a description of what answered.

    Raises:
        PreflightError: nothing is configured, or the extractor failed or timed out.
    """
    if settings.extractor == "heuristic":
        return "heuristic extractor (offline, no model)"
    plan = plan_llm(settings)
    if plan is None:
        raise PreflightError(f"extractor: {UNCONFIGURED_MESSAGE}")
    where = f"{plan.provider} extractor {plan.endpoint or plan.model} (from {plan.source})"
    if plan.provider == "replay":
        try:
            records = load_cassette(plan.endpoint or "")
        except LcgError as exc:
            raise PreflightError(f"{where}: {exc.message}") from exc
        return f"{where}: {len(records)} recorded answers"
    client = build_llm_client(dataclasses.replace(settings, record_llm=None), NullSink())
    try:
        with anyio.fail_after(PROBE_TIMEOUT_S):
            response = await client.complete(_PROBE)
    except TimeoutError as exc:
        raise PreflightError(f"{where} did not answer within {PROBE_TIMEOUT_S:g} s") from exc
    except LcgError as exc:
        raise PreflightError(f"{where} failed: {exc.message}") from exc
    return f"{where}: answered ({response.model})"


async def check_embedder(embedder: Embedder) -> str:
    """Embed one text with `embedder`.

    Raises:
        PreflightError: the embedder failed or timed out.
    """
    name = embedder.identity.model
    try:
        with anyio.fail_after(PROBE_TIMEOUT_S):
            vectors = await anyio.to_thread.run_sync(
                embedder.embed, ["lcg preflight"], abandon_on_cancel=True
            )
    except TimeoutError as exc:
        raise PreflightError(
            f"embedder {name} did not answer within {PROBE_TIMEOUT_S:g} s"
        ) from exc
    except LcgError as exc:
        raise PreflightError(f"embedder {name} failed: {exc.message}") from exc
    return f"embedder {name}: {vectors.shape[1]} dimensions"
