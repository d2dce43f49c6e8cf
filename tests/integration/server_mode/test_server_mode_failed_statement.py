"""Server mode: a statement that fails inside a commit's MULTI/EXEC. Redis runs the rest of
the transaction, the position advance included; the commit must not leave the graph claiming
seqs whose rows it lacks. Forced on a real FalkorDB with its per-query memory cap
(`QUERY_MEM_CAPACITY`): the statement carrying a 3 MB summary fails, the small ones around it
(the append, the guard, the advance) run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from lcg import Engine, Settings, open_engine
from lcg.errors import LcgError
from lcg.service.registry import dispatch

pytestmark = pytest.mark.anyio

GROUP = "g"
BIG = "Rocket stage " + "x" * 3_000_000


@pytest.fixture
def engine(tmp_path: Path, falkordb_url: str) -> Iterator[Engine]:
    from lcg.storage.falkordb.backend import FalkorBackend

    server = FalkorBackend(falkordb_url)
    try:
        server.client.flushall()
    finally:
        server.close()
    settings = Settings.for_home(
        tmp_path / ".lcg",
        embedder="hash",
        extractor="heuristic",
        storage="falkordb",
        falkordb_url=falkordb_url,
    )
    engine = open_engine(settings)
    try:
        yield engine
    finally:
        engine.close()


def _cap(url: str, capacity: int) -> None:
    from lcg.storage.falkordb.backend import FalkorBackend

    server = FalkorBackend(url)
    try:
        server.client.execute_command("GRAPH.CONFIG", "SET", "QUERY_MEM_CAPACITY", capacity)
    finally:
        server.close()


def _position_and_stream(url: str) -> tuple[int | None, int | None]:
    from lcg.storage.falkordb.backend import FalkorBackend

    server = FalkorBackend(url)
    try:
        with server.read() as r:
            position = r.position(GROUP)
        bounds = server.stream_bounds(GROUP) or {}
        return position, bounds.get("max_seq")
    finally:
        server.close()


async def _names(engine: Engine) -> list[str]:
    nodes = await dispatch(engine, "knowledge_get_nodes_by_group", {"group_ids": [GROUP]})
    return sorted(n["name"] for n in nodes["nodes"])


async def test_a_failed_statement_inside_exec_leaves_the_position_honest_and_is_applied_later(
    engine: Engine, falkordb_url: str
) -> None:
    await dispatch(engine, "knowledge_assert_entity", {"name": "Ada", "group_id": GROUP})
    assert _position_and_stream(falkordb_url) == (1, 0)
    _cap(falkordb_url, 1_048_576)
    try:
        with pytest.raises(LcgError):
            await dispatch(
                engine,
                "knowledge_assert_entity",
                {"name": "Saturn", "summary": BIG, "group_id": GROUP},
            )
        # The stream holds the batch; the graph's position does not claim it.
        position, max_seq = _position_and_stream(falkordb_url)
        assert max_seq is not None and max_seq >= 1
        assert position == 1
        # A write meanwhile catches up first, and its catch-up fails the same way: the
        # position still does not move past the batch, and nothing is acknowledged.
        with pytest.raises(LcgError):
            await dispatch(engine, "knowledge_assert_entity", {"name": "Linus", "group_id": GROUP})
        assert _position_and_stream(falkordb_url) == (1, max_seq)
    finally:
        _cap(falkordb_url, 0)
    # The next write catches the graph up from the stream first: the batch is applied whole.
    await dispatch(engine, "knowledge_assert_entity", {"name": "Grace", "group_id": GROUP})
    position, max_seq = _position_and_stream(falkordb_url)
    assert max_seq is not None and position == max_seq + 1
    assert await _names(engine) == ["Ada", "Grace", "Saturn"]
