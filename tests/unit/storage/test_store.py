"""lcg.storage on a real Kuzu database: migration 003 (no full-text index), the rollback
hazard's remedy, and the batched replace-or-create writes of graph.py."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from lcg.errors import StorageError
from lcg.models import EmbeddingRow, Entity, Episode, Fact
from lcg.storage import graph, history, search_rows
from lcg.storage import store as store_module
from lcg.storage.schema import FULLTEXT_INDEXES, MIGRATIONS
from lcg.storage.store import EngineMismatchError, Store, database_engine, default_engine, pool_mb

T0 = datetime(2024, 1, 1, tzinfo=UTC)

# What migration 002 used to create (the columns only matter to build them here).
_OLD_INDEXES = {
    "Entity": "['name', 'summary']",
    "Fact": "['name', 'fact']",
    "Episode": "['content', 'source_description']",
}


def _indexes(store: Store) -> set[str]:
    """The names of the secondary indexes (LadybugDB also lists each primary key's hash index,
    as `_PK`; Kuzu 0.11.3 does not)."""
    with store.writer() as w:
        return {row[1] for row in w.rows("CALL SHOW_INDEXES() RETURN *") if row[2] != "HASH"}


def _entity(uuid: str, name: str, summary: str = "") -> Entity:
    return Entity(uuid=uuid, group_id="g", name=name, summary=summary, created_at=T0)


def _fact(uuid: str, source: str, target: str, text: str = "knows") -> Fact:
    return Fact(
        uuid=uuid,
        group_id="g",
        source_uuid=source,
        target_uuid=target,
        name="KNOWS",
        fact=text,
        created_at=T0,
    )


def _hops(store: Store) -> set[tuple[str, str]]:
    with store.read() as r:
        out = r.rows("MATCH (a:Entity)-[:RELATES_TO]->(f:Fact) RETURN a.uuid, f.uuid")
        into = r.rows("MATCH (f:Fact)-[:RELATES_TO]->(b:Entity) RETURN f.uuid, b.uuid")
    return {(a, b) for a, b in out + into}


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "db", buffer_pool_mb=128)


def test_a_new_database_has_no_fulltext_index(store: Store) -> None:
    try:
        assert _indexes(store) == set()
        assert store.schema_version == len(MIGRATIONS) == 3
    finally:
        store.close()


def test_migration_003_drops_the_fulltext_indexes_of_an_older_database(tmp_path: Path) -> None:
    if default_engine() != "kuzu":
        pytest.skip("full-text indexes existed only in Kuzu databases (LadybugDB has no FTS)")
    path = tmp_path / "db"
    old = Store(path, buffer_pool_mb=128)
    with old.transaction() as tx:
        graph.upsert_entities(tx, [_entity("e1", "Ada Lovelace", "mathematician")])
    # Make it a schema-2 database: the indexes 002 built, and 003 not yet recorded.
    with old.writer() as w:
        for table, name in FULLTEXT_INDEXES:
            w.run(
                f"CALL CREATE_FTS_INDEX('{table}', '{name}', {_OLD_INDEXES[table]}, "
                "stemmer := 'porter')"
            )
        w.run("MATCH (m:Meta {key: 'migration:003_drop_fulltext_indexes'}) DELETE m")
        w.run("MATCH (m:Meta {key: 'schema_version'}) SET m.value = '2'")
    assert _indexes(old) == {name for _, name in FULLTEXT_INDEXES}
    old.close()

    store = Store(path, buffer_pool_mb=128)
    try:
        assert _indexes(store) == set()
        assert store.schema_version == 3
        assert store.migrate() == []  # recorded: not applied twice
        # Reads and writes work on the migrated database, several rows per statement included.
        with store.transaction() as tx:
            graph.upsert_entities(
                tx,
                [_entity("e1", "Ada King", "countess"), _entity("e2", "Charles Babbage")],
            )
            graph.upsert_facts(tx, [_fact("f1", "e1", "e2")])
        with store.read() as r:
            found = graph.entities_by_uuids(r, ["e1", "e2"])
            assert found["e1"].name == "Ada King" and found["e2"].name == "Charles Babbage"
            assert [f.uuid for f in graph.facts_with_hops(r, ["g"])] == ["f1"]
    finally:
        store.close()


def test_writes_after_a_rollback_of_updates_succeed(store: Store) -> None:
    """Kuzu 0.11.3: after a rolled-back transaction updated rows, a later write to them fails
    ("write-write conflict") or segfaults unless a CHECKPOINT ran in between (the store's
    remedy). Without it this fails within a few rounds."""
    try:
        with store.transaction() as tx:
            graph.upsert_entities(tx, [_entity(f"e{i}", f"name {i}") for i in range(30)])
        for round_ in range(15):
            rows = [_entity(f"e{i}", f"rolled {round_}") for i in range(round_, round_ + 10)]
            with pytest.raises(RuntimeError), store.transaction() as tx:
                graph.upsert_entities(tx, rows)
                raise RuntimeError("abandon the transaction")
            with store.transaction() as tx:
                graph.upsert_entities(tx, [replace(e, name=f"kept {round_}") for e in rows])
        assert store.rollbacks == 15
        with store.read() as r:
            names = {e.uuid: e.name for e in graph.entities_in_groups(r, ["g"])}
        assert names["e14"] == "kept 14" and names["e0"] == "kept 0" and names["e29"] == "name 29"
    finally:
        store.close()


def test_batched_upserts_keep_replace_or_create_semantics(store: Store) -> None:
    try:
        with store.transaction() as tx:
            graph.upsert_entities(tx, [_entity("a", "A"), _entity("b", "B", "first")])
        with store.transaction() as tx:
            graph.upsert_entities(
                tx,
                [
                    _entity("b", "B", "second"),  # replaced ...
                    _entity("c", "C", "early"),  # created ...
                    _entity("c", "C", "late"),  # ... and the last row of a uuid wins
                    _entity("b", "B", "third"),
                    _entity("d", "D"),
                ],
            )
            graph.upsert_facts(
                tx,
                [
                    _fact("f1", "a", "b"),  # both endpoints exist: both hops
                    _fact("f2", "a", "missing"),  # a missing endpoint: the hop it can
                    _fact("f3", "c", "d", "old"),
                    _fact("f3", "c", "d", "new"),  # the last row of a uuid wins
                ],
            )
        with store.read() as r:
            ents = graph.entities_by_uuids(r, ["a", "b", "c", "d"])
            assert {u: e.summary for u, e in ents.items()} == {
                "a": "",
                "b": "third",
                "c": "late",
                "d": "",
            }
            assert graph.facts_by_uuids(r, ["f3"])["f3"].fact == "new"
        assert _hops(store) == {("a", "f1"), ("f1", "b"), ("a", "f2"), ("c", "f3"), ("f3", "d")}

        with store.transaction() as tx:  # moved endpoints re-hop; unchanged ones keep theirs
            graph.upsert_facts(tx, [_fact("f1", "c", "d"), _fact("f3", "c", "d", "newer")])
        assert _hops(store) == {("c", "f1"), ("f1", "d"), ("a", "f2"), ("c", "f3"), ("f3", "d")}
        with store.read() as r:
            assert graph.facts_by_uuids(r, ["f3"])["f3"].fact == "newer"
    finally:
        store.close()


def _embedding(kind: str, owner: str, text_hash: str) -> EmbeddingRow:
    return EmbeddingRow(kind=kind, owner=owner, group_id="g", text_hash=text_hash, vec=None)


def _mentions(store: Store) -> list[tuple[str, str]]:
    with store.read() as r:
        rows = r.rows("MATCH (ep:Episode)-[:MENTIONS]->(e:Entity) RETURN ep.uuid, e.uuid")
    return sorted((a, b) for a, b in rows)


@pytest.fixture(params=[1e6, 0.0], ids=["per-key", "unwind"])
def lookup_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A huge fixed UNWIND cost makes every keyed statement go key by key; none, one UNWIND."""
    monkeypatch.setattr(store_module, "_UNWIND_BASE_MS", request.param)


