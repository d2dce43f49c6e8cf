"""lcg.engine.modes: the storage mode `open_engine` chooses, and the one commit path and the
reopen each mode serves, on both modes (the embedded Kuzu store with its JSONL WAL; a real
FalkorDB server with its streams, from `lcg.testing`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from lcg import Engine, Settings, open_engine
from lcg.engine import EpisodeCommit, exclusive
from lcg.engine.modes import EmbeddedMode, ServerMode
from lcg.errors import ConflictError, InvalidRequestError
from lcg.graph import hybrid
from lcg.models import Entity, Episode
from lcg.storage.backend import GroupMovedError
from lcg.storage.store import Store
from lcg.wal.records import Op, encode_line, entity_op

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["kuzu", "falkordb"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    more: dict[str, str] = {}
    if request.param == "falkordb":
        from lcg.storage.falkordb.backend import FalkorBackend

        url = request.getfixturevalue("falkordb_url")
        server = FalkorBackend(url)
        try:
            server.client.flushall()
        finally:
            server.close()
        more = {"storage": "falkordb", "falkordb_url": url}
    engine = open_engine(Settings.for_home(tmp_path / "home", embedder="hash", **more))
    try:
        yield engine
    finally:
        engine.close()


def _entity(uuid: str, group: str, name: str) -> Op:
    return entity_op(Entity(uuid, group, name))


def _plan_of(group: str, *ops: Op) -> Callable[[object], tuple[None, list[tuple[str, list[Op]]]]]:
    return lambda _: (None, [(group, list(ops))])


def _wal_lines(engine: Engine, group: str) -> int:
    directory = engine.parts.wal.directory(group)
    return sum(len(p.read_bytes().splitlines()) for p in directory.glob("*.jsonl"))


def test_open_engine_chooses_the_mode_by_the_store(engine: Engine) -> None:
    mode = engine._mode
    if engine.settings.storage == "falkordb":
        assert isinstance(mode, ServerMode)
        assert (mode.saves_indexes, mode.exclusive_rows, mode.follows) == (False, False, True)
        assert mode.journal() is None  # a server checkpoints itself
    else:
        assert isinstance(mode, EmbeddedMode)
        assert (mode.saves_indexes, mode.exclusive_rows, mode.follows) == (True, True, False)
        assert isinstance(mode.journal(), Store)  # Kuzu's journal, checkpointed by lcg
    assert mode.store is exclusive.store(engine)


async def test_one_commit_path_logs_applies_and_indexes_on_both_modes(engine: Engine) -> None:
    """Two groups' batches in one `Engine.write`: each group's lines where the mode keeps its
    WAL, the rows in the store, the positions moved, the name and search indexes following."""

    def plan(_: object) -> tuple[None, list[tuple[str, list[Op]]]]:
        return None, [
            ("a", [_entity("e1", "a", "Ada Lovelace"), _entity("e2", "a", "Charles Babbage")]),
            ("b", [_entity("e3", "b", "Grace Hopper")]),
        ]

    await engine.write(plan)
    with engine.writer() as w:
        positions = {g: w.position(g)[1] for g in ("a", "b")}
        streams = {g: w.stream(g, 0) for g in ("a", "b")}
    assert positions == {"a": 2, "b": 1}
    if engine.settings.storage == "falkordb":
        assert [[r.seq for r in s or []] for s in streams.values()] == [[0, 1], [0]]
        assert engine.parts.wal.groups() == []  # the workspace's JSONL WAL stays empty
    else:
        assert streams == {"a": None, "b": None}  # no other process writes this store
        assert (_wal_lines(engine, "a"), _wal_lines(engine, "b")) == (2, 1)
    found = await engine.entity_by_name("b", "grace hopper")
    assert found is not None and found.uuid == "e3"
    hits = await hybrid.search_entities(engine, "Babbage", group_ids=["a"])
    assert [e.uuid for e, _ in hits] == ["e2"]


async def test_a_commit_planned_against_a_stale_position(engine: Engine) -> None:
    """On a server a commit planned at a position the group has left is refused (nothing
    written); the embedded store is written by this process alone, so nothing moves under it."""

    def plan(_: object) -> tuple[None, list[tuple[str, list[Op]]]]:
        return None, [("a", [_entity("e1", "a", "Ada Lovelace")])]

    await engine.write(plan)
    commit = _commit_of(engine, "a", "e2", "Alan Turing")
    if engine.settings.storage == "falkordb":
        with pytest.raises(GroupMovedError):
            await engine.commit_episode(commit, at=0)
        assert await engine.entity_by_name("a", "alan turing") is None
    else:
        await engine.commit_episode(commit, at=0)
        assert await engine.entity_by_name("a", "alan turing") is not None


def _commit_of(engine: Engine, group: str, uuid: str, name: str) -> EpisodeCommit:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    episode = Episode(f"ep-{uuid}", group, f"ep {name}", f"{name} was here", created_at=at)
    return EpisodeCommit(group, episode, [Entity(uuid, group, name, created_at=at)])


async def test_an_imported_wal_lands_where_the_mode_keeps_it(engine: Engine) -> None:
    """`lcg wal import`'s step: a group's batches with their lines verbatim, in the server's
    stream (committed batch by batch) or the workspace's WAL files (then replayed)."""
    op = _entity("e1", "a", "Ada Lovelace")
    line = encode_line(0, "2026-01-01T00:00:00.000000Z", op, 0, 0)
    engine._mode.import_group("a", [([op], [line])], "00000000_000000_export_0000.jsonl")
    found = await engine.entity_by_name("a", "ada lovelace")
    assert found is not None and found.uuid == "e1"
    records, _ = engine._mode.wal_records("a")
    assert [(r.seq, r.op, r.data["uuid"]) for r in records] == [(0, "entity.upsert", "e1")]
    assert engine._mode.wal_groups() == ["a"]


