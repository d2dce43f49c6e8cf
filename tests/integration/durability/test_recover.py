"""`knowledge_recover` and `knowledge_recover_full` (docs/api.md §knowledge_recover, §knowledge_recover_full, §error-styles, §concurrency).

Every case runs on a copy of one populated workspace (two groups, asserted entities and facts,
episode commits, a raw Cypher write): recovery on a healthy engine must replace the open
database and leave the graph exactly as it was; on a degraded engine it must bring it back.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from episode_support import commit_two_episodes
from rpc_support import running_server, wait_settled

from lcg import (
    ConflictError,
    Engine,
    InvalidRequestError,
    Settings,
    UnavailableError,
    open_engine,
)
from lcg.admin import status as admin_status
from lcg.admin.recover import DID_NOT_REOPEN, find_backup, quarantine_journal
from lcg.engine import exclusive
from lcg.engine.recovery import DEGRADED_DB_OPEN_FAILED, degraded_engine, open_or_degraded
from lcg.service.registry import dispatch
from lcg.service.rpc.client import RpcClient, RpcError
from lcg.telemetry import ListSink

QUERIES = {
    "Entity": "MATCH (n:Entity) RETURN n",
    "Fact": "MATCH (n:Fact) RETURN n",
    "Episode": "MATCH (n:Episode) RETURN n",
    "Embedding": "MATCH (n:Embedding) RETURN n",
    "MENTIONS": "MATCH (a:Episode)-[r:MENTIONS]->(b:Entity) RETURN a.uuid, b.uuid, r",
    "RELATES_TO": "MATCH (a)-[r:RELATES_TO]->(b) RETURN a.uuid, b.uuid, r",
}
COUNTS = ("entity_count", "relationship_count", "episode_count")
NAMES = [("liminis", "Neil Armstrong"), ("liminis", "Michael Collins"), ("mission-b", "Saturn V")]


async def _populate(engine: Engine) -> None:
    await dispatch(
        engine,
        "knowledge_assert_entity",
        {"name": "Neil Armstrong", "labels": ["Person"], "summary": "First on the Moon"},
    )
    apollo = await dispatch(engine, "knowledge_assert_entity", {"name": "Apollo 11"})
    await dispatch(
        engine,
        "knowledge_assert_relationship",
        {"source_name": "Neil Armstrong", "target_name": "Apollo 11", "predicate": "COMMANDED"},
    )
    await commit_two_episodes(engine, apollo["entity_uuid"])
    await dispatch(
        engine,
        "knowledge_query_cypher",
        {"query": "MATCH (e:Entity {name: 'Apollo 11'}) SET e.summary = 'Lunar landing'"},
    )


def _settings(home: Path) -> Settings:
    return Settings.for_home(home, kuzu_buffer_pool_mb=64)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """A populated workspace (closed), and its graph as `graph_of` sees it."""
    home = tmp_path_factory.mktemp("template") / ".lcg"
    engine = open_engine(_settings(home))
    try:
        anyio.run(_populate, engine)
        expected = anyio.run(graph_of, engine)
    finally:
        engine.close()
    return home, expected


@pytest.fixture
def home(template: tuple[Path, dict[str, Any]], tmp_path: Path) -> Path:
    copy = tmp_path / "ws" / ".lcg"
    shutil.copytree(template[0], copy)
    return copy


@pytest.fixture
def expected(template: tuple[Path, dict[str, Any]]) -> dict[str, Any]:
    return template[1]


@pytest.fixture
def healthy(home: Path) -> Iterator[Engine]:
    engine = open_engine(_settings(home), events=ListSink())
    try:
        yield engine
    finally:
        engine.close()


def _strip(value: Any) -> Any:
    """A row without Kuzu's internal ids (they change when the database is rebuilt)."""
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in ("_id", "_src", "_dst")}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


async def graph_of(engine: Engine) -> dict[str, Any]:
    """Every row of the graph, the status counts and the name index's answers."""
    with engine.reader() as conn:
        rows = {t: sorted(repr(_strip(r)) for r in conn.rows(q)) for t, q in QUERIES.items()}
    status = await dispatch(engine, "knowledge_status", {})
    names = {
        (g, n): (e.uuid if (e := await engine.entity_by_name(g, n)) else None) for g, n in NAMES
    }
    return {"rows": rows, "counts": {k: status[k] for k in COUNTS}, "names": names}