@pytest.mark.usefixtures("lookup_path")
def test_keyed_writes_are_replace_or_create_and_idempotent_either_way(store: Store) -> None:
    try:
        with store.transaction() as tx:
            graph.upsert_entities(tx, [_entity("a", "A"), _entity("b", "B"), _entity("c", "C")])
            graph.add_episodes(tx, [Episode(uuid="ep", group_id="g", name="n", content="x")])
            graph.put_embeddings(tx, [_embedding("entity_name", "a", "h1")])
            graph.add_mentions(tx, "ep", ["a"])
        with store.transaction() as tx:
            graph.put_embeddings(
                tx,
                [
                    _embedding("entity_name", "a", "h2"),  # replaced ...
                    _embedding("entity_name", "b", "early"),  # created ...
                    _embedding("entity_name", "b", "late"),  # ... the last row of a key wins
                    _embedding("fact", "f", "hf"),
                ],
            )
            # An existing edge, a repeat, a new one and a missing entity: each edge once.
            graph.add_mentions(tx, "ep", ["a", "b", "b", "missing"])
            graph.add_mentions(tx, "no-such-episode", ["a"])
        with store.read() as r:
            hashes = graph.stored_text_hashes(r, ["entity_name:a", "entity_name:b", "fact:f"])
            owners = r.rows("MATCH (v:Embedding) RETURN v.key, v.owner, v.kind ORDER BY v.key")
        assert hashes == {"entity_name:a": "h2", "entity_name:b": "late", "fact:f": "hf"}
        assert owners == [
            ["entity_name:a", "a", "entity_name"],
            ["entity_name:b", "b", "entity_name"],
            ["fact:f", "f", "fact"],
        ]
        assert _mentions(store) == [("ep", "a"), ("ep", "b")]

        with store.transaction() as tx:  # a replay of the same writes changes nothing
            graph.add_mentions(tx, "ep", ["a", "b", "missing"])
            graph.put_embeddings(tx, [_embedding("fact", "f", "hf")])
            # The stored keys as the caller knows them (a replay): an update, not a second row.
            graph.put_embeddings(tx, [_embedding("fact", "f", "hf")], {"fact:f", "other"})
            graph.delete_embeddings(tx, ["entity_name:b", "entity_name:b", "absent"])
        assert _mentions(store) == [("ep", "a"), ("ep", "b")]
        with store.read() as r:
            assert graph.stored_text_hashes(r, ["entity_name:a", "entity_name:b", "fact:f"]) == {
                "entity_name:a": "h2",
                "fact:f": "hf",
            }
    finally:
        store.close()