def test_verbatim_lines_are_committed_to_a_server_store_only(engine: Engine) -> None:
    op = _entity("e1", "a", "Ada Lovelace")
    batch = engine._prepare("a", [op])
    line = encode_line(0, "2026-01-01T00:00:00.000000Z", op, 0, 0)
    with exclusive.write_lock(engine):
        if engine.settings.storage == "falkordb":
            assert engine._commit([batch], [line]) == [(0, 0)]
            return
        with pytest.raises(InvalidRequestError, match="server store"):
            engine._commit([batch], [line])
    assert engine.parts.wal.groups() == []  # nothing logged, nothing applied


async def test_reopen_keeps_the_graph_on_both_modes(engine: Engine) -> None:
    def plan(_: object) -> tuple[None, list[tuple[str, list[Op]]]]:
        return None, [("a", [_entity("e1", "a", "Ada Lovelace")])]

    await engine.write(plan)
    prepared: list[Path] = []
    with exclusive.write_lock(engine):
        engine.reopen(prepared.append, failed_reason="test")
    assert prepared == [engine.settings.db_path]
    assert engine.state.degraded_reason is None
    found = await engine.entity_by_name("a", "ada lovelace")
    assert found is not None and found.uuid == "e1"


@pytest.mark.parametrize("preserve_wal", [True, False])
async def test_clear_all_empties_the_store_of_either_mode(
    engine: Engine, preserve_wal: bool
) -> None:
    """`knowledge_clear_all` empties what the mode keeps (`StorageMode.empty_store`, then the
    reopen): the graph always, the WAL unless it is preserved."""
    from lcg.admin.clear import clear_all

    def plan(_: object) -> tuple[None, list[tuple[str, list[Op]]]]:
        return None, [("a", [_entity("e1", "a", "Ada Lovelace")])]

    await engine.write(plan)
    await clear_all(engine, True, preserve_wal)
    assert await engine.entity_by_name("a", "ada lovelace") is None
    records, _ = engine._mode.wal_records("a")
    assert len(records) == (1 if preserve_wal else 0)


async def test_one_rebuild_path_checks_counts_and_replays_on_both_modes(engine: Engine) -> None:
    """`knowledge_rebuild_from_wal`'s one path (`lcg.admin.rebuild`): the mode's checks, its dry
    run, a full rebuild (purge, replay, then what every replay leaves behind) and a tail, from
    the workspace's WAL files or the server's stream."""
    from lcg.admin.rebuild import rebuild_from_wal

    for op in (_entity("e1", "a", "Ada Lovelace"), _entity("e2", "a", "Charles Babbage")):
        await engine.write(_plan_of("a", op))
    with pytest.raises(ConflictError):  # a full rebuild of a group that holds data
        await rebuild_from_wal(engine, "a")
    with pytest.raises(ConflictError):  # nor can a dry run preview one
        await rebuild_from_wal(engine, "a", dry_run=True)
    with pytest.raises(InvalidRequestError):
        await rebuild_from_wal(engine, "nowhere")

    counted = await rebuild_from_wal(engine, "a", from_seq=1, dry_run=True)
    assert (counted["dry_run"], counted["mutations_replayed"]) == (True, 1)

    full = await rebuild_from_wal(engine, "a", force_clear=True)
    assert (full["success"], full["dry_run"], full["mutations_replayed"]) == (True, False, 2)
    assert full["indices_built"] is True and engine.state.indices_built
    found = await engine.entity_by_name("a", "ada lovelace")
    assert found is not None and found.uuid == "e1"
    hits = await hybrid.search_entities(engine, "Babbage", group_ids=["a"])
    assert [e.uuid for e, _ in hits] == ["e2"]

    tail = await rebuild_from_wal(engine, "a", from_seq=1)
    assert (tail["mutations_replayed"], tail["reset_detected"]) == (1, False)
    assert await engine.entity_by_name("a", "charles babbage") is not None
    with engine.writer() as w:
        assert w.position("a")[1] == 2  # a rebuild appends nothing to the group's WAL
