"""Supersession (bi-temporal) and per-group commit order, through a scripted LLM server."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from ingest_support import chunk, entities, existing_index, fact, facts, graph, wal_ops

from lcg import Engine, Settings, open_engine
from lcg.extraction.providers.openai_compat import OpenAICompatProvider
from lcg.service.registry import dispatch
from lcg.testing.heuristic_llm import prompt_parts
from lcg.testing.scripted_llm import ScriptedLlmServer
from lcg.timeutil import now, parse_timestamp

# The method tests run on the embedded store and on a FalkorDB server (conftest).
BOTH_STORAGES = True

pytestmark = pytest.mark.anyio

Script = Callable[[dict[str, Any]], str]

# Both extraction protocols: two calls (entities, then facts) and the single call.
MODES = pytest.mark.parametrize("single_call_max_chars", [0, 3000], ids=["two-call", "one-call"])


def _answer(user: str, ents: str, fcts: Callable[[], str]) -> str:
    """The scripted answer to whichever extraction prompt `user` is."""
    if user.startswith("ENTITIES:"):  # the facts call
        return fcts()
    if user.startswith("EXISTING FACTS:"):  # the single call
        return json.dumps({**json.loads(ents), **json.loads(fcts())})
    return ents


def _by_episode(scripts: dict[str, tuple[str, Script]]) -> Callable[[dict[str, Any]], str]:
    """A responder answering each episode's prompts from a script."""

    def respond(body: dict[str, Any]) -> str:
        _, user = prompt_parts(body)
        name = user.split("EPISODE NAME: ", 1)[1].split("\n", 1)[0]
        ents, fcts = scripts[name]
        return _answer(user, ents, lambda: fcts(body))

    return respond


async def _expired_at(engine: Engine) -> dict[str, datetime | None]:
    rows = await dispatch(
        engine, "knowledge_query_cypher", {"query": "MATCH (f:Fact) RETURN f.fact, f.expired_at"}
    )
    out = {}
    for text, stamp in rows["rows"]:
        out[text] = parse_timestamp(stamp) if stamp else None
    return out


@MODES
async def test_a_project_moves_twice_a_person_changes_role_and_additions_invalidate_nothing(
    tmp_path: Path, single_call_max_chars: int
) -> None:
    settings = Settings.for_home(
        tmp_path / "s",
        kuzu_buffer_pool_mb=256,
        embedder="hash",
        extraction_single_call_max_chars=single_call_max_chars,
    )
    with ScriptedLlmServer(_by_episode(_moves_scripts())) as server:
        engine = open_engine(settings, llm=OpenAICompatProvider(base_url=server.url))
        try:
            await _project_moves_twice(engine)
        finally:
            engine.close()


def _moves_scripts() -> dict[str, tuple[str, Script]]:
    """The model's answers to the three episodes."""
    return {
        "e1": (
            entities(
                {"name": "lcg", "type": "Project"},
                {"name": "repo-a"},
                {"name": "Alice"},
                {"name": "CTO"},
            ),
            lambda b: facts(
                fact("lcg", "HOSTED_AT", "repo-a", "lcg is hosted at repo-a."),
                fact(
                    "Alice", "WORKS_AS", "CTO", "Alice is the CTO.", valid_at="2023-05-01T00:00:00Z"
                ),
            ),
        ),
        "e2": (
            entities({"name": "lcg"}, {"name": "repo-b"}, {"name": "Alice"}, {"name": "CEO"}),
            lambda b: facts(
                fact(
                    "lcg",
                    "HOSTED_AT",
                    "repo-b",
                    "lcg moved to repo-b.",
                    supersedes=[existing_index(b, "repo-a")],
                ),
                fact(
                    "Alice", "WORKS_AS", "CEO", "Alice became CEO.", valid_at="2024-03-01T00:00:00Z"
                ),
            ),
        ),
        "e3": (
            entities({"name": "lcg"}, {"name": "repo-c"}, {"name": "Kuzu"}),
            lambda b: facts(
                fact(
                    "lcg",
                    "HOSTED_AT",
                    "repo-c",
                    "lcg moved to repo-c.",
                    valid_at="2024-12-15T00:00:00Z",
                    supersedes=[existing_index(b, "repo-b")],
                ),
                fact("lcg", "USES", "Kuzu", "lcg uses Kuzu."),
            ),
        ),
    }


