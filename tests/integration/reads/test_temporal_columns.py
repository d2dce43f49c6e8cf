"""The temporal lists answered from in-memory columns (lcg.temporal.columns) equal the store
reads they replace (`GraphReader.facts_at` / `fact_changes`) on Kuzu and on a FalkorDB server:
random histories over two groups, superseded and withdrawn facts, facts with a structural hop
removed, and pages small enough that the candidates are read in several rounds."""

from __future__ import annotations

import asyncio
import random
import shutil
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from lcg import Engine, Settings, open_engine
from lcg.engine import EpisodeCommit, Invalidation
from lcg.graph import deletes
from lcg.models import Entity, Episode, Fact, fact_to_wire
from lcg.search import factrows
from lcg.search.factrows import FactRows
from lcg.service.registry import dispatch
from lcg.storage import history
from lcg.storage.backend import GraphReader
from lcg.temporal import columns, provenance
from lcg.temporal.timeline import CHANGE_KINDS, fact_record, stable_key, successions
from lcg.timefilter import TimeFilter
from lcg.timeutil import now
from lcg.wal.changes import FactUpsert, MentionsAdd

# Both storages: the batched read (`facts_with_hops_by_uuid`) is each backend's own.
BOTH_STORAGES = True

pytestmark = pytest.mark.anyio

BASE = datetime(2020, 1, 1, tzinfo=UTC)
COLUMNS = ("valid_at", "invalid_at", "created_at", "expired_at")
KIND_COLUMN = dict(zip(CHANGE_KINDS, COLUMNS, strict=True))


def _at(day: int) -> datetime:
    return BASE + timedelta(days=day)


def _break_hop(settings: Settings, group: str, uuid: str) -> None:
    """Delete the incoming structural hop of fact `uuid` behind the engine's back (damage the
    reads must tolerate: replayed or cross-group data, a raw statement)."""
    query = f"MATCH (:Entity)-[r:RELATES_TO]->(f:Fact {{uuid: '{uuid}'}}) DELETE r"
    if settings.storage == "falkordb":
        from lcg.storage.falkordb.backend import FalkorBackend
        from lcg.storage.falkordb.keys import graph_key

        assert settings.falkordb_url is not None
        server = FalkorBackend(settings.falkordb_url)
        try:
            server.client.execute_command("GRAPH.QUERY", graph_key(group), query)
        finally:
            server.close()


async def _history(engine: Engine, settings: Settings, seed: int) -> list[str]:
    """Two groups of 12 entities and 60 facts each, times spread over 200 days (some shared,
    so entries tie on their instant); the uuids of the facts whose incoming hop was then
    deleted."""
    rng = random.Random(seed)
    broken = []
    for group in ("g1", "g2"):
        entities = [Entity(f"{group}-e{i:02d}", group, f"{group} thing {i}") for i in range(12)]
        facts = []
        for i in range(60):
            valid = _at(rng.randrange(200))
            ended = rng.random() < 0.3
            invalid = valid + timedelta(days=rng.randrange(1, 40)) if ended else None
            learned = valid + timedelta(hours=rng.choice([0, 0, rng.randrange(48)]))
            retired = None
            if ended and rng.random() < 0.5:
                retired = invalid
            elif not ended and rng.random() < 0.1:
                retired = learned + timedelta(days=3)  # withdrawn
            facts.append(
                Fact(
                    f"{group}-f{rng.randrange(16**6):06x}-{i:02d}",
                    group,
                    rng.choice(entities).uuid,
                    rng.choice(entities).uuid,
                    rng.choice(["USES", "OWNS"]),
                    f"fact {i} of {group}",
                    valid_at=valid if rng.random() > 0.05 else None,
                    invalid_at=invalid,
                    created_at=learned,
                    expired_at=retired,
                )
            )
        for n, old in enumerate([f for f in facts if f.invalid_at is not None][:6]):
            facts.append(  # its successor: same source and predicate, from when it ended
                Fact(
                    f"{group}-s{n}",
                    group,
                    old.source_uuid,
                    rng.choice(entities).uuid,
                    old.name,
                    f"successor {n} of {group}",
                    valid_at=old.invalid_at,
                    created_at=old.expired_at or old.invalid_at,
                )
            )
        episode = Episode(f"{group}-ep", group, "n", "text", created_at=_at(0))
        await engine.commit_episode(EpisodeCommit(group, episode, entities, facts))
        for fact in rng.sample(facts, 3):
            broken.append(fact.uuid)
            if settings.storage == "falkordb":
                _break_hop(settings, group, fact.uuid)
            else:
                query = f"MATCH (:Entity)-[r:RELATES_TO]->(f:Fact {{uuid: '{fact.uuid}'}}) DELETE r"
                await dispatch(engine, "knowledge_query_cypher", {"query": query})
    return broken


