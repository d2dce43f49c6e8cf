"""Rebuild equivalence: the graph re-derived from the WAL is the graph the live writes built.

A property test: hypothesis draws a sequence of writes over three groups (entities asserted,
renamed and updated; relationships asserted and re-asserted; whole episodes with new and existing
entities, facts, fact updates, invalidations and mentions; episode, source and chunk deletes; group
purges; entity merges; a full clear). After it, every row and edge of the graph is snapshotted and compared with
the graph obtained (1) by `knowledge_rebuild_from_wal` with `force_clear` for every group on the
live engine, and (2) by deleting the database and reopening (startup catch-up, bulk mode). Each
state's search index (lcg.search, the text index lcg keeps) must also answer exactly as a Python
tokenisation of its rows says.
The explicit rebuild happens part-way (at a drawn cut), and the rest of the writes follow it, so
the engine is also shown to keep writing correctly after a rebuild.

References into the graph (which entity, which fact, which episode) are drawn as plain integers and
resolved modulo the live rows at execution time, ordered by when the test first saw each uuid, so
examples replay and shrink deterministically although the engine mints random uuids.
"""

from __future__ import annotations

import contextlib
import tempfile
import uuid as uuidlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import anyio
from graph_invariants import (
    ENTITY_COLS,
    EPISODE_COLS,
    FACT_COLS,
    assert_no_dangling_rows,
    assert_same,
    snapshot,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from rebuild_jobs import rebuild_and_wait
from search_support import indexed

from lcg import (
    ConflictError,
    Engine,
    Entity,
    Episode,
    EpisodeCommit,
    Fact,
    Invalidation,
    Settings,
    open_engine,
)
from lcg.models import canonical_attributes, normalize_labels
from lcg.service.registry import dispatch
from lcg.storage.store import delete_database_files
from lcg.telemetry import ListSink

# -- the vocabulary -----------------------------------------------------------------------------
# Every indexed text is built from these words: lowercase, alphabetic, >= 4 letters, no stopword,
# and no two sharing a porter stem, so "does the index answer word w" has one Python answer.
# fmt: off
VOCAB = (
    "falcon", "granite", "harbor", "meadow", "lantern", "copper", "willow", "tundra",
    "quartz", "saddle", "nectar", "pilgrim", "orchid", "basalt", "cobalt", "dagger",
    "glacier", "hermit", "jasmine", "kettle", "violet", "zephyr", "canyon", "ember",
)
NAMES = (
    "Falcon Granite", "Harbor", "Meadow Lantern", "Copper Willow", "Tundra",
    "Quartz Saddle", "Nectar Pilgrim", "Orchid", "Basalt Cobalt", "Dagger Glacier",
)
GROUPS = ("g1", "g2", "team 3/ü")  # the third needs its WAL directory name encoded
PREDICATES = ("KNOWS", "OWNS", "VISITED", "PART_OF")  # none contains a vocabulary word
RELATION_TYPES = (None, "Knows", "Ownership")
SOURCES = ("notes.md", "notes.md:2", "journal.txt", "journal.txt:1", "chat")
SOURCE_FILES = ("notes.md", "journal.txt", "chat", "absent.md")
CHUNKS = ("chunk-a", "chunk-b", "chunk-c")
LABELS = ("Person", "Place", "Entity", " Org ")
TZS = (UTC, timezone(timedelta(hours=2)), timezone(-timedelta(hours=5, minutes=30)))
CASES: tuple[Callable[[str], str], ...] = (str, str.upper, str.lower, str.title)

# fmt: on
TEXT_COLS = {
    "Entity": ("name", "summary"),
    "Fact": ("name", "fact"),
    "Episode": ("content",),
}

# -- strategies ---------------------------------------------------------------------------------

moments = st.datetimes(
    min_value=datetime(1950, 1, 1), max_value=datetime(2080, 12, 31), timezones=st.sampled_from(TZS)
)
maybe_moment = st.none() | moments
words = st.lists(st.sampled_from(VOCAB), max_size=4).map(" ".join)
cased_words = st.tuples(words, st.sampled_from(CASES)).map(lambda t: t[1](t[0]))
some_words = st.lists(st.sampled_from(VOCAB), min_size=1, max_size=4).map(" ".join)
labels = st.lists(st.sampled_from(LABELS), max_size=3)
attr_values = (
    st.integers(-(2**40), 2**40)
    | st.booleans()
    | st.floats(allow_nan=False, allow_infinity=False, width=32)
    | st.text(st.sampled_from("aé\"\\'{}:, ü"), max_size=6)
    | st.lists(st.integers(0, 9), max_size=3)
)
attributes = st.dictionaries(st.sampled_from(("k1", "rank", "note", " ")), attr_values, max_size=2)
pick = st.integers(0, 999)
group = st.integers(0, len(GROUPS) - 1)
groups_mask = st.lists(group, min_size=1, max_size=3, unique=True)


@dataclass(frozen=True)
class AssertEntity:
    group: int
    name: int
    case: int
    summary: str
    labels: list[str]
    attributes: dict[str, Any]


@dataclass(frozen=True)
class Rename:
    group: int
    entity: int
    name: int
    case: int
    summary: str
    labels: list[str]
    attributes: dict[str, Any]


@dataclass(frozen=True)
class AssertRelationship:
    group: int
    source: int
    target: int
    predicate: int
    fact: str | None
    valid_at: datetime | None
    relation_type: str | None
    attributes: dict[str, Any]


@dataclass(frozen=True)
class NewEntity:
    name: int
    case: int
    summary: str
    labels: list[str]
    attributes: dict[str, Any]
    created_at: datetime | None


@dataclass(frozen=True)
class NewFact:
    source: int
    target: int
    predicate: int
    fact: str
    valid_at: datetime | None
    created_at: datetime | None
    relation_type: str | None
    attributes: dict[str, Any]


@dataclass(frozen=True)
class FactUpdate:
    fact: int
    text: str
    retarget: int | None  # a pick among the episode's entities, or keep the target


@dataclass(frozen=True)
class Supersede:
    fact: int
    invalid_at: datetime | None
    expired_at: datetime


@dataclass(frozen=True)
class CommitEpisode:
    group: int
    reuse: int | None  # re-add an existing episode of the group (same uuid) instead of a new one
    name: int
    content: str
    source: str
    source_description: int
    source_file: int
    created_at: datetime
    valid_at: datetime | None
    new_entities: list[NewEntity]
    updated_entities: list[tuple[int, str]]  # (existing entity pick, new summary)
    facts: list[NewFact]
    fact_updates: list[FactUpdate]
    invalidations: list[Supersede]
    mentions: list[int]


@dataclass(frozen=True)
class DeleteEpisode:
    episode: int | None  # None: a uuid that does not exist


@dataclass(frozen=True)
class DeleteBySource:
    source_file: int
    groups: list[int]


@dataclass(frozen=True)
class DeleteChunk:
    chunk: int
    groups: list[int]


@dataclass(frozen=True)
class Purge:
    groups: list[int]


@dataclass(frozen=True)
class ClearAll:
    pass


@dataclass(frozen=True)
class Merge:
    group: int
    canonical: int
    aliases: list[int]
    by_name: bool


assert_entities = st.builds(
    AssertEntity,
    group,
    st.integers(0, len(NAMES) - 1),
    st.integers(0, len(CASES) - 1),
    cased_words,
    labels,
    attributes,
)
renames = st.builds(
    Rename,
    group,
    pick,
    st.integers(0, len(NAMES) - 1),
    st.integers(0, len(CASES) - 1),
    cased_words,
    labels,
    attributes,
)
assert_relationships = st.builds(
    AssertRelationship,
    group,
    pick,
    pick,
    st.integers(0, len(PREDICATES) - 1),
    st.none() | some_words,
    maybe_moment,
    st.sampled_from(RELATION_TYPES),
    attributes,
)
new_entities = st.builds(
    NewEntity,
    st.integers(0, len(NAMES) - 1),
    st.integers(0, len(CASES) - 1),
    cased_words,
    labels,
    attributes,
    maybe_moment,
)
new_facts = st.builds(
    NewFact,
    pick,
    pick,
    st.integers(0, len(PREDICATES) - 1),
    cased_words,
    maybe_moment,
    maybe_moment,
    st.sampled_from(RELATION_TYPES),
    attributes,
)
episodes = st.builds(
    CommitEpisode,
    group=group,
    reuse=st.none() | pick,
    name=st.integers(0, len(CHUNKS) - 1),
    content=cased_words,
    source=st.sampled_from(("text", "message", "json")),
    source_description=st.integers(0, len(SOURCES) - 1),
    source_file=st.integers(0, len(SOURCE_FILES) - 1),
    created_at=moments,
    valid_at=maybe_moment,
    new_entities=st.lists(new_entities, max_size=3),
    updated_entities=st.lists(st.tuples(pick, cased_words), max_size=2),
    facts=st.lists(new_facts, max_size=3),
    fact_updates=st.lists(st.builds(FactUpdate, pick, cased_words, st.none() | pick), max_size=2),
    invalidations=st.lists(
        st.builds(Supersede, pick, st.one_of(moments, moments, st.none()), moments), max_size=2
    ),
    mentions=st.lists(pick, max_size=4),
)


@st.composite
def operations(draw: st.DrawFn) -> object:
    """One operation; shrinks towards asserting an entity. A full clear is rare (~1 in 50)."""
    kind = draw(st.integers(0, 53))
    if kind < 10:
        return draw(assert_entities)
    if kind < 14:
        return draw(renames)
    if kind < 24:
        return draw(assert_relationships)
    if kind < 38:
        return draw(episodes)
    if kind < 41:
        return draw(st.builds(DeleteEpisode, st.one_of(pick, pick, pick, st.none())))
    if kind < 44:
        return draw(st.builds(DeleteBySource, st.integers(0, len(SOURCE_FILES) - 1), groups_mask))
    if kind < 47:
        return draw(st.builds(DeleteChunk, st.integers(0, len(CHUNKS) - 1), groups_mask))
    if kind < 49:
        return draw(st.builds(Purge, groups_mask))
    if kind > 49:
        return draw(st.builds(Merge, group, pick, st.lists(pick, max_size=3), st.booleans()))
    return ClearAll()


# -- driving the engine -------------------------------------------------------------------------


@dataclass
class Driver:
    """Runs operations; resolves integer picks against the live graph in first-seen order."""

    engine: Engine
    seen: dict[str, int] = field(default_factory=dict)

    def _order(self, uuids: list[str]) -> list[str]:
        for u in uuids:
            self.seen.setdefault(u, len(self.seen))
        return sorted(uuids, key=self.seen.__getitem__)

    def _new_uuid(self) -> str:
        u = str(uuidlib.uuid4())
        self.seen[u] = len(self.seen)
        return u

    def entities(self, group_id: str) -> list[Entity]:
        with self.engine.reader() as conn:
            found = {e.uuid: e for e in conn.entities_in_groups([group_id])}
        return [found[u] for u in self._order(list(found))]

    def facts(self, group_id: str, *, active_only: bool = False) -> list[Fact]:
        with self.engine.reader() as conn:
            uuids = [
                r[0]
                for r in conn.rows(
                    "MATCH (f:Fact) WHERE f.group_id = $g RETURN f.uuid", {"g": group_id}
                )
            ]
            found = conn.facts_by_uuids(uuids)
        facts = [found[u] for u in self._order(list(found))]
        return [f for f in facts if f.invalid_at is None] if active_only else facts

    def episodes(self, group_id: str | None = None) -> list[str]:
        where = "WHERE ep.group_id = $g " if group_id is not None else ""
        with self.engine.reader() as conn:
            uuids = [
                r[0]
                for r in conn.rows(
                    f"MATCH (ep:Episode) {where}RETURN ep.uuid", {"g": group_id} if group_id else {}
                )
            ]
        return self._order(uuids)

    async def run(self, op: object) -> None:
        engine = self.engine
        if isinstance(op, AssertEntity):
            params = {
                "name": CASES[op.case](NAMES[op.name]),
                "group_id": GROUPS[op.group],
                "summary": op.summary,
                "labels": op.labels,
                "attributes": op.attributes,
            }
            self._order(
                [(await dispatch(engine, "knowledge_assert_entity", params))["entity_uuid"]]
            )
        elif isinstance(op, Rename):
            current = self.entities(GROUPS[op.group])
            if not current:
                return
            target = current[op.entity % len(current)]
            params = {
                "name": CASES[op.case](NAMES[op.name]),
                "group_id": GROUPS[op.group],
                "entity_uuid": target.uuid,
                "summary": op.summary,
                "labels": op.labels,
                "attributes": op.attributes,
            }
            # ConflictError: another active entity of the group has that name; nothing is written.
            with contextlib.suppress(ConflictError):
                await dispatch(engine, "knowledge_assert_entity", params)
        elif isinstance(op, AssertRelationship):
            current = self.entities(GROUPS[op.group])
            if not current:
                return
            params = {
                "source_name": current[op.source % len(current)].name,
                "target_name": current[op.target % len(current)].name,
                "predicate": PREDICATES[op.predicate],
                "group_id": GROUPS[op.group],
                "fact": op.fact,
                "valid_at": op.valid_at.isoformat() if op.valid_at else None,
                "relation_type": op.relation_type,
                "attributes": op.attributes,
            }
            result = await dispatch(engine, "knowledge_assert_relationship", params)
            self._order([result["edge_uuid"]])
        elif isinstance(op, CommitEpisode):
            await engine.commit_episode(self._episode_commit(op))
        elif isinstance(op, DeleteEpisode):
            every = self.episodes()
            if op.episode is None or not every:
                target_uuid = str(uuidlib.uuid4())
            else:
                target_uuid = every[op.episode % len(every)]
            await dispatch(engine, "knowledge_delete_episode", {"episode_uuid": target_uuid})
        elif isinstance(op, DeleteBySource):
            await dispatch(
                engine,
                "knowledge_delete_by_source",
                {
                    "source_file": SOURCE_FILES[op.source_file],
                    "group_ids": [GROUPS[g] for g in op.groups],
                },
            )
        elif isinstance(op, DeleteChunk):
            await dispatch(
                engine,
                "knowledge_delete_chunk_episode",
                {"chunk_id": CHUNKS[op.chunk], "group_ids": [GROUPS[g] for g in op.groups]},
            )
        elif isinstance(op, Purge):
            await dispatch(
                engine,
                "knowledge_delete_by_group",
                {"group_ids": [GROUPS[g] for g in op.groups], "confirm": True},
            )
        elif isinstance(op, Merge):
            current = self.entities(GROUPS[op.group])
            if not current:
                return
            params = {
                "canonical_uuid": current[op.canonical % len(current)].uuid,
                "alias_uuids": [current[a % len(current)].uuid for a in op.aliases],
                "merge_all_by_name": op.by_name,
                "group_id": GROUPS[op.group],
            }
            result = await dispatch(engine, "knowledge_merge_entities", params)
            self._order([f.uuid for f in self.facts(GROUPS[op.group])])
            assert not any("not found" in e for e in result["errors"]), result
        elif isinstance(op, ClearAll):
            await dispatch(engine, "knowledge_clear_all", {"confirm": True, "preserve_wal": False})
        else:  # pragma: no cover
            raise AssertionError(op)

    def _episode_commit(self, op: CommitEpisode) -> EpisodeCommit:
        gid = GROUPS[op.group]
        existing = self.episodes(gid)
        ep_uuid = (
            existing[op.reuse % len(existing)]
            if op.reuse is not None and existing
            else self._new_uuid()
        )
        episode = Episode(
            uuid=ep_uuid,
            group_id=gid,
            name=CHUNKS[op.name],
            content=op.content,
            source=op.source,
            source_description=SOURCES[op.source_description],
            source_file=SOURCE_FILES[op.source_file],
            chunk_id=CHUNKS[op.name],
            created_at=op.created_at,
            valid_at=op.valid_at,
        )
        current = self.entities(gid)
        changed: dict[str, Entity] = {}
        for p, summary in op.updated_entities:
            if current:
                e = current[p % len(current)]
                changed[e.uuid] = replace(changed.get(e.uuid, e), summary=summary)
        fresh = [
            Entity(
                uuid=self._new_uuid(),
                group_id=gid,
                name=CASES[n.case](NAMES[n.name]),
                labels=normalize_labels(n.labels),
                summary=n.summary,
                attributes=canonical_attributes(n.attributes),
                created_at=n.created_at,
            )
            for n in op.new_entities
        ]
        ends = [changed.get(e.uuid, e) for e in current] + fresh
        facts: dict[str, Fact] = {}
        if ends:
            for nf in op.facts:
                f = Fact(
                    uuid=self._new_uuid(),
                    group_id=gid,
                    source_uuid=ends[nf.source % len(ends)].uuid,
                    target_uuid=ends[nf.target % len(ends)].uuid,
                    name=PREDICATES[nf.predicate],
                    fact=nf.fact,
                    relation_type=nf.relation_type,
                    attributes=canonical_attributes(nf.attributes),
                    episodes=(ep_uuid,),
                    valid_at=nf.valid_at,
                    created_at=nf.created_at,
                )
                facts[f.uuid] = f
        old_facts = self.facts(gid)
        if old_facts:
            for fu in op.fact_updates:
                f = old_facts[fu.fact % len(old_facts)]
                f = facts.get(f.uuid, f)
                target = f.target_uuid
                if fu.retarget is not None and ends:
                    target = ends[fu.retarget % len(ends)].uuid
                facts[f.uuid] = replace(
                    f, fact=fu.text, target_uuid=target, episodes=(*f.episodes, ep_uuid)
                )
        active = self.facts(gid, active_only=True)
        invalidations: dict[str, Invalidation] = {}
        if active:
            for s in op.invalidations:
                f = active[s.fact % len(active)]
                invalidations[f.uuid] = Invalidation(f.uuid, s.invalid_at, s.expired_at)
        mentions = [ends[m % len(ends)].uuid for m in op.mentions] if ends else []
        return EpisodeCommit(
            group_id=gid,
            episode=episode,
            entities=[*changed.values(), *fresh],
            facts=list(facts.values()),
            invalidations=list(invalidations.values()),
            mentions=mentions,
        )


# -- snapshots and checks -----------------------------------------------------------------------


async def resolved_names(
    engine: Engine, snap: dict[str, list[Any]]
) -> dict[tuple[str, str], str | None]:
    """What every stored (group, name) resolves to: the name index's answer."""
    out: dict[tuple[str, str], str | None] = {}
    for row in snap["entities"]:
        found = await engine.entity_by_name(row[1], row[2])
        out[(row[1], row[2])] = found.uuid if found else None
    return out


def check_text_index(
    engine: Engine, snap: dict[str, list[Any]], probes: tuple[str, ...], how: str
) -> None:
    """The search index returns exactly the rows whose indexed text has the word as a token."""
    tables = {
        "Entity": (snap["entities"], ENTITY_COLS),
        "Fact": (snap["facts"], FACT_COLS),
        "Episode": (snap["episodes"], EPISODE_COLS),
    }
    for table, columns in TEXT_COLS.items():
        rows, names = tables[table]
        positions = [names.index(c) for c in columns]
        tokens = {
            row[0]: {t for p in positions for t in (row[p] or "").lower().split()} for row in rows
        }
        for word in probes:
            want = {u for u, toks in tokens.items() if word in toks}
            assert indexed(engine, table, word) == want, (
                f"{how}: the {table} search index answers {word!r} wrongly"
            )


def check_replays(reports: list[dict[str, Any]], how: str) -> None:
    for r in reports:
        assert r["replay_mode"] == "bulk", (how, r)
        assert r["failed_lines"] == r["unparseable_lines"] == r["unrecognised_lines"] == 0, (how, r)
        assert r["transactions_rolled_back"] == 0, (how, r)
        assert r["corrupt_batch_lines"] == 0 and r["lost_batches"] == [], (how, r)


async def explicit_rebuild(engine: Engine) -> None:
    """`knowledge_rebuild_from_wal` with `force_clear` for every group that has a WAL."""
    reports = []
    for gid in engine.parts.wal.groups():
        if any(engine.parts.wal.directory(gid).glob("*.jsonl")):
            params = {"group_id": gid, "force_clear": True}
            reports.append(await rebuild_and_wait(engine, params))
    check_replays(reports, "knowledge_rebuild_from_wal")


async def scenario(config: Settings, ops: list[object], cut: int, probes: tuple[str, ...]) -> None:
    engine = open_engine(config)
    try:
        driver = Driver(engine)
        for op in ops[:cut]:
            await driver.run(op)
        # Variant 1: an explicit full rebuild of every group on the live engine gives the same
        # graph, and the engine goes on writing correctly after it.
        before = snapshot(engine)
        assert_no_dangling_rows(engine, "live, before knowledge_rebuild_from_wal")
        before_names = await resolved_names(engine, before)
        check_text_index(engine, before, probes, "live, before knowledge_rebuild_from_wal")
        await explicit_rebuild(engine)
        rebuilt = snapshot(engine)
        assert_no_dangling_rows(engine, "knowledge_rebuild_from_wal")
        assert_same(before, rebuilt, "knowledge_rebuild_from_wal")
        assert await resolved_names(engine, rebuilt) == before_names
        check_text_index(engine, rebuilt, probes, "knowledge_rebuild_from_wal")
        for op in ops[cut:]:
            await driver.run(op)
        live = snapshot(engine)
        assert_no_dangling_rows(engine, "live")
        live_names = await resolved_names(engine, live)
        check_text_index(engine, live, probes, "live")
    finally:
        engine.close()

    # Variant 2: the database is deleted; opening the engine re-derives it from the WAL.
    delete_database_files(config.db_path)
    events = ListSink()
    engine = open_engine(config, events=events)
    try:
        check_replays(events.of_type("wal_replay_complete"), "startup catch-up")
        reopened = snapshot(engine)
        assert_no_dangling_rows(engine, "reopen")
        assert (await dispatch(engine, "knowledge_status", {}))["wal_problems"] == []
        assert_same(live, reopened, "reopen")
        assert await resolved_names(engine, reopened) == live_names
        check_text_index(engine, reopened, probes, "reopen")
    finally:
        engine.close()


@settings(max_examples=25, deadline=None)
@given(
    ops=st.lists(operations(), min_size=5, max_size=25),
    cut=st.integers(0, 25),
    probes=st.permutations(VOCAB).map(lambda words: tuple(words[:10])),
)
def test_wal_rebuild_reproduces_the_live_graph(
    ops: list[object], cut: int, probes: tuple[str, ...]
) -> None:
    """The ops before `cut` are rebuilt explicitly, the rest written after; then a reopen."""
    with tempfile.TemporaryDirectory() as tmp:
        config = Settings.for_home(Path(tmp) / ".lcg", kuzu_buffer_pool_mb=64)
        anyio.run(scenario, config, ops, cut, probes)