def _corrupt_database(db: Path) -> None:
    with db.open("r+b") as fh:
        fh.write(b"\xde\xad\xbe\xef" * 1024)


def _make_backup(home: Path, template_home: Path) -> Path:
    """A `*.pre-*-backup` copy of the populated (closed, checkpointed) database."""
    backup = home / "db" / "liminis.db.pre-migration-backup"
    shutil.copy2(template_home / "db" / "liminis.db", backup)
    return backup


async def _recover(engine: Engine, strategy: str) -> dict[str, Any]:
    return await dispatch(engine, "knowledge_recover", {"strategy": strategy})


# -- a healthy engine: the open database is replaced, the graph is unchanged ---------------------


@pytest.mark.parametrize(
    "strategy", ["drop_lbug_wal", "rebuild_from_workspace_wal", "restore_from_backup"]
)
def test_each_strategy_replaces_a_healthy_database_and_keeps_the_graph(
    strategy: str,
    healthy: Engine,
    home: Path,
    template: tuple[Path, dict[str, Any]],
    expected: dict[str, Any],
) -> None:
    if strategy == "restore_from_backup":
        _make_backup(home, template[0])
    old_store = exclusive.store(healthy)
    result = anyio.run(_recover, healthy, strategy)
    assert result == {"strategy": strategy, "success": True, "restart_required": False}
    assert healthy.state.degraded_reason is None and healthy.state.indices_built is True
    assert exclusive.store(healthy) is not old_store  # replaced in place: same Engine, new database
    assert anyio.run(graph_of, healthy) == expected
    moved = sorted(p.name for p in (home / "db").glob("liminis.db.broken-*"))
    assert bool(moved) is (strategy != "drop_lbug_wal")
    # ...and the engine still writes, logs and reads.
    anyio.run(dispatch, healthy, "knowledge_assert_entity", {"name": "Probe"})
    assert anyio.run(healthy.entity_by_name, "liminis", "Probe") is not None
    assert isinstance(healthy.parts.events, ListSink)
    states = healthy.parts.events.of_type("service_state")
    assert states[-1] == {"type": "service_state", "state": "healthy", "recovered_by": strategy}


def test_a_refused_strategy_leaves_a_healthy_engine_healthy(healthy: Engine) -> None:
    result = anyio.run(_recover, healthy, "restore_from_backup")
    assert result == {
        "strategy": "restore_from_backup",
        "success": False,
        "error": "No backup file found",
        "restart_required": False,
    }
    assert healthy.state.degraded_reason is None
    assert anyio.run(dispatch, healthy, "knowledge_status", {})["entity_count"] == 4


def test_recover_full_is_a_no_op_on_a_healthy_engine(healthy: Engine) -> None:
    store = exclusive.store(healthy)
    with exclusive.write_lock(healthy):  # takes no lock when nothing needs recovering
        result = anyio.run(dispatch, healthy, "knowledge_recover_full", {})
    assert result == {
        "success": True,
        "recovery_needed": False,
        "episodes_before": 2,
        "mutations_replayed": 0,
        "episodes_after": 2,
        "indexes_rebuilt": False,
    }
    assert exclusive.store(healthy) is store


# -- a degraded engine (no database open) --------------------------------------------------------


def _degraded(home: Path) -> Engine:
    engine = open_or_degraded(_settings(home), events=ListSink())
    assert engine.state.degraded_reason == DEGRADED_DB_OPEN_FAILED
    return engine


def test_rebuild_from_the_wal_brings_a_corrupt_database_back(
    home: Path, expected: dict[str, Any]
) -> None:
    _corrupt_database(home / "db" / "liminis.db")
    engine = _degraded(home)
    try:
        with pytest.raises(Exception, match="DB unavailable"):
            anyio.run(dispatch, engine, "knowledge_list_entities", {})
        result = anyio.run(_recover, engine, "rebuild_from_workspace_wal")
        assert result["success"] is True and engine.state.degraded_reason is None
        assert anyio.run(graph_of, engine) == expected
        assert anyio.run(admin_status.health, engine)["state"] == "healthy"
    finally:
        engine.close()