def test_point_limit_grows_with_the_table(store: Store) -> None:
    """Kuzu plans an UNWIND key lookup as a scan of the table, so keys go one by one up to a
    limit that grows with the table; LadybugDB looks them up through the primary key, so
    every lookup of two keys or more is one UNWIND, whatever the table holds."""
    try:
        with store.transaction() as tx:
            empty = tx.point_limit("Entity")
            tx.run("UNWIND range(1, 50000) AS i CREATE (:Entity {uuid: concat('u', string(i))})")
        with store.writer() as w:
            if store.traits.unwind_lookups:
                assert empty == w.point_limit("Entity") == 1
                return
            assert w.table_rows("Entity") == 0  # an estimate, recounted only now and then
            for _ in range(store_module._RECOUNT_EVERY):
                w.table_rows("Entity")
            assert w.table_rows("Entity") == 50000
            assert w.point_limit("Entity") > empty + 10
    finally:
        store.close()


@pytest.mark.usefixtures("lookup_path")
def test_facts_around_finds_each_fact_once_by_either_endpoint(store: Store) -> None:
    try:
        with store.transaction() as tx:
            graph.upsert_entities(tx, [_entity("a", "A"), _entity("b", "B"), _entity("c", "C")])
            graph.upsert_facts(
                tx,
                [
                    _fact("ab", "a", "b"),
                    _fact("ba", "b", "a"),
                    _fact("bc", "b", "c"),
                    _fact("ax", "a", "gone"),  # its target is missing: it has one hop only
                ],
            )
        with store.read() as r:

            def around(*uuids: str, groups: list[str] | None = None) -> list[str]:
                return sorted(f.uuid for f in history.facts_around(r, uuids, groups))

            assert around("a") == ["ab", "ax", "ba"]
            assert around("a", "b") == ["ab", "ax", "ba", "bc"]  # each fact once
            assert around("c") == ["bc"]
            assert around("gone") == []
            assert around("a", groups=["other"]) == []
    finally:
        store.close()


def test_many_new_facts_are_created_with_the_hops_their_endpoints_allow(store: Store) -> None:
    """Many new facts in a small Entity table go in by one `UNWIND` (a code ingest's thousands
    into a new workspace): each gets both hops when its endpoints exist, only the hops it can
    when one is missing (replayed or cross-group data), and the rows equal what the one-by-one
    path writes."""
    try:
        many = graph._UNWIND_MIN_FACTS + 5  # in a table below `_UNWIND_MAX_ENTITIES`
        entities = [_entity(f"e{i}", f"n{i}") for i in range(many + 1)]
        facts = [_fact(f"f{i}", f"e{i}", f"e{i + 1}", f"fact {i}") for i in range(many)]
        facts.append(_fact("dangling", "e0", "missing"))
        with store.transaction() as tx:
            graph.upsert_entities(tx, entities)
            graph.upsert_facts(tx, facts)
        with store.writer() as r:
            stored = graph.facts_by_uuids(r, [f.uuid for f in facts])
            assert stored == {f.uuid: f for f in facts}
            wired = {f.uuid for f in graph.facts_with_hops(r, ["g"])}
            assert wired == {f.uuid for f in facts} - {"dangling"}
            hop = r.rows(
                "MATCH (a:Entity)-[:RELATES_TO]->(f:Fact {uuid: 'dangling'}) RETURN a.uuid", {}
            )
            assert hop == [["e0"]]
            around = graph.neighbor_facts(r, "e1", ["g"], 10)
            assert sorted(f.uuid for f in around) == ["f0", "f1"]
    finally:
        store.close()


