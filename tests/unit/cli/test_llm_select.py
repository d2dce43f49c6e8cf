"""Which extractor the settings select (docs/api.md §startup, the extraction model), lazily, once per engine."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import click  # noqa: TID251  the flag decorators are tested on a probe command
import pytest
from click.testing import CliRunner  # noqa: TID251  CLI tests drive click's own runner

from lcg import Engine, open_engine
from lcg.cli.compat import extractor_overrides, parse_args
from lcg.cli.endpoint_options import extractor_options
from lcg.cli.endpoint_options import extractor_overrides as click_overrides
from lcg.config import Settings, load_settings
from lcg.errors import ConfigError
from lcg.extraction.llm import LlmRequest, LlmResponse
from lcg.extraction.select import (
    build_llm_client,
    describe_llm,
    llm_client,
    plan_llm,
    wrap_client,
)
from lcg.telemetry import ListSink


@pytest.fixture
def uds(tmp_path: Path) -> Iterator[str]:
    path = tmp_path / "llm.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    try:
        yield str(path)
    finally:
        sock.close()


def configure(settings: Settings, **values: Any) -> Settings:
    return replace(settings, **values)


def test_precedence_table(settings: Settings, uds: str, tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    cassette.write_text("")
    everything = {
        "replay_llm": str(cassette),
        "extractor_uds": uds,
        "extractor_http": "http://flag.example:8080",
        "anthropic_api_key": "test-key",
        "extraction_url": "http://env.example:9000/v1",
    }
    expected = [
        ("replay_llm", "LCG_REPLAY_LLM", "replay", str(cassette)),
        ("extractor_uds", "--extractor-uds", "openai-compat", f"unix:{uds}"),
        ("extractor_http", "--extractor-http", "openai-compat", "http://flag.example:8080"),
        ("anthropic_api_key", "ANTHROPIC_API_KEY", "anthropic", None),
        ("extraction_url", "LCG_EXTRACTION_URL", "openai-compat", "http://env.example:9000/v1"),
    ]
    values = dict(everything)
    for name, source, provider, endpoint in expected:
        plan = plan_llm(configure(settings, **values))
        assert plan is not None
        assert (plan.source, plan.provider, plan.endpoint) == (source, provider, endpoint)
        build_llm_client(configure(settings, **values), ListSink())  # builds without a network
        del values[name]
    assert plan_llm(configure(settings, **values)) is None


def test_models_per_provider(settings: Settings) -> None:
    local = plan_llm(configure(settings, extraction_url="http://h:1", extraction_model="qwen"))
    assert local is not None and local.model == "qwen"
    hosted = plan_llm(configure(settings, anthropic_api_key="k"))
    assert hosted is not None and hosted.model == "claude-sonnet-5-5"
    both = plan_llm(configure(settings, anthropic_api_key="k", extraction_llm="a:b"))
    assert both is not None and both.model == "a:b"


def test_unconfigured_fails_only_when_used(settings: Settings) -> None:
    with pytest.raises(ConfigError) as info:
        build_llm_client(settings, ListSink())
    for hint in ("ANTHROPIC_API_KEY", "LCG_EXTRACTION_URL", "--extractor-http", "LCG_REPLAY_LLM"):
        assert hint in info.value.message
    assert info.value.wire_message().startswith("configuration error: ")


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"extraction_url": "ftp://h"}, "LCG_EXTRACTION_URL must be an http"),
        ({"extractor_http": "localhost:8080"}, "--extractor-http must be an http"),
        ({"extractor_uds": "/nonexistent/llm.sock"}, "does not exist"),
        ({"anthropic_api_key": "k", "extraction_llm": "a:b:c"}, "LCG_EXTRACTION_LLM"),
        ({"record_llm": "a", "replay_llm": "b"}, "mutually exclusive"),
        ({"replay_llm": "/nonexistent/c.jsonl"}, "cannot read"),
        ({"extraction_url": "http://h", "llm_cost_table_path": "/nonexistent.json"}, "COST"),
    ],
)
def test_invalid_configuration_is_a_config_error_at_first_use(
    settings: Settings, values: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        build_llm_client(configure(settings, **values), ListSink())


def test_variables_load_without_validation_and_the_key_stays_out_of_repr(tmp_path: Path) -> None:
    env = {
        "LCG_HOME": str(tmp_path / "h"),
        "LCG_EXTRACTION_URL": "not a url",
        "ANTHROPIC_API_KEY": "sk-secret",
        "LCG_EXTRACTION_MAX_TOKENS_CEILING": "8192",
    }
    loaded = load_settings(env=env, cwd=tmp_path)
    assert loaded.extraction_url == "not a url"
    assert loaded.extraction_max_tokens_ceiling == 8192
    assert "sk-secret" not in repr(loaded)
    plan = plan_llm(loaded)
    assert plan is not None and plan.source == "ANTHROPIC_API_KEY"


class Canned:
    """An in-process LlmClient (the unit-test fake at the model boundary)."""

    name = "canned:m1"

    async def complete(self, request: LlmRequest) -> LlmResponse:
        return LlmResponse(data={}, text="{}", model="m1")


def test_engine_resolution_is_lazy_cached_and_injectable(
    settings: Settings, events: ListSink
) -> None:
    plain = open_engine(settings, events=events)  # opens although no model is configured
    try:
        status = describe_llm(plain)
        assert status["configured"] is False
        assert "ANTHROPIC_API_KEY" in status["error"]
        with pytest.raises(ConfigError):
            llm_client(plain)
    finally:
        plain.close()
    given = open_engine(settings, events=events, llm=Canned())
    try:
        assert llm_client(given).name == "canned:m1"
        assert describe_llm(given) == {
            "configured": True,
            "provider": "canned",
            "model": "m1",
            "source": "injected",
            "endpoint": None,
            "recording": None,
            "error": None,
        }
    finally:
        given.close()


def test_open_engine_wires_the_given_model_and_ingest_pipeline(
    settings: Settings, events: ListSink
) -> None:
    """Both parts are given at open (no side table): the engine holds them, the ingest
    methods and extraction use them."""
    from lcg.extraction.extractor import HeuristicExtractor
    from lcg.ingest.pipeline import IngestPipeline, pipeline_for

    built: list[IngestPipeline] = []

    def ingest(engine: Engine) -> IngestPipeline:
        built.append(IngestPipeline(engine, HeuristicExtractor()))
        return built[-1]

    eng = open_engine(settings, events=events, llm=Canned(), ingest=ingest)
    try:
        assert llm_client(eng).name == "canned:m1"
        assert describe_llm(eng)["source"] == "injected"
        assert len(built) == 1 and pipeline_for(eng) is built[0] is eng.ingest
        assert isinstance(pipeline_for(eng).extractor, HeuristicExtractor)
    finally:
        eng.close()
    plain = open_engine(settings, events=events)
    try:
        assert plain.ingest is None  # built on the first ingest, then kept
        assert pipeline_for(plain) is pipeline_for(plain) is plain.ingest
    finally:
        plain.close()


def test_a_configured_engine_builds_once(settings: Settings, events: ListSink) -> None:

    configured = replace(settings, extraction_url="http://127.0.0.1:9/v1", record_llm="r.jsonl")
    eng = open_engine(configured, events=events)
    try:
        assert llm_client(eng) is llm_client(eng)
        status = describe_llm(eng)
        assert status["provider"] == "openai-compat"
        assert status["model"] == "local"
        assert status["recording"] == "r.jsonl"
        assert llm_client(eng).name == "openai-compat:local"
    finally:
        eng.close()


def test_compat_flags_become_overrides() -> None:
    opts = parse_args(["--extractor-http", "http://h:1"])
    assert extractor_overrides(opts) == {"extractor_http": "http://h:1"}
    attached = parse_args(["--mcp-stdio", "--connect", "/s", "--extractor-http", "http://h:1"])
    assert extractor_overrides(attached) == {}  # attached mode ignores them


def test_click_options_feed_overrides(tmp_path: Path, uds: str) -> None:
    @click.command()
    @extractor_options
    @click.pass_context
    def probe(ctx: click.Context) -> None:
        click.echo(json.dumps(click_overrides(ctx)))

    runner = CliRunner()
    ok = runner.invoke(probe, ["--extractor-http", "http://h:1/v1"])
    assert json.loads(ok.output) == {"extractor_http": "http://h:1/v1"}
    sock = runner.invoke(probe, ["--extractor-uds", uds])
    assert json.loads(sock.output) == {"extractor_uds": uds}
    assert runner.invoke(probe, ["--extractor-http", "h:1"]).exit_code == 2
    assert runner.invoke(probe, ["--extractor-uds", str(tmp_path / "absent.sock")]).exit_code == 2
    both = runner.invoke(probe, ["--extractor-uds", uds, "--extractor-http", "http://h:1"])
    assert both.exit_code == 2
    assert "mutually exclusive" in both.output


class TruncatesOnce:
    """Truncated at the first budget, complete at a larger one."""

    name = "fake:m2"

    def __init__(self) -> None:
        self.budgets: list[int] = []

    async def complete(self, request: LlmRequest) -> LlmResponse:
        self.budgets.append(request.max_tokens)
        cut = len(self.budgets) == 1
        return LlmResponse(data={"n": len(self.budgets)}, text="{}", model="m2", truncated=cut)


@pytest.mark.anyio
async def test_injected_clients_can_be_wrapped_like_built_ones(
    settings: Settings, events: ListSink
) -> None:
    fake = TruncatesOnce()
    engine = open_engine(settings, events=events, llm=wrap_client(fake, settings, events))
    try:
        req = LlmRequest("entities", "s", "u", {"type": "object"}, "entities", max_tokens=100)
        response = await llm_client(engine).complete(req)
    finally:
        engine.close()
    assert (response.data, response.calls, fake.budgets) == ({"n": 2}, 2, [100, 200])
    assert [e["type"] for e in events.events if e["type"] != "ipc_call"][-3:] == [
        "extraction_truncated",
        "structured_output_parse",
        "token_usage",
    ]