def test_restore_from_backup_brings_a_corrupt_database_back(
    home: Path, template: tuple[Path, dict[str, Any]], expected: dict[str, Any]
) -> None:
    backup = _make_backup(home, template[0])
    assert find_backup(home / "db" / "liminis.db") == backup
    _corrupt_database(home / "db" / "liminis.db")
    engine = _degraded(home)
    try:
        result = anyio.run(_recover, engine, "restore_from_backup")
        assert result["success"] is True
        assert anyio.run(graph_of, engine) == expected
        assert backup.exists()  # copied, not moved
    finally:
        engine.close()


def test_drop_lbug_wal_quarantines_a_corrupt_journal_and_catches_up(
    home: Path, expected: dict[str, Any]
) -> None:
    journal = home / "db" / "liminis.db.wal"
    journal.write_bytes(b"\x00garbage" * 512)
    # Kuzu opens over this journal, so the degraded engine is made directly.
    engine = degraded_engine(_settings(home), DEGRADED_DB_OPEN_FAILED)
    try:
        result = anyio.run(_recover, engine, "drop_lbug_wal")
        assert result == {"strategy": "drop_lbug_wal", "success": True, "restart_required": False}
        quarantined = list((home / "db").glob("liminis.db.wal.corrupt-*"))
        assert len(quarantined) == 1
        assert quarantined[0].read_bytes() == b"\x00garbage" * 512
        assert anyio.run(graph_of, engine) == expected
    finally:
        engine.close()


def test_drop_lbug_wal_cannot_help_a_corrupt_database_file(home: Path) -> None:
    _corrupt_database(home / "db" / "liminis.db")
    engine = _degraded(home)
    try:
        result = anyio.run(_recover, engine, "drop_lbug_wal")
        assert result == {
            "strategy": "drop_lbug_wal",
            "success": False,
            "error": DID_NOT_REOPEN,
            "restart_required": False,
        }
        assert engine.state.degraded_reason == DEGRADED_DB_OPEN_FAILED
        # ...a later strategy still works on the same engine.
        assert anyio.run(_recover, engine, "rebuild_from_workspace_wal")["success"] is True
    finally:
        engine.close()


def test_drop_lbug_wal_needs_a_database_file(home: Path) -> None:
    db = home / "db" / "liminis.db"
    _corrupt_database(db)
    engine = _degraded(home)
    db.unlink()
    try:
        result = anyio.run(_recover, engine, "drop_lbug_wal")
        assert result["success"] is False
        assert result["error"] == (
            f"drop_lbug_wal requires an existing checkpoint file; none found at {db}"
        )
    finally:
        engine.close()


def test_recover_full_reopens_at_the_checkpoint_and_replays_the_tail(home: Path) -> None:
    db = home / "db" / "liminis.db"
    checkpoint = db.read_bytes()
    engine = open_engine(_settings(home))
    anyio.run(dispatch, engine, "knowledge_assert_entity", {"name": "After the checkpoint"})
    expected = anyio.run(graph_of, engine)
    engine.close()
    db.write_bytes(checkpoint)  # the database is one write behind its WAL...
    (home / "db" / "liminis.db.wal").write_bytes(b"\x00garbage" * 512)  # ...its journal lost
    engine = degraded_engine(_settings(home), DEGRADED_DB_OPEN_FAILED)
    try:
        result = anyio.run(dispatch, engine, "knowledge_recover_full", {})
        assert result == {
            "success": True,
            "recovery_needed": True,
            "episodes_before": 2,
            "mutations_replayed": 1,
            "episodes_after": 2,
            "indexes_rebuilt": True,
        }
        assert anyio.run(graph_of, engine) == expected
        assert len(list((home / "db").glob("liminis.db.wal.corrupt-*"))) == 1
    finally:
        engine.close()