def test_the_buffer_pool_is_sized_to_the_database(tmp_path: Path) -> None:
    """Unset (0), the pool is half the database file within 256..1024 MiB, and 1024 MiB for a
    database not created yet; a configured size is kept (1 GiB for every workspace)."""
    db = tmp_path / "graph.db"
    assert pool_mb(db) == 1024  # a rebuild bulk-loads a new database
    db.write_bytes(b"x" * 4096)
    assert pool_mb(db) == 256
    with db.open("r+b") as fh:
        fh.truncate(1200 * 2**20)  # sparse: no disk used
    assert pool_mb(db) == 600
    with db.open("r+b") as fh:
        fh.truncate(5000 * 2**20)
    assert pool_mb(db) == 1024
    assert pool_mb(db, 128) == 128


@pytest.mark.usefixtures("lookup_path")
def test_mentions_beyond_one_chunk_are_created_once_each(store: Store) -> None:
    """19 entities (more than two statements' worth) with a repeat and, in the second chunk, a
    missing entity: each stored one gets exactly one edge, for a new episode and an old one."""
    names = [f"e{n:02d}" for n in range(19)]
    try:
        with store.transaction() as tx:
            graph.upsert_entities(tx, [_entity(u, u.upper()) for u in names])
            graph.add_episodes(
                tx,
                [
                    Episode(uuid="new", group_id="g", name="n", content="x"),
                    Episode(uuid="old", group_id="g", name="n", content="y"),
                ],
            )
            graph.add_mentions(
                tx, "new", [*names[:12], "missing", names[3], *names[12:]], new_episode=True
            )
            graph.add_mentions(tx, "old", names[5:7])
        with store.transaction() as tx:  # two edges exist already: the other 17 are added
            graph.add_mentions(tx, "old", [names[0], *names, "missing", names[18]])
        assert _mentions(store) == sorted([("new", u) for u in names] + [("old", u) for u in names])
    finally:
        store.close()


def test_the_engine_of_a_database_is_told_by_its_header_then_its_stamp(tmp_path: Path) -> None:
    path = tmp_path / "db"
    assert database_engine(path) is None
    Store(path, buffer_pool_mb=64).close()
    engine = default_engine()
    assert database_engine(path) == engine
    Path(f"{path}.engine").unlink()  # a backup restored without its stamp: the header says
    assert database_engine(path) == engine
    other = tmp_path / "other"
    other.write_bytes(b"\0" * 64)  # no header an engine wrote, no stamp: a pre-stamp database
    assert database_engine(other) == "kuzu"
    Path(f"{other}.engine").write_text('{"engine": "ladybug"}')
    assert database_engine(other) == "ladybug"
    foreign = tmp_path / "foreign"
    foreign.write_bytes((b"KUZU" if engine == "ladybug" else b"LBUG") + b"\0" * 60)
    with pytest.raises(EngineMismatchError):  # refused before the engine touches the file
        Store(foreign, buffer_pool_mb=64, engine=engine)
    assert foreign.read_bytes()[4:] == b"\0" * 60


def test_a_failed_bulk_copy_into_a_fresh_database_leaves_a_working_store(
    tmp_path: Path,
) -> None:
    """A CHECKPOINT of a handle whose COPY was rolled back can crash either engine (its close
    runs one too), so a failed bulk load into a database that holds only bulk loads starts it
    over empty (the next catch-up loads it again from the WAL), on Kuzu as well: there the
    rollback and checkpoint it had before left a primary-key lookup missing rows that a scan
    found. The store goes on: migrated, writable, readable."""
    import pyarrow as pa

    path = tmp_path / "db"
    store = Store(path, buffer_pool_mb=64)
    try:
        with pytest.raises(StorageError), store.transaction() as tx:
            tx.bulk_loads += 1  # what storage.bulk.load_folded counts
            tx.copy_from("Meta", pa.table({"key": ["dup", "dup"], "value": ["1", "2"]}))
        assert store.rollbacks == 1
        assert database_engine(path) == store.engine
        assert store.schema_version == len(MIGRATIONS)
        with store.transaction() as tx:
            tx.run("MERGE (m:Meta {key: $k}) SET m.value = $v", {"k": "dup", "v": "3"})
        with store.read() as r:
            assert r.scalar("MATCH (m:Meta {key: $k}) RETURN m.value", {"k": "dup"}) == "3"
    finally:
        store.close()


