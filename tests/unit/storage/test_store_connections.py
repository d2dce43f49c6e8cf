"""Pooled reader connections and prepared statements, on a real Kuzu
database: a nested take of a second reader is refused instead of deadlocking the pool, and
every connection prepares a parameterised statement once (Kuzu 0.11.3 leaks native memory on
each unprepared `execute(text, params)`)."""

from __future__ import annotations

import dataclasses
import gc
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

from lcg import Engine
from lcg.service.registry import dispatch
from lcg.storage import graph
from lcg.storage import store as store_module
from lcg.storage.schema import MIGRATIONS
from lcg.storage.store import ReentrantReadError, Store, schema_version

LOOKUP = "MATCH (m:Meta) WHERE m.key = $k RETURN m.value"


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "db", buffer_pool_mb=64, readers=2)


def test_a_second_reader_while_holding_one_is_refused_not_awaited(store: Store) -> None:
    with store.read() as conn:
        with pytest.raises(ReentrantReadError, match="pass it down"), store.read():
            pass
        # The connection taken is still usable, and the pool is intact afterwards.
        assert schema_version(conn) == len(MIGRATIONS)
    with store.read(), store.writer():  # the writer is not pooled: allowed while reading
        pass
    taken: list[object] = []
    with store.read() as a:
        done = threading.Event()

        def other_thread() -> None:  # a fresh thread holds nothing: it gets the other reader
            with store.read() as b:
                taken.append(b)
            done.set()

        threading.Thread(target=other_thread).start()
        assert done.wait(10)
        assert taken and taken[0] is not a


def test_a_worker_thread_started_while_holding_a_reader_is_refused_too(store: Store) -> None:
    async def nested() -> None:
        with store.read():
            await anyio.to_thread.run_sync(lambda: store.read().__enter__())

    with pytest.raises(ReentrantReadError):
        anyio.run(nested)
    with store.read() as conn:  # nothing leaked: both readers are back
        with pytest.raises(ReentrantReadError):
            store.read().__enter__()
        assert conn.scalar("RETURN 1") == 1


def test_schema_version_property_is_refused_while_holding_a_reader(store: Store) -> None:
    assert store.schema_version == len(MIGRATIONS)
    with store.read() as conn:
        with pytest.raises(ReentrantReadError):
            _ = store.schema_version
        assert schema_version(conn) == len(MIGRATIONS)


def test_readers_prepare_each_parameterised_statement_once(store: Store) -> None:
    with store.read() as conn:
        before = conn.prepares
        for i in range(50):
            conn.rows(LOOKUP, {"k": f"key-{i}"})
        assert conn.prepares - before == 1
        assert conn.scalar(LOOKUP, {"k": "schema_version"}) == str(len(MIGRATIONS))
        assert conn.prepares - before == 1


def test_a_schema_change_on_the_writer_empties_every_cache(store: Store) -> None:
    with store.writer() as w:
        w.run("CREATE NODE TABLE T(id STRING PRIMARY KEY, x INT64)")
        w.run("CREATE (:T {id: $i, x: $x})", {"i": "a", "x": 1})
    query = "MATCH (t:T) WHERE t.id = $i RETURN t.x"
    with store.read() as conn:
        assert conn.rows(query, {"i": "a"}) == [[1]]
    with store.writer() as w:  # raw DDL, as knowledge_query_cypher may send
        w.run("DROP TABLE T")
        w.run("CREATE NODE TABLE T(id STRING PRIMARY KEY, y STRING, x INT64)")
        w.run("CREATE (:T {id: $i, y: $y, x: $x})", {"i": "a", "y": "z", "x": 2})
    for _ in range(2):  # both pooled readers see the new table, each prepared afresh
        with store.read() as conn:
            before = conn.prepares
            assert conn.rows(query, {"i": "a"}) == [[2]]
            assert conn.prepares == before + 1


def test_read_only_raw_cypher_on_the_writer_keeps_every_cache(store: Store) -> None:
    """knowledge_query_cypher runs a read-only statement on the writer; it cannot change the
    schema, so no connection re-prepares after it (each re-prepare keeps native memory: 16
    clients mixing it with other reads grew by ~1 GB in three minutes)."""
    for _ in range(2):  # the pool hands out its two readers in turn: both prepare LOOKUP
        with store.read() as conn:
            conn.rows(LOOKUP, {"k": "x"})
    with store.writer() as w:
        w.columns_and_rows("MATCH (m:Meta) RETURN m.key, m.value ORDER BY m.key LIMIT 5")
        w.rows("MATCH (e:Entity) WHERE e.name CONTAINS 'table' RETURN count(*)")
        w.rows("MATCH (a:Entity)-[:RELATES_TO]->(f:Fact) RETURN count(f)")
    for _ in range(2):
        with store.read() as conn:
            before = conn.prepares
            conn.rows(LOOKUP, {"k": "x"})
            assert conn.prepares == before