async def _project_moves_twice(engine: Engine) -> None:
    (engine.settings.home / "ontology.yaml").write_text(
        "relation_types:\n  - name: WORKS_AS\n    cardinality: one\n  - name: HOSTED_AT\n"
    )
    windows = []
    for name, when in (("e1", "2024-01-01"), ("e2", "2024-06-01"), ("e3", "2025-01-01")):
        before = now()
        result = await dispatch(
            engine,
            "knowledge_process_chunk",
            chunk(TEXTS[name], name, f"{when}T00:00:00Z"),
        )
        windows.append((before, now(), result))
    _, edges = await graph(engine)
    valid = {e["fact"]: (e["valid_at"], e["invalid_at"]) for e in edges}
    assert valid == {
        "lcg is hosted at repo-a.": ("2024-01-01 00:00:00", "2024-06-01 00:00:00"),
        "Alice is the CTO.": ("2023-05-01 00:00:00", "2024-03-01 00:00:00"),
        "lcg moved to repo-b.": ("2024-06-01 00:00:00", "2024-12-15 00:00:00"),
        "Alice became CEO.": ("2024-03-01 00:00:00", None),
        "lcg moved to repo-c.": ("2024-12-15 00:00:00", None),
        "lcg uses Kuzu.": ("2025-01-01 00:00:00", None),
    }
    expired = await _expired_at(engine)
    for retired, (before, after, _) in (
        ("lcg is hosted at repo-a.", windows[1]),
        ("Alice is the CTO.", windows[1]),
        ("lcg moved to repo-b.", windows[2]),
    ):
        stamp = expired[retired]
        assert stamp is not None and before.replace(microsecond=0) <= stamp <= after
    assert sorted(k for k, v in expired.items() if v is None) == [
        "Alice became CEO.",
        "lcg moved to repo-c.",
        "lcg uses Kuzu.",
    ]
    assert [len(w[2]["edges_superseded"]) for w in windows] == [0, 2, 1]
    invalidations = [op for op in wal_ops(engine) if op["op"] == "fact.invalidate"]
    assert len(invalidations) == 3
    nodes, _ = await graph(engine)
    assert len(nodes) == 8  # lcg, three repos, Alice, CTO, CEO, Kuzu: nothing duplicated


# What the episodes say (the single call's supersession candidates are the active facts about
# the entities a text names).
TEXTS = {
    "e1": "lcg is hosted at repo-a. Alice has been the CTO since May 2023.",
    "e2": "lcg moved to repo-b. Alice became CEO in March 2024.",
    "e3": "lcg moved to repo-c in December 2024. lcg uses Kuzu.",
}


@MODES
async def test_extraction_runs_concurrently_and_commits_in_arrival_order(
    tmp_path: Path, single_call_max_chars: int
) -> None:
    count, bound = 6, 3
    lock = threading.Lock()
    inflight = [0, 0]  # now, most seen

    def respond(body: dict[str, Any]) -> str:
        _, user = prompt_parts(body)
        i = int(user.split("EPISODE NAME: e", 1)[1].split("\n", 1)[0])
        with lock:
            inflight[0] += 1
            inflight[1] = max(inflight[1], inflight[0])
        # Simulated model latency; earlier arrivals answer slower, so extractions finish out
        # of arrival order.
        time.sleep(0.5 if i < count // 2 else 0.3)
        with lock:
            inflight[0] -= 1
        return _answer(
            user,
            entities({"name": f"P{i}"}, {"name": "Tea"}),
            lambda: facts(fact(f"P{i}", "LIKES", "Tea", f"P{i} likes tea.")),
        )

    settings = Settings.for_home(
        tmp_path / "c",
        kuzu_buffer_pool_mb=256,
        extraction_concurrency=bound,
        extraction_single_call_max_chars=single_call_max_chars,
    )
    with ScriptedLlmServer(respond) as server:
        engine = open_engine(settings, llm=OpenAICompatProvider(base_url=server.url))
        try:
            async with anyio.create_task_group() as tg:
                for i in range(count):
                    tg.start_soon(
                        dispatch,
                        engine,
                        "knowledge_process_chunk",
                        chunk(f"P{i} likes tea.", f"e{i}", "2024-01-01T00:00:00Z"),
                    )
                    await (
                        anyio.lowlevel.checkpoint()
                    )  # start in index order: that is the arrival order
            assert inflight[1] == bound  # concurrent extraction, never more than the bound
            order = [op["data"]["name"] for op in wal_ops(engine) if op["op"] == "episode.add"]
            assert order == [f"e{i}" for i in range(count)]
            nodes, edges = await graph(engine)
            assert sum(1 for n in nodes if n == "Tea") == 1 and len(edges) == count
        finally:
            engine.close()