@pytest.mark.parametrize("through_file", [False, True])
def test_a_bulk_copy_keeps_no_pyarrow_table_alive_and_leaves_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, through_file: bool
) -> None:
    """LadybugDB 0.22 keeps the pyarrow table a COPY scanned until the connection closes (at
    1M facts a bulk load's tables, ~0.8 GB, stayed allocated beside the search build until
    the handle was reopened): the binding's cached statement that holds it is dropped after
    the COPY, or (`through_file`: a binding that does not expose it) the COPY reads a Parquet
    file of the table, removed when the COPY ends, whether it succeeded or failed."""
    import gc

    import pyarrow as pa

    if through_file:
        monkeypatch.setattr(store_module, "holds_scans", lambda raw: False)
    path = tmp_path / "db"
    store = Store(path, buffer_pool_mb=64)
    try:
        before = pa.total_allocated_bytes()
        with store.transaction() as tx:
            tx.bulk_loads += 1  # what storage.bulk.load_folded counts
            keys = [f"k{i:06d}" for i in range(20_000)]
            tx.copy_from("Meta", pa.table({"key": keys, "value": ["v" * 40] * len(keys)}))
            gc.collect()
            kept = pa.total_allocated_bytes() - before
        assert kept < 64 * 1024  # outside the transaction: a failure here must not roll it back
        with store.read() as r:
            assert r.scalar("MATCH (m:Meta) WHERE m.key STARTS WITH 'k' RETURN count(*)") == 20_000
        with pytest.raises(StorageError), store.transaction() as tx:
            tx.bulk_loads += 1
            tx.copy_from("Meta", pa.table({"key": ["k000001"], "value": ["again"]}))
        assert not [p.name for p in path.parent.iterdir() if ".copy-" in p.name]
    finally:
        store.close()
    left = path.parent / f".{path.name}.copy-killed.parquet"  # as a killed process leaves one
    left.write_bytes(b"")
    Store(path, buffer_pool_mb=64).close()
    assert not left.exists()


def test_hit_lookups_keep_no_buffer_pool_a_whole_group_read_needs(tmp_path: Path) -> None:
    """Search hits are read back by uuid with cached statements of every key count (1-16) on
    each connection, for entities, facts with their hops and the provenance of endpoints; a
    whole-group column read (the search index's rebuild) must still fit in the pool after.
    LadybugDB 0.22 keeps ~4.5 MB of pool per live 16-branch `UNION ALL` statement: at 1M facts
    the statement caches filled the pool and `fact_columns` failed ("the buffer pool is full")."""
    store = Store(tmp_path / "db", buffer_pool_mb=64)
    try:
        n, m = 5_000, 1_000  # entities, facts (a fact costs ~4 ms to write here)
        entities = [
            _entity(f"e{i:05d}", f"name {i}", f"summary of entity {i} " * 3) for i in range(n)
        ]
        facts = [
            _fact(f"f{i:05d}", f"e{i:05d}", f"e{(i + 1) % n:05d}", f"fact {i} " * 4)
            for i in range(m)
        ]
        with store.transaction() as tx:
            for lo in range(0, n, 500):
                graph.upsert_entities(tx, entities[lo : lo + 500])
            graph.upsert_facts(tx, facts)
        for _ in range(2):  # every reader connection of the pool, as concurrent reads use them
            with store.read() as r:
                for count in range(1, 17):
                    for start in range(0, 48, 16):
                        keys = [f"{i:05d}" for i in range(start * count, start * count + count)]
                        assert len(graph.entities_of_hits(r, [f"e{k}" for k in keys])) == count
                        assert len(graph.facts_of_hits(r, [f"f{k}" for k in keys])) == count
                        fact_keys = [f"f{k}" for k in keys]
                        rows = history._union_rows(r, history._UNION_ROW_OUT, fact_keys)
                        assert len(rows) == count
        with store.read() as r:
            assert len(search_rows.fact_columns(r, "g", 2**62, -(2**62)).uuid) == m
            assert len(search_rows.entity_columns(r, "g").uuid) == n
    finally:
        store.close()