@pytest.mark.parametrize(
    ("query", "schema"),
    [
        ("MATCH (n) RETURN n LIMIT 3", False),
        ("MATCH (e:Entity) SET e.summary = 'x'", False),
        ("MATCH (e:Entity) WHERE e.name = 'drop table' RETURN e", False),
        ("CREATE (:Meta {key: 'a', value: 'b'})", False),
        ("CREATE NODE TABLE T(id STRING PRIMARY KEY)", True),
        ("create rel table R(FROM A TO B)", True),
        ("DROP TABLE T", True),
        ("ALTER TABLE Entity ADD x INT64", True),
        ("CALL CREATE_FTS_INDEX('Entity', 'i', ['name'])", True),
        ("ROLLBACK", True),
    ],
)
def test_which_raw_statements_may_change_the_schema(query: str, schema: bool) -> None:
    assert store_module.may_change_schema(query) is schema


def test_the_statement_cache_is_bounded(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_module, "_PREPARED_MAX", 4)
    with store.read() as conn:
        for i in range(10):
            conn.rows(f"MATCH (m:Meta) WHERE m.key = $k RETURN m.value, {i}", {"k": "x"})
        assert conn.prepared_count == 4
        before = conn.prepares
        conn.rows("MATCH (m:Meta) WHERE m.key = $k RETURN m.value, 9", {"k": "x"})  # still there
        assert conn.prepares == before
        conn.rows("MATCH (m:Meta) WHERE m.key = $k RETURN m.value, 0", {"k": "x"})  # evicted
        assert conn.prepares == before + 1


def _hold_reader(store: Store, seconds: float) -> threading.Event:
    """Hold a reader in another thread for `seconds`; the event is set once it is held."""
    held = threading.Event()

    def hold() -> None:
        with store.read():
            held.set()
            time.sleep(seconds)

    threading.Thread(target=hold, daemon=True).start()
    assert held.wait(10)
    return held


def test_a_draining_checkpoint_waits_for_running_readers(store: Store) -> None:
    with store.transaction() as tx:
        tx.run("MERGE (m:Meta {key: $k}) SET m.value = 'x'", {"k": "probe"})
    assert store.commits_since_checkpoint == 1
    _hold_reader(store, 0.5)
    assert store.checkpoint() is False  # a reader is active: not now
    assert store.commits_since_checkpoint == 1
    assert store.checkpoint(drain=10) is True  # waits for it to finish instead
    assert store.commits_since_checkpoint == 0
    with store.read() as conn:  # reads are open again
        assert conn.scalar("MATCH (m:Meta {key: $k}) RETURN m.value", {"k": "probe"}) == "x"


def test_a_drain_that_times_out_gives_up_and_reopens_reads(store: Store) -> None:
    _hold_reader(store, 2.0)
    assert store.checkpoint(drain=0.2) is False
    with store.read() as conn:  # the other reader is free, and reads were not left closed
        assert conn.scalar("RETURN 1") == 1
        assert store.checkpoint(drain=5) is False  # never drains while holding a reader


