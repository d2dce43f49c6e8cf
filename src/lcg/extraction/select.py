"""Which language model extraction uses: resolved lazily, once per engine (docs/api.md §startup, the
extraction model).

First match wins:

    LCG_REPLAY_LLM cassette > --extractor-uds > --extractor-http > ANTHROPIC_API_KEY
        > LCG_EXTRACTION_URL > unconfigured

Nothing is validated or contacted at startup: the service starts and serves reads whatever is
configured, and the first extraction call fails with a `ConfigError` naming what to set (no
provider, a malformed URL, a missing socket, both cassette modes). `LCG_RECORD_LLM` wraps the
chosen provider in a recorder. Every client is wrapped as
`Instrumented(RetryOnTruncation(provider))`, so telemetry and the truncation retry apply to all.

Callers: `llm_client(engine)`; tests and benchmarks give one to `open_engine(settings, llm=...)`;
`knowledge_status` shows `describe_llm(engine)`; an episode given no reference time is dated by
`default_reference_time(engine, ...)`, which a cassette records and replays.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from lcg.config import Settings
from lcg.errors import ConfigError
from lcg.extraction.cassette import CassetteRecorder, CassetteReplayer, clock_key
from lcg.extraction.llm import LlmClient
from lcg.extraction.pricing import ModelPrice, load_price_table
from lcg.extraction.providers.anthropic_models import parse_model_spec
from lcg.extraction.providers.openai_compat import OpenAICompatProvider
from lcg.extraction.wrappers import Instrumented, RetryOnTruncation
from lcg.telemetry import EventSink
from lcg.timeutil import now

__all__ = [
    "UNCONFIGURED_MESSAGE",
    "LlmPlan",
    "LlmSlot",
    "build_llm_client",
    "default_reference_time",
    "describe_llm",
    "llm_client",
    "plan_llm",
    "wrap_client",
]

# Every way out, the offline one included: the same text wherever "no provider" is reported.
UNCONFIGURED_MESSAGE = (
    "no extraction provider is configured: set ANTHROPIC_API_KEY or LCG_EXTRACTION_URL, "
    "start with --extractor-http URL or --extractor-uds PATH, replay a cassette with "
    "LCG_REPLAY_LLM, or extract offline without a model with LCG_EXTRACTOR=heuristic"
)


class _PartsLike(Protocol):
    @property
    def llm(self) -> LlmSlot: ...


class _EngineLike(Protocol):
    """What of `lcg.engine.Engine` this module reads (the kernel imports this module)."""

    settings: Settings

    @property
    def parts(self) -> _PartsLike: ...


@dataclass(frozen=True)
class LlmPlan:
    """The provider the settings select, before anything is built."""

    source: str  # the setting that chose it, e.g. "ANTHROPIC_API_KEY", "--extractor-http"
    provider: str  # "replay", "openai-compat" or "anthropic"
    model: str
    endpoint: str | None  # URL, "unix:<path>", cassette path; None for the Anthropic default
    recording: str | None  # LCG_RECORD_LLM


def _check_url(url: str, source: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{source} must be an http:// or https:// URL with a host, got '{url}'")
    return url


def plan_llm(settings: Settings) -> LlmPlan | None:
    """The provider `settings` select, or None when none is configured.

    Raises:
        ConfigError: both cassette modes, a malformed URL or model spec, a missing socket.
    """
    s = settings
    if s.replay_llm and s.record_llm:
        raise ConfigError("LCG_RECORD_LLM and LCG_REPLAY_LLM are mutually exclusive; set one")
    if s.replay_llm:
        return LlmPlan("LCG_REPLAY_LLM", "replay", "cassette", s.replay_llm, None)
    model = s.extraction_model
    if s.extractor_uds:
        if not Path(s.extractor_uds).exists():
            raise ConfigError(f"--extractor-uds: socket '{s.extractor_uds}' does not exist")
        endpoint = f"unix:{s.extractor_uds}"
        return LlmPlan("--extractor-uds", "openai-compat", model, endpoint, s.record_llm)
    if s.extractor_http:
        url = _check_url(s.extractor_http, "--extractor-http")
        return LlmPlan("--extractor-http", "openai-compat", model, url, s.record_llm)
    if s.anthropic_api_key:
        try:
            models = parse_model_spec(s.extraction_llm)
        except ValueError as exc:
            raise ConfigError(f"invalid LCG_EXTRACTION_LLM={s.extraction_llm!r}: {exc}") from exc
        return LlmPlan("ANTHROPIC_API_KEY", "anthropic", ":".join(models), None, s.record_llm)
    if s.extraction_url:
        url = _check_url(s.extraction_url, "LCG_EXTRACTION_URL")
        return LlmPlan("LCG_EXTRACTION_URL", "openai-compat", model, url, s.record_llm)
    return None


def build_llm_client(settings: Settings, events: EventSink) -> LlmClient:
    """Build the configured client, wrapped for recording, truncation retry and telemetry.

    Raises:
        ConfigError: nothing is configured, or the configuration is invalid.
    """
    plan = plan_llm(settings)
    if plan is None:
        raise ConfigError(UNCONFIGURED_MESSAGE)
    prices = load_price_table(settings.llm_cost_table_path)
    timeout_s = settings.extraction_timeout_ms / 1000
    client: LlmClient
    if plan.provider == "replay":
        client = CassetteReplayer(plan.endpoint or "")
    elif plan.provider == "anthropic":
        # Imported here: the SDK costs a second of start-up that commands not extracting skip.
        from lcg.extraction.providers.anthropic_provider import AnthropicProvider

        client = AnthropicProvider(
            api_key=settings.anthropic_api_key or "",
            models=tuple(plan.model.split(":")),
            timeout_s=timeout_s,
            events=events,
        )
    elif plan.source == "--extractor-uds":
        client = OpenAICompatProvider(
            uds_path=settings.extractor_uds, model=plan.model, timeout_s=timeout_s
        )
    else:
        client = OpenAICompatProvider(base_url=plan.endpoint, model=plan.model, timeout_s=timeout_s)
    if plan.recording:
        client = CassetteRecorder(client, plan.recording)
    return wrap_client(client, settings, events, prices)


def wrap_client(
    client: LlmClient,
    settings: Settings,
    events: EventSink,
    prices: Mapping[str, ModelPrice] | None = None,
) -> LlmClient:
    """`client` with the truncation retry and the per-call telemetry every built client has.

    Raises:
        ConfigError: `prices` is not given and `LIMINIS_LLM_COST_TABLE_PATH` cannot be read.
    """
    if prices is None:
        prices = load_price_table(settings.llm_cost_table_path)
    retrying = RetryOnTruncation(client, settings.extraction_max_tokens_ceiling, events)
    return Instrumented(retrying, events, prices)


@dataclass(frozen=True)
class _Resolved:
    client: LlmClient | None
    error: ConfigError | None
    injected: bool = False


class LlmSlot:
    """An engine's language model (`Engine.parts.llm`): the one `open_engine` was given, or the
    one the settings select, built on first use and then kept (a configuration error too)."""

    def __init__(self, settings: Settings, events: EventSink, client: LlmClient | None = None):
        self._settings = settings
        self._events = events
        self._resolved = _Resolved(client, None, injected=True) if client is not None else None

    def resolve(self) -> _Resolved:
        found = self._resolved
        if found is None:
            try:
                found = _Resolved(build_llm_client(self._settings, self._events), None)
            except ConfigError as exc:
                found = _Resolved(None, exc)
            self._resolved = found
        return found


def _resolve(engine: _EngineLike) -> _Resolved:
    return engine.parts.llm.resolve()


def llm_client(engine: _EngineLike) -> LlmClient:
    """The engine's language model (built on first use, then cached).

    Raises:
        ConfigError: no provider is configured, or its configuration is invalid.
    """
    resolved = _resolve(engine)
    if resolved.client is None:
        assert resolved.error is not None
        raise resolved.error
    return resolved.client


def default_reference_time(engine: _EngineLike, group_id: str, name: str, body: str) -> datetime:
    """The reference time of an episode given none: now, or the recorded one when replaying.

    A cassette being recorded notes the time (its prompts carry it); a cassette being replayed
    hands the recorded time back, so the replayed prompts match (`lcg.extraction.cassette`).
    """
    current = now()
    settings = engine.settings
    if not (settings.record_llm or settings.replay_llm):
        return current
    client: object = _resolve(engine).client
    while client is not None:
        if isinstance(client, CassetteRecorder | CassetteReplayer):
            return client.default_reference_time(clock_key(group_id, name, body), current)
        client = getattr(client, "inner", None)
    return current


def describe_llm(engine: _EngineLike) -> dict[str, Any]:
    """What extraction would use, for `knowledge_status`; never contacts a provider.

    Keys: configured, provider, model, source, endpoint, recording, error.
    """
    resolved = _resolve(engine)
    if resolved.injected and resolved.client is not None:
        provider, _, model = resolved.client.name.partition(":")
        return {
            "configured": True,
            "provider": provider,
            "model": model,
            "source": "injected",
            "endpoint": None,
            "recording": None,
            "error": None,
        }
    if resolved.error is not None:
        return {
            "configured": False,
            "provider": None,
            "model": None,
            "source": None,
            "endpoint": None,
            "recording": None,
            "error": resolved.error.message,
        }
    plan = plan_llm(engine.settings)
    assert plan is not None
    return {
        "configured": True,
        "provider": plan.provider,
        "model": plan.model,
        "source": plan.source,
        "endpoint": plan.endpoint,
        "recording": plan.recording,
        "error": None,
    }