def test_recover_full_falls_back_to_a_full_rebuild(home: Path, expected: dict[str, Any]) -> None:
    _corrupt_database(home / "db" / "liminis.db")
    engine = _degraded(home)
    try:
        result = anyio.run(dispatch, engine, "knowledge_recover_full", {})
        assert result["success"] is True and result["episodes_before"] == 0
        assert result["episodes_after"] == 2 and result["mutations_replayed"] > 0
        assert anyio.run(graph_of, engine) == expected
    finally:
        engine.close()


# -- errors --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({}, "strategy is required"),
        ({"strategy": ""}, "strategy is required"),
        ({"strategy": None}, "strategy is required"),
        ({"strategy": "pray"}, "Unknown strategy: pray"),
    ],
)
def test_a_missing_or_unknown_strategy_is_an_error_even_when_degraded(
    home: Path, params: dict[str, Any], message: str
) -> None:
    _corrupt_database(home / "db" / "liminis.db")
    engine = _degraded(home)
    try:
        with pytest.raises(InvalidRequestError) as err:
            anyio.run(dispatch, engine, "knowledge_recover", params)
        assert err.value.message == message and err.value.field == "strategy"
    finally:
        engine.close()


def test_recovery_is_refused_while_the_write_lock_is_held(home: Path) -> None:
    _corrupt_database(home / "db" / "liminis.db")
    engine = _degraded(home)
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with exclusive.write_lock(engine):
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(10)
        for method, params in [
            ("knowledge_recover", {"strategy": "rebuild_from_workspace_wal"}),
            ("knowledge_recover_full", {}),
        ]:
            with pytest.raises(ConflictError) as err:
                anyio.run(dispatch, engine, method, params)
            assert err.value.wire_message() == "IPC error: Recovery already in progress"
        assert engine.state.degraded_reason == DEGRADED_DB_OPEN_FAILED
    finally:
        release.set()
        holder.join()
        engine.close()


def test_the_journal_quarantine_picks_a_free_name(tmp_path: Path) -> None:
    db = tmp_path / "liminis.db"
    assert quarantine_journal(db, "20260101-000000") is None
    for _ in range(2):
        Path(f"{db}.wal").write_text("j")
        quarantine_journal(db, "20260101-000000")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "liminis.db.wal.corrupt-20260101-000000",
        "liminis.db.wal.corrupt-20260101-000000-1",
    ]


# -- over the socket: the service keeps its engine, now healthy ----------------------------------


def test_the_service_recovers_in_place_over_json_rpc(home: Path) -> None:
    settings = _settings(home)
    _corrupt_database(settings.db_path)
    with running_server(settings, self_recover=False) as (server, path, _):
        wait_settled(server)
        engine = server.engine
        with RpcClient(path) as client:
            assert client.call("health_check")["state"] == "degraded"
            with pytest.raises(RpcError) as err:
                client.call("knowledge_recover", {"strategy": "nope"})
            assert (err.value.code, err.value.message) == (
                -32000,
                "IPC error: Unknown strategy: nope",
            )
            result = client.call("knowledge_recover", {"strategy": "rebuild_from_workspace_wal"})
            assert result["success"] is True
            assert client.call("health_check")["state"] == "healthy"
            assert client.call("knowledge_status")["episode_count"] == 2
        assert server.engine is engine


def test_recovery_lets_running_reads_finish_before_closing_the_database(healthy: Engine) -> None:
    reading, release = threading.Event(), threading.Event()
    results: list[dict[str, Any]] = []

    def long_read() -> None:
        with healthy.reader() as conn:
            reading.set()
            assert release.wait(10)
            assert conn.rows("MATCH (e:Entity) RETURN count(*)") == [[4]]

    def recover() -> None:
        results.append(anyio.run(_recover, healthy, "rebuild_from_workspace_wal"))

    reader = threading.Thread(target=long_read)
    reader.start()
    assert reading.wait(10)
    recovery = threading.Thread(target=recover)
    recovery.start()
    recovery.join(0.3)
    assert recovery.is_alive() and not results  # waiting for the read
    with pytest.raises(UnavailableError):  # new reads meanwhile: degraded, not a hang
        anyio.run(dispatch, healthy, "knowledge_list_entities", {})
    release.set()
    reader.join(10)
    recovery.join(30)
    assert results and results[0]["success"] is True
    assert anyio.run(dispatch, healthy, "knowledge_status", {})["entity_count"] == 4