def test_the_database_handle_is_reopened_after_enough_checkpoints(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kuzu keeps ~289 KB per CHECKPOINT until its Database is closed: every
    few checkpoints that run with no reader checked out reopen the handle, and everything goes
    on as before: committed rows, prepared statements, both reader connections. (LadybugDB
    keeps none, so it never reopens for that; the reopen itself serves its COPY recycle.)"""
    monkeypatch.setattr(store, "traits", dataclasses.replace(store.traits, recycle_every=3))
    put = "MERGE (m:Meta {key: $k}) SET m.value = $v"
    for i in range(3):
        with store.transaction() as tx:
            tx.run(put, {"k": f"k{i}", "v": str(i)})
        assert store.recycles == 0
        assert store.checkpoint() is True
    assert store.recycles == 1 and store.checkpoints_since_open == 0
    with store.transaction() as tx:  # the writer's statements are prepared afresh
        tx.run(put, {"k": "k3", "v": "3"})
    with store.read() as first:
        _hold_reader(store, 0.3)  # the other reader is checked out meanwhile
        assert first.rows(
            "MATCH (m:Meta) WHERE m.key STARTS WITH $p RETURN m.value ORDER BY m.value", {"p": "k"}
        ) == [["0"], ["1"], ["2"], ["3"]]
    # A forced checkpoint (close, rollback) never reopens the handle under its caller.
    for _ in range(4):
        store.checkpoint(force=True)
    assert store.recycles == 1
    assert store.wait_idle(10)  # the other reader's hold has ended
    assert store.checkpoint() is True  # due, and no reader checked out: reopened
    assert store.recycles == 2


def test_commits_trigger_a_checkpoint_under_constant_reads(engine: Engine) -> None:
    """Kuzu holds updated rows' old versions in memory until a checkpoint; the journal-size
    trigger alone let a steady stream of small updates grow the server by ~300 KB each."""
    stop = threading.Event()

    def read_forever() -> None:  # a reader is nearly always checked out, as under load
        while not stop.is_set():
            with engine.reader() as conn:
                conn.rows("RETURN 1")
                time.sleep(0.005)

    reader = threading.Thread(target=read_forever, daemon=True)
    reader.start()
    try:
        highest = 0
        for i in range(250):
            anyio.run(dispatch, engine, "knowledge_assert_entity", {"name": f"e{i % 10}"})
            highest = max(highest, engine._mode.journal().commits_since_checkpoint)
    finally:
        stop.set()
        reader.join(10)
    assert highest <= 200  # the drain threshold: never more commits owed than that
    assert engine._mode.journal().commits_since_checkpoint < 200


# Kuzu 0.11.3's binding leaks one reference to every date/timestamp it converts, so each one
# read stayed in memory: knowledge_get_nodes_by_group grew the service by 20.7 MB per 1,500
# calls (storage/leaked_refs.py). Counted in Python's allocated blocks, not timed.
_TS = "timestamp('2026-01-01 10:00:00.123456') + interval(string(i) + ' seconds')"


def _seed_entities(store: Store, n: int) -> None:
    with store.transaction() as tx:
        tx.run(
            "UNWIND range(1, $n) AS i CREATE (:Entity {uuid: 'u' + string(i), group_id: 'g', "
            f"name: 'e' + string(i), labels: ['Entity'], created_at: {_TS}}})",
            {"n": n},
        )


def _blocks_kept(read: Callable[[], object], times: int) -> int:
    read()
    gc.collect()
    before = sys.getallocatedblocks()
    for _ in range(times):
        read()
    gc.collect()
    return sys.getallocatedblocks() - before


def test_reading_timestamps_keeps_nothing_in_memory(store: Store) -> None:
    _seed_entities(store, 200)
    with store.read() as conn:
        # the group read of knowledge_get_nodes_by_group: 40 x 200 timestamps, 8,000 leaked before
        kept = _blocks_kept(lambda: graph.entities_in_groups(conn, ["g"]), 40)
        assert kept < 500
        nested = "MATCH (e:Entity) RETURN e.created_at, [e.created_at], {t: e.created_at}, e"
        assert _blocks_kept(lambda: conn.rows(nested), 20) < 500  # lists, structs, nodes too
        assert _blocks_kept(lambda: conn.columns_and_rows(nested), 20) < 500  # raw Cypher's path


def _owners(container: Any, key: Any) -> int:
    """References to `container[key]` besides getrefcount's own argument."""
    return sys.getrefcount(container[key]) - 1


def test_timestamps_read_stay_valid_and_owned_once(store: Store) -> None:
    _seed_entities(store, 3)
    with store.read() as conn:
        rows = conn.rows(
            "MATCH (e:Entity) RETURN e.created_at, [e.created_at], {t: e.created_at}, e, "
            "date('2026-01-02') ORDER BY e.uuid"
        )
    owners = [
        _owners(rows[0], 0),
        _owners(rows[0][1], 0),
        _owners(rows[0][2], "t"),
        _owners(rows[0][3], "created_at"),
        _owners(rows[0], 4),
    ]
    assert owners == [1, 1, 1, 1, 1]  # the row or its container, nothing else
    kept = [rows[i][0] for i in range(3)] + [rows[0][1][0], rows[0][2]["t"], rows[0][4]]
    del rows
    gc.collect()
    first = datetime(2026, 1, 1, 10, 0, 1, 123456)
    assert kept == [
        first,
        first + timedelta(seconds=1),
        first + timedelta(seconds=2),
        first,
        first,
        date(2026, 1, 2),
    ]


def test_close_releases_the_database_while_connections_outlive_it(tmp_path: Path) -> None:
    """LadybugDB's `Database.close()` keeps the file lock (and its address-space reservation)
    while a prepared statement made from it is referenced; the connections' statement caches
    hold them, and a `Conn` may outlive its store. After close, another process opens it."""
    path = tmp_path / "db"
    store = Store(path, buffer_pool_mb=64)
    with store.read() as conn:
        conn.rows(LOOKUP, {"k": "schema_version"})
        kept = conn  # the connection, and the cache it holds, outlive the store
    store.close()
    child = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; from lcg.storage.store import Store; "
            "Store(Path(sys.argv[1]), buffer_pool_mb=64, engine=sys.argv[2]).close()",
            str(path),
            store.engine,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert child.returncode == 0, child.stderr[-2000:]
    assert kept.prepared_count == 0
