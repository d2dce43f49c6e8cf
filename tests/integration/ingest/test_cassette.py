"""Cassettes: record against the scripted server, replay with it gone."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest
from ingest_support import ARMSTRONG_ENTITIES, ARMSTRONG_FACTS, ARMSTRONG_TEXT, graph

from lcg.config import Settings
from lcg.engine import open_engine
from lcg.errors import ConfigError, ProviderTransportError
from lcg.extraction.cassette import (
    CassetteError,
    CassetteMissError,
    CassetteRecorder,
    CassetteReplayer,
    DuplicateCassetteKeyError,
    cassette_key,
    duplicate_keys,
    failures_path,
    load_cassette,
)
from lcg.extraction.llm import LlmRequest
from lcg.extraction.providers.openai_compat import OpenAICompatProvider
from lcg.extraction.select import build_llm_client
from lcg.service.registry import dispatch
from lcg.telemetry import ListSink
from lcg.testing.scripted_llm import ErrorReply, ScriptedLlmServer, TextReply

SCHEMA: dict[str, Any] = {"type": "object", "properties": {"entities": {"type": "array"}}}


def request(user: str, max_tokens: int = 500) -> LlmRequest:
    return LlmRequest(
        stage="entities",
        system="Extract entities.",
        user=user,
        schema=SCHEMA,
        schema_name="entities",
        max_tokens=max_tokens,
        prompt_version="v1",
    )


def answer(*names: str) -> str:
    return json.dumps({"entities": [{"name": n} for n in names]})


@pytest.mark.anyio
async def test_record_then_replay_without_the_server(tmp_path: Path) -> None:
    cassette = tmp_path / "calls.jsonl"
    with ScriptedLlmServer(
        [f"```json\n{answer('Ada')}\n```", TextReply(answer("Babbage"), completion_tokens=7)]
    ) as server:
        recorder = CassetteRecorder(OpenAICompatProvider(base_url=server.url), cassette)
        recorded = [
            await recorder.complete(request("Ada.")),
            await recorder.complete(request("Babbage.")),
        ]
    replayer = CassetteReplayer(cassette)
    assert replayer.name == "replay:calls.jsonl"
    replayed = [
        await replayer.complete(request("Babbage.")),  # order across keys does not matter
        await replayer.complete(request("Ada.")),
    ]
    for original, again in zip(recorded, reversed(replayed), strict=True):
        assert again.data == original.data
        assert again.text == original.text
        assert again.usage == original.usage
        assert again.repairs == original.repairs
        assert again.mode == "replay"
    assert replayed[0].usage.output_tokens == 7
    assert replayer.remaining == 0
    line = json.loads(cassette.read_text().splitlines()[0])
    assert line["key"] == cassette_key(request("Ada."))
    assert line["request"]["user"] == "Ada."
    assert line["response"]["repairs"] == ["code_fence"]


@pytest.mark.anyio
async def test_identical_keys_replay_first_in_first_out(tmp_path: Path) -> None:
    cassette = tmp_path / "fifo.jsonl"
    with ScriptedLlmServer([answer("one"), answer("two")]) as server:
        recorder = CassetteRecorder(OpenAICompatProvider(base_url=server.url), cassette)
        await recorder.complete(request("same"))
        await recorder.complete(request("same"))
    records = load_cassette(cassette)
    assert duplicate_keys(records) == {records[0].key: 2}
    replayer = CassetteReplayer(cassette)
    first = await replayer.complete(request("same"))
    second = await replayer.complete(request("same"))
    assert [first.data, second.data] == [
        {"entities": [{"name": "one"}]},
        {"entities": [{"name": "two"}]},
    ]
    with pytest.raises(CassetteMissError):
        await replayer.complete(request("same"))  # both answers used up


@pytest.mark.anyio
async def test_a_miss_names_the_cassette_stage_and_key(tmp_path: Path) -> None:
    cassette = tmp_path / "empty.jsonl"
    cassette.write_text("")
    with pytest.raises(CassetteMissError) as info:
        await CassetteReplayer(cassette).complete(request("never recorded"))
    key = cassette_key(request("never recorded"))
    assert str(cassette) in info.value.message
    assert "stage 'entities'" in info.value.message
    assert key[:16] in info.value.message
    assert info.value.key == key


def test_the_key_covers_prompts_schema_and_budget_but_not_the_model() -> None:
    base = request("x")
    assert cassette_key(base) == cassette_key(request("x"))
    for changed in (
        replace(base, user="y"),
        replace(base, system="other"),
        replace(base, schema={"type": "object"}),
        replace(base, max_tokens=1000),
        replace(base, prompt_version="v2"),
        replace(base, stage="facts"),
    ):
        assert cassette_key(changed) != cassette_key(base)


@pytest.mark.anyio
async def test_failures_go_to_the_sidecar_which_rotates(tmp_path: Path) -> None:
    cassette = tmp_path / "rec.jsonl"
    with ScriptedLlmServer([ErrorReply(500, "boom")] * 3) as server:
        recorder = CassetteRecorder(
            OpenAICompatProvider(base_url=server.url), cassette, failures_max_bytes=600
        )
        for n in range(3):
            with pytest.raises(ProviderTransportError):
                await recorder.complete(request(f"call {n}"))
    assert not cassette.exists()  # nothing recorded for failed calls
    sidecar = failures_path(cassette)
    assert sidecar.name == "rec.jsonl.failures.jsonl"
    rotated = sidecar.with_name(sidecar.name + ".1")
    assert rotated.exists()
    entries = [json.loads(x) for p in (rotated, sidecar) for x in p.read_text().splitlines()]
    assert [e["request"]["user"] for e in entries][-1] == "call 2"
    assert entries[-1]["error"]["type"] == "ProviderTransportError"
    assert "HTTP 500" in entries[-1]["error"]["message"]
    assert sidecar.stat().st_size < 600 * 2


def test_load_cassette_names_the_corrupt_line(tmp_path: Path) -> None:
    cassette = tmp_path / "bad.jsonl"
    good = {
        "key": "k",
        "stage": "entities",
        "model": "m",
        "request": {},
        "response": {"text": answer("A")},
    }
    cassette.write_text(json.dumps(good) + "\n\n{not json\n")
    with pytest.raises(CassetteError) as info:
        load_cassette(cassette)
    assert info.value.line == 3
    assert f"{cassette}:3" in info.value.message
    # A record without `data` is parsed from its text.
    cassette.write_text(json.dumps(good) + "\n")
    assert load_cassette(cassette)[0].response.data == {"entities": [{"name": "A"}]}
    with pytest.raises(CassetteError, match="cannot read"):
        load_cassette(tmp_path / "absent.jsonl")


def test_duplicate_key_error_lists_keys(tmp_path: Path) -> None:
    error = DuplicateCassetteKeyError(tmp_path / "c.jsonl", {"a" * 64: 3})
    assert isinstance(error, ConfigError)
    assert "aaaaaaaaaaaa x3" in error.message


def test_record_and_replay_together_are_a_config_error(settings: Settings) -> None:
    both = replace(settings, record_llm="a.jsonl", replay_llm="b.jsonl")
    with pytest.raises(ConfigError, match="mutually exclusive"):
        build_llm_client(both, ListSink())


@pytest.mark.anyio
async def test_record_llm_wraps_the_selected_provider(settings: Settings, tmp_path: Path) -> None:
    cassette = tmp_path / "via-settings.jsonl"
    with ScriptedLlmServer([answer("Ada")]) as server:
        configured = replace(settings, extraction_url=server.url, record_llm=str(cassette))
        client = build_llm_client(configured, ListSink())
        await client.complete(request("Ada."))
    replaying = replace(settings, replay_llm=str(cassette))
    again = await build_llm_client(replaying, ListSink()).complete(request("Ada."))
    assert again.data == {"entities": [{"name": "Ada"}]}


def _without_ids(value: Any) -> Any:
    """A graph read with the random ids left out (they differ between two engines)."""
    if isinstance(value, dict):
        return {
            k: _without_ids(v)
            for k, v in value.items()
            if not (k.endswith(("uuid", "uuids")) or k == "episodes")
        }
    if isinstance(value, list):
        return [_without_ids(v) for v in value]
    return value


@pytest.mark.anyio
async def test_a_session_with_default_reference_times_replays_to_the_same_graph(
    tmp_path: Path,
) -> None:
    cassette = tmp_path / "session.jsonl"
    calls: list[dict[str, Any]] = [
        {"chunk_text": ARMSTRONG_TEXT, "chunk_id": "c1", "source_file": "notes.md"},
        {"chunk_text": "NASA ran Apollo 11.", "chunk_id": "c2", "source_file": "notes.md"},
    ]
    answers = [
        ARMSTRONG_ENTITIES,
        ARMSTRONG_FACTS,
        json.dumps({"entities": [{"name": "NASA", "type": "Organization"}, {"name": "Apollo 11"}]}),
        json.dumps({"facts": []}),
    ]

    def settings_for(home: str, **more: Any) -> Settings:
        return Settings.for_home(
            tmp_path / home,
            kuzu_buffer_pool_mb=256,
            embedder="hash",
            extraction_single_call_max_chars=0,
            **more,
        )

    async def session(settings: Settings) -> tuple[Any, Any, list[Any]]:
        engine = open_engine(settings, events=ListSink())
        try:
            results = [await dispatch(engine, "knowledge_process_chunk", c) for c in calls]
            nodes, edges = await graph(engine)
            episodes = await dispatch(engine, "knowledge_get_episodes", {})
        finally:
            engine.close()
        return nodes, edges, [results, episodes]

    with ScriptedLlmServer(answers) as server:
        recorded = await session(
            settings_for("record", extraction_url=server.url, record_llm=str(cassette))
        )
    await anyio.sleep(0.05)  # "now" has moved on: replay must not date anything by it
    replayed = await session(settings_for("replay", replay_llm=str(cassette)))

    rec_nodes, rec_edges, rec_rest = recorded
    rep_nodes, rep_edges, rep_rest = replayed
    assert set(rep_nodes) == {"Neil Armstrong", "Apollo 11", "NASA"}
    assert _without_ids(rep_nodes) == _without_ids(rec_nodes)
    assert _without_ids(rep_edges) == _without_ids(rec_edges)
    rec_episodes, rep_episodes = rec_rest[1]["episodes"], rep_rest[1]["episodes"]
    assert [e["valid_at"] for e in rep_episodes] == [e["valid_at"] for e in rec_episodes]
    assert [e["name"] for e in rep_episodes] == [e["name"] for e in rec_episodes]
    clock = [json.loads(line) for line in cassette.read_text().splitlines() if '"clock"' in line]
    assert len(clock) == 2  # one recorded default time per episode
    assert len(load_cassette(cassette)) == 4  # the clock lines are not call records