def _filters(rng: random.Random) -> list[TimeFilter]:
    out = [TimeFilter(as_of=_at(d)) for d in (-5, 10, 60, 120, 199, 400)]
    for _ in range(6):
        known = _at(rng.randrange(-5, 240)) if rng.random() < 0.6 else None
        as_of = _at(rng.randrange(-5, 240)) if rng.random() < 0.6 else None
        out.append(TimeFilter(as_of=as_of, known_at=known, include_invalidated=rng.random() < 0.4))
    return out


def _wire(time: TimeFilter) -> dict[str, Any]:
    params: dict[str, Any] = {}
    if time.as_of is not None:
        params["as_of"] = time.as_of.isoformat()
    if time.known_at is not None:
        params["known_at"] = time.known_at.isoformat()
    if time.include_invalidated:
        params["include_invalidated"] = True
    return params


@pytest.mark.parametrize(("seed", "block"), [(21, 4096), (7, 1)])
async def test_as_of_pages_equal_the_store_read(
    engine: Engine, settings: Settings, seed: int, block: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pages equal the Cypher read's, also when the candidates are tested in many small
    blocks of uuid order (`block` 1: blocks of 2, 4, 8... documents)."""
    monkeypatch.setattr(columns, "_FIRST_BLOCK", block)
    broken = await _history(engine, settings, seed)
    rng = random.Random(seed)
    listed_any = set()
    for groups in (["g1"], ["g1", "g2"], None):
        for time in _filters(rng):
            for limit in (1, 3, 7, 50, 500):
                params: dict[str, Any] = {**_wire(time), "num_results": limit}
                if groups is not None:
                    params["group_ids"] = groups
                got = await dispatch(engine, "knowledge_list_relationships", params)
                at = now()

                def expected(
                    conn: GraphReader,
                    groups: Any = groups,
                    t: Any = time,
                    n: int = limit,
                    at: datetime = at,
                ) -> list[Fact]:
                    if t == TimeFilter():  # no time parameter: every edge (the reference's rule)
                        return conn.facts_with_hops(groups, limit=n)
                    return conn.facts_at(groups, t, at, n)

                want = [f.uuid for f in await engine.read(expected)]
                assert [f["uuid"] for f in got["facts"]] == want, (groups, time, limit)
                listed_any.update(want)
    assert listed_any and not listed_any & set(broken)  # hopless facts are never listed


@pytest.mark.parametrize("seed", [21, 7])
async def test_change_windows_equal_the_store_read(
    engine: Engine, settings: Settings, seed: int
) -> None:
    broken = await _history(engine, settings, seed)
    rng = random.Random(seed)
    windows = [(0, 7), (30, 30), (90, 120), (-10, 400)]
    windows += [(rng.randrange(-10, 220), rng.randrange(1, 60)) for _ in range(4)]
    seen_truncated = seen_whole = False
    for groups in (["g2"], ["g1", "g2"], None):
        for start, days in windows:
            for limit in (1, 4, 25, 1000):
                since, until = _at(start), _at(start + days)
                params: dict[str, Any] = {
                    "since": since.isoformat(),
                    "until": until.isoformat(),
                    "num_results": limit,
                }
                if groups is not None:
                    params["group_ids"] = groups
                got = await dispatch(engine, "knowledge_get_changes", params)

                def read(
                    conn: GraphReader, groups: Any = groups, s: Any = since, u: Any = until
                ) -> list[Fact]:
                    return conn.fact_changes(groups, s, u)

                entries = sorted(
                    (getattr(f, KIND_COLUMN[kind]), rank, stable_key(f), kind)
                    for f in await engine.read(read)
                    for rank, kind in enumerate(CHANGE_KINDS)
                    if getattr(f, KIND_COLUMN[kind]) is not None
                    and since <= getattr(f, KIND_COLUMN[kind]) < until
                )
                assert [(c["kind"], c["fact"]["uuid"]) for c in got["changes"]] == [
                    (e[3], e[2][-1]) for e in entries[:limit]
                ], (groups, start, days, limit)
                assert got["truncated"] is (len(entries) > limit)
                assert not {c["fact"]["uuid"] for c in got["changes"]} & set(broken)
                seen_truncated |= got["truncated"]
                seen_whole |= bool(got["changes"]) and not got["truncated"]
    assert seen_truncated and seen_whole


@pytest.mark.parametrize("way", ["offsets", "key_by_key", "union"])
async def test_the_batched_read_keeps_only_facts_with_both_hops(
    engine: Engine, settings: Settings, way: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kuzu reads few keys one by one and more in one hop query on node offsets, or in a large
    table in `UNION ALL` batches (chosen by the Fact table's size): every way gives the facts
    `facts_with_hops` gives."""
    monkeypatch.setattr(history, "_SCAN_MS_PER_ROW", 1e9 if way == "key_by_key" else 0.0)
    if way == "union":
        monkeypatch.setattr(history, "_UNION_FROM_ROWS", 0)
    broken = await _history(engine, settings, 3)

    def read(conn: GraphReader) -> tuple[dict[str, Fact], list[Fact]]:
        every = conn.facts_by_uuids([f"x-{i}" for i in range(3)])  # unknown keys: nothing
        assert every == {}
        hopped = conn.facts_with_hops(["g1", "g2"])
        keys = [f.uuid for f in hopped] + broken + ["missing"]
        return conn.facts_with_hops_by_uuid(keys), hopped

    got, hopped = await engine.read(read)
    assert got == {f.uuid: f for f in hopped}
    assert len(got) == 2 * 66 - len(broken)


async def test_timelines_equal_the_two_step_read(engine: Engine, settings: Settings) -> None:
    """An entity's timeline reads its facts once and its peers' facts without it: the facts
    and supersession links are those of the read that also re-read the entity's own facts."""
    await _history(engine, settings, 5)
    linked = 0
    for uuid in [f"{g}-e{i:02d}" for g in ("g1", "g2") for i in range(12)]:

        def read(conn: GraphReader, uuid: str = uuid) -> tuple[list[Fact], list[Fact]]:
            facts = conn.facts_around([uuid])
            ends = {e for f in facts for e in (f.source_uuid, f.target_uuid)}
            return facts, conn.facts_around(ends)  # the entity itself among the ends

        facts, peers = await engine.read(read)
        links = successions([*facts, *peers])
        got = await dispatch(engine, "knowledge_get_entity_timeline", {"entity_uuid": uuid})
        assert sorted(f["uuid"] for f in got["facts"]) == sorted(f.uuid for f in facts)
        linked += sum(bool(r["supersedes"] or r["superseded_by"]) for r in got["facts"])
        for record in got["facts"]:
            assert record["superseded_by"] == links.get(record["uuid"], [])
            assert record["supersedes"] == sorted(
                old for old, news in links.items() if record["uuid"] in news
            )
    assert linked  # the history has successions


async def _mentions(engine: Engine, seed: int) -> None:
    """Episodes of several sources and dates mentioning some of each group's entities, so the
    endpoints of listed facts have several provenance rows to order and merge."""
    rng = random.Random(seed)
    for group in ("g1", "g2"):
        for k in range(4):
            mentioned = [f"{group}-e{i:02d}" for i in rng.sample(range(12), 5)]
            episode = Episode(
                f"{group}-ep{k}",
                group,
                f"n{k}",
                f"text {k}",
                source_description=f"doc {k} of {group}",
                created_at=_at(3 - k) if k != 2 else None,
            )
            await engine.commit_episode(EpisodeCommit(group, episode, mentions=mentioned))


def _records(
    conn: GraphReader, facts: list[Fact], as_of: datetime | None = None
) -> list[dict[str, Any]]:
    """The wire records of `facts` with their endpoints' provenance, read key by key through
    `GraphReader.provenance` (the read the batched one replaces), and their own episodes."""
    ends = [u for f in facts for u in (f.source_uuid, f.target_uuid)]
    prov = conn.provenance(ends, None) if facts else {}
    named = [u for f in facts for u in f.episodes] + [p[0] for ps in prov.values() for p in ps]
    own = {
        u: (ep.source_description, ep.valid_at or ep.created_at)
        for u, ep in conn.episodes_by_uuids(named).items()
    }
    out = []
    for f in facts:
        merged = list(dict.fromkeys(prov.get(f.source_uuid, []) + prov.get(f.target_uuid, [])))
        record = fact_to_wire(f, [p[0] for p in merged], [p[1] for p in merged])
        out.append(provenance.cite(record, f, own, endpoints=True, as_of=as_of))
    return out


@pytest.mark.parametrize("union", [False, True])
async def test_as_of_records_equal_the_store_read_record_for_record(
    engine: Engine, settings: Settings, union: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whole records, provenance included, over supersessions, pages and group filters: the
    columns' candidates hydrated in batches give the records of `facts_at` plus `provenance`
    (on Kuzu also with the `UNION ALL` batches of a large table forced)."""
    if union:
        monkeypatch.setattr(history, "_UNION_FROM_ROWS", 0)
    await _history(engine, settings, 11)
    await _mentions(engine, 11)
    rng = random.Random(11)
    with_provenance = 0
    for groups in (["g1"], ["g2", "g1"], None):
        for time in _filters(rng):
            for limit in (1, 7, 50, 500):
                params: dict[str, Any] = {**_wire(time), "num_results": limit}
                if groups is not None:
                    params["group_ids"] = groups
                got = await dispatch(engine, "knowledge_list_relationships", params)
                at = now()

                def expected(
                    conn: GraphReader,
                    groups: Any = groups,
                    t: Any = time,
                    n: int = limit,
                    at: datetime = at,
                ) -> list[dict[str, Any]]:
                    if t == TimeFilter():
                        return _records(conn, conn.facts_with_hops(groups, limit=n))
                    return _records(conn, conn.facts_at(groups, t, at, n), t.as_of)

                want = await engine.read(expected)
                assert got["facts"] == want, (groups, time, limit)
                with_provenance += sum(len(r["episode_uuids"]) > 1 for r in want)
    assert with_provenance  # endpoints with several episodes were merged and ordered


@pytest.mark.parametrize("union", [False, True])
async def test_change_records_equal_the_store_read_record_for_record(
    engine: Engine, settings: Settings, union: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whole change records (both system-time columns, attributes) equal the Cypher read's."""
    if union:
        monkeypatch.setattr(history, "_UNION_FROM_ROWS", 0)
    await _history(engine, settings, 13)
    for groups in (["g1"], ["g1", "g2"], None):
        for start, days, limit in ((0, 7, 3), (20, 60, 25), (-10, 400, 1000)):
            since, until = _at(start), _at(start + days)
            params: dict[str, Any] = {
                "since": since.isoformat(),
                "until": until.isoformat(),
                "num_results": limit,
            }
            if groups is not None:
                params["group_ids"] = groups
            got = await dispatch(engine, "knowledge_get_changes", params)

            def read(
                conn: GraphReader, groups: Any = groups, s: Any = since, u: Any = until
            ) -> dict[str, Fact]:
                return {f.uuid: f for f in conn.fact_changes(groups, s, u)}

            facts = await engine.read(read)
            assert got["changes"], (groups, start, days)
            for change in got["changes"]:
                assert change["fact"] == fact_record(facts[change["fact"]["uuid"]])


async def _same_as_the_store(engine: Engine, rng: random.Random) -> int:
    """`as_of` pages and change windows, whole records, equal the Cypher reads' (the rows held
    in memory or not); how many records were compared."""
    compared = 0
    for groups in (["g1"], ["g2", "g1"], None):
        for time in _filters(rng)[:8]:
            for limit in (7, 500):
                params: dict[str, Any] = {**_wire(time), "num_results": limit}
                if groups is not None:
                    params["group_ids"] = groups
                got = await dispatch(engine, "knowledge_list_relationships", params)
                at = now()

                def page(
                    conn: GraphReader, g: Any = groups, t: Any = time, n: int = limit, a: Any = at
                ) -> list[dict[str, Any]]:
                    if t == TimeFilter():
                        return _records(conn, conn.facts_with_hops(g, limit=n))
                    return _records(conn, conn.facts_at(g, t, a, n), t.as_of)

                assert got["facts"] == await engine.read(page), (groups, time, limit)
                compared += len(got["facts"])
        for start, days, limit in ((0, 7, 3), (20, 60, 25), (-10, 400, 1000)):
            since, until = _at(start), _at(start + days)
            params = {"since": since.isoformat(), "until": until.isoformat()}
            params["num_results"] = limit
            if groups is not None:
                params["group_ids"] = groups
            got = await dispatch(engine, "knowledge_get_changes", params)

            def changed(
                conn: GraphReader, g: Any = groups, s: Any = since, u: Any = until
            ) -> list[Fact]:
                return conn.fact_changes(g, s, u)

            facts = await engine.read(changed)
            by_uuid = {f.uuid: f for f in facts}
            entries = sorted(
                (getattr(f, KIND_COLUMN[kind]), rank, stable_key(f), kind)
                for f in facts
                for rank, kind in enumerate(CHANGE_KINDS)
                if getattr(f, KIND_COLUMN[kind]) is not None
                and since <= getattr(f, KIND_COLUMN[kind]) < until
            )
            assert [(c["kind"], c["fact"]) for c in got["changes"]] == [
                (e[3], fact_record(by_uuid[e[2][-1]])) for e in entries[:limit]
            ], (groups, start, days, limit)
            compared += len(got["changes"])
    return compared


async def _served_from_memory(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    """Right after a build, pages and change windows read no fact row, hop or provenance
    from the store (Kuzu; a FalkorDB server keeps its reads)."""
    held = engine.parts.search.temporal
    if held is None:
        return
    from lcg.storage.kuzu_backend import KuzuReader

    def refuse(*_: Any) -> Any:
        raise AssertionError("read from the store")

    with monkeypatch.context() as patch:
        patch.setattr(KuzuReader, "facts_with_hops_by_uuid", refuse)
        patch.setattr(KuzuReader, "endpoint_provenance", refuse)
        got = await dispatch(
            engine, "knowledge_list_relationships", {"as_of": _at(120).isoformat()}
        )
        changes = await dispatch(
            engine,
            "knowledge_get_changes",
            {"since": _at(-10).isoformat(), "until": _at(400).isoformat(), "num_results": 50},
        )
    assert got["facts"] and changes["changes"]
    assert any(r["episode_uuids"] for r in got["facts"])


async def test_rows_held_in_memory_follow_every_write(
    engine: Engine, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The temporal lists' rows held in memory (lcg.search.factrows) stay exact through every
    write path: supersessions and edits by ingest commits, a re-added episode with another
    source, mentions added, a raw Cypher write, an episode delete, a group purge and a
    reopen; missing hops and episodes of several sources included. After each, whole records
    equal the Cypher reads', and right after a build nothing is read from the store."""
    rng = random.Random(17)
    await _history(engine, settings, 17)
    await _mentions(engine, 17)
    held = engine.parts.search.temporal
    if held is not None:  # nothing saved to load: the store is scanned by the first read only
        assert held.builds == 0
    assert await _same_as_the_store(engine, rng)
    await _served_from_memory(engine, monkeypatch)
    builds = held.builds if held is not None else 0

    # An ingest commit: a fact's text and target edited, another superseded, mentions and a
    # re-added episode (same uuid) with another source description and date.
    def first(conn: GraphReader) -> list[Fact]:
        return conn.facts_with_hops(["g1"])

    old, ended = (await engine.read(first))[:2]
    edited = Fact(
        old.uuid,
        "g1",
        old.source_uuid,
        "g1-e11" if old.target_uuid != "g1-e11" else "g1-e10",
        old.name,
        "an edited sentence",
        valid_at=old.valid_at,
        created_at=old.created_at,
    )
    episode = Episode(
        "g1-ep1", "g1", "n1", "text 1", source_description="moved doc", created_at=_at(9)
    )
    await engine.commit_episode(
        EpisodeCommit(
            "g1",
            episode,
            facts=[edited],
            invalidations=[Invalidation(ended.uuid, _at(150), _at(151))],
            mentions=["g1-e00", "g1-e01", "g1-e02"],
        )
    )
    assert await _same_as_the_store(engine, rng)
    if held is not None:
        assert held.builds == builds  # followed row by row: no rebuild

    # A raw Cypher write the rows cannot follow (embedded store only): they are dropped and
    # rebuilt.
    if settings.storage != "falkordb":
        query = f"MATCH (f:Fact {{uuid: '{ended.uuid}'}}) SET f.fact = 'rewritten by cypher'"
        await dispatch(engine, "knowledge_query_cypher", {"query": query})
        got = await _same_as_the_store(engine, rng)
        assert got
        await _served_from_memory(engine, monkeypatch)

    await deletes.delete_episode(engine, "g2-ep")
    assert await _same_as_the_store(engine, rng)
    await deletes.delete_by_group(engine, ["g2"], dry_run=False, confirm=True)
    assert await _same_as_the_store(engine, rng)
    if held is not None:
        assert held.builds > builds


async def test_rows_held_in_memory_after_a_reopen(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Saved at close, the rows are loaded at the next open while the store's positions are
    those they were saved at, and serve the same records; a saved copy the store has moved
    past (a commit it did not see) is not loaded: the store is scanned."""
    engine = open_engine(settings)
    try:
        await _history(engine, settings, 19)
        await _mentions(engine, 19)
        before = await _same_as_the_store(engine, random.Random(19))
    finally:
        engine.close()
    saved = settings.db_path.parent / "search-index" / "temporal"
    engine = open_engine(settings)
    try:
        held = engine.parts.search.temporal
        assert await _same_as_the_store(engine, random.Random(19)) == before
        await _served_from_memory(engine, monkeypatch)
        if held is not None:
            assert held.loads == 1 and (saved / "state.json").exists()
            shutil.copytree(saved, saved.with_name("kept"))
        # A commit the kept copy does not hold: an edited fact.

        def first(conn: GraphReader) -> Fact:
            return conn.facts_with_hops(["g1"])[0]

        old = await engine.read(first)
        edited = Fact(
            old.uuid,
            "g1",
            old.source_uuid,
            old.target_uuid,
            old.name,
            "edited after the save",
            valid_at=old.valid_at,
            created_at=old.created_at,
        )
        episode = Episode("g1-ep9", "g1", "n9", "text 9", created_at=_at(9))
        await engine.commit_episode(EpisodeCommit("g1", episode, facts=[edited]))
    finally:
        engine.close()
    if held is not None:  # the store moved past the kept copy: put it back as if current
        shutil.rmtree(saved)
        shutil.copytree(saved.with_name("kept"), saved)
    engine = open_engine(settings)
    try:
        held = engine.parts.search.temporal
        assert await _same_as_the_store(engine, random.Random(19))
        if held is not None:
            assert held.builds == 1 and held.loads == 0  # scanned, not loaded
    finally:
        engine.close()


async def test_a_build_replays_the_commits_that_arrive_while_it_scans(
    engine: Engine, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A drop during a build's scan discards it (it scans again); a commit noted during the
    scan marks its rows dirty on the build's result, so they are read from the store."""
    if engine.parts.search.temporal is None:
        pytest.skip("a server's reads stay on the server")
    await _history(engine, settings, 23)
    await _mentions(engine, 23)

    def hopped(conn: GraphReader) -> list[Fact]:
        return conn.facts_with_hops(["g1"])

    facts = await engine.read(hopped)
    victim, other = facts[0], facts[1]
    scans = 0

    def read(fn: Any) -> Any:
        nonlocal scans
        scans += 1
        with engine.reader() as conn:
            out = fn(conn)
        if scans == 1:
            held.drop()
        elif scans == 2:
            held.note_commit(
                [
                    FactUpsert(victim),
                    MentionsAdd("g1-ep0", (victim.source_uuid,)),
                ]
            )
        return out

    ends = [victim.source_uuid, other.target_uuid]

    def want(conn: GraphReader) -> tuple[Any, ...]:
        return (
            conn.facts_with_hops_by_uuid([victim.uuid, other.uuid]),
            conn.endpoint_provenance(ends),
        )

    want_facts, want_prov = await engine.read(want)
    held = FactRows(read)
    asked: list[str] = []
    from lcg.storage.kuzu_backend import KuzuReader

    real_facts, real_prov = KuzuReader.facts_with_hops_by_uuid, KuzuReader.endpoint_provenance

    def facts_asked(self: KuzuReader, uuids: Any) -> dict[str, Fact]:
        asked.extend(uuids)
        return real_facts(self, uuids)

    def prov_asked(self: KuzuReader, uuids: Any) -> dict[str, list[tuple[str, str]]]:
        asked.extend(uuids)
        return real_prov(self, uuids)

    monkeypatch.setattr(KuzuReader, "facts_with_hops_by_uuid", facts_asked)
    monkeypatch.setattr(KuzuReader, "endpoint_provenance", prov_asked)

    def got(conn: GraphReader) -> tuple[Any, ...]:
        return (
            held.facts_with_hops(conn, [victim.uuid, other.uuid]),
            held.endpoint_provenance(conn, ends),
        )

    await asyncio.to_thread(held.ready)  # as the reads do (columns.held_rows), holding no reader
    got_facts, got_prov = await engine.read(got)
    assert scans == 2 and held.builds == 1
    assert got_facts == want_facts and got_prov == want_prov
    assert asked == [victim.uuid, victim.source_uuid]  # only the dirty rows


async def test_a_first_read_waits_for_the_rows_before_taking_its_reader(
    engine: Engine, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read that finds no temporal rows held waits for their build before it takes a pooled
    reader, never while holding one: the build needs a reader of its own. With the pool's
    other reader busy (held here by another thread), the read still answers, from the rows.
    Waiting inside the read held the pool's last reader for the whole `WAIT_S`: two
    concurrent first reads (the browser UI's) stalled a minute with a pool of two."""
    held = engine.parts.search.temporal
    if held is None:
        pytest.skip("a server's reads stay on the server")
    await _history(engine, settings, 29)
    held.drop()
    monkeypatch.setattr(factrows, "WAIT_S", 3600.0)
    taken, release = threading.Event(), threading.Event()

    def hold() -> None:
        with engine.reader():
            taken.set()
            release.wait(120)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert taken.wait(10)
        got = await asyncio.wait_for(
            dispatch(engine, "knowledge_list_relationships", {"as_of": _at(120).isoformat()}),
            60,
        )
    finally:
        release.set()
        holder.join()
    assert got["facts"] and held.builds == 1
