"""Bad input changes nothing: every write method refuses invalid params before any effect.

Each case runs against a populated workspace (several groups, entities, facts, episodes and a
raw Cypher write), snapshots every byte under the WAL root and every row of the database, calls
one write method with bad params, checks the error it raises, and then checks that the WAL
files, the database rows, the engine's status and its name index are as they were, and that the
engine still accepts a write.

Cases that reach the engine get a fresh copy of the workspace each. Cases the params model
refuses share one copy (opening a database per case would cost most of the time budget); each
still compares its own before and after, so a case that changed anything fails by itself.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from episode_support import COLLINS, MOON_EPISODE, SATURN, commit_two_episodes

from lcg import (
    ConfigError,
    ConflictError,
    Engine,
    InvalidRequestError,
    LcgError,
    NotFoundError,
    Settings,
    StorageError,
    WalGenerationError,
    open_engine,
)
from lcg.engine import exclusive
from lcg.service.params import parse_params
from lcg.service.registry import REGISTRY, dispatch
from lcg.storage.falkordb.backend import FalkorBackend
from lcg.wal.marks import (
    CheckpointExistsError,
    CheckpointNameError,
    CheckpointNotFoundError,
    create_mark,
)

pytestmark = pytest.mark.anyio

UNKNOWN_UUID = "99999999-9999-4999-8999-999999999999"

# Names the name index must keep resolving, as (group, name).
KNOWN_NAMES = [
    ("liminis", "Neil Armstrong"),
    ("liminis", "Apollo 11"),
    ("liminis", "Buzz Aldrin"),
    ("liminis", "Michael Collins"),
    ("mission-b", "Saturn V"),
    ("team/ops", "Ops Lead"),
]

# The bad-input cases run on the embedded store and on a FalkorDB server (conftest).
BOTH_STORAGES = True

DB_QUERIES = {
    "Entity": "MATCH (n:Entity) RETURN n",
    "Fact": "MATCH (n:Fact) RETURN n",
    "Episode": "MATCH (n:Episode) RETURN n",
    "Embedding": "MATCH (n:Embedding) RETURN n",
    "Meta": "MATCH (n:Meta) RETURN n",
    "MENTIONS": "MATCH (a:Episode)-[r:MENTIONS]->(b:Entity) RETURN a.uuid, b.uuid, r",
    "RELATES_TO": "MATCH (a)-[r:RELATES_TO]->(b) RETURN a.uuid, b.uuid, r",
}


async def _populate(engine: Engine) -> None:
    await dispatch(
        engine,
        "knowledge_assert_entity",
        {
            "name": "Neil Armstrong",
            "labels": ["Person"],
            "summary": "First person on the Moon",
            "attributes": {"role": "commander"},
        },
    )
    apollo = await dispatch(engine, "knowledge_assert_entity", {"name": "Apollo 11"})
    await dispatch(engine, "knowledge_assert_entity", {"name": "Buzz Aldrin"})
    await dispatch(
        engine,
        "knowledge_assert_relationship",
        {
            "source_name": "Neil Armstrong",
            "target_name": "Apollo 11",
            "predicate": "COMMANDED",
            "valid_at": "1969-07-16T13:32:00Z",
            "attributes": {"seat": "left"},
        },
    )
    await commit_two_episodes(engine, apollo["entity_uuid"], ("Entity", "Rocket"))
    await dispatch(engine, "knowledge_assert_entity", {"name": "Ops Lead", "group_id": "team/ops"})
    if engine.settings.storage == "kuzu":  # raw Cypher mutations run on Kuzu only
        await dispatch(
            engine,
            "knowledge_query_cypher",
            {
                "query": "MATCH (e:Entity {name: 'Apollo 11'}) SET e.summary = 'Lunar landing mission'"
            },
        )


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A populated workspace, closed, to be copied by each case."""
    home = tmp_path_factory.mktemp("template") / ".lcg"
    engine = open_engine(Settings.for_home(home, kuzu_buffer_pool_mb=64))
    try:
        anyio.run(_populate, engine)
    finally:
        engine.close()
    return home


def _open_copy(template: Path, home: Path) -> Engine:
    shutil.copytree(template, home)
    return open_engine(Settings.for_home(home, kuzu_buffer_pool_mb=64))


@pytest.fixture(scope="module")
def shared_workspace(template: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    engine = _open_copy(template, tmp_path_factory.mktemp("shared") / ".lcg")
    try:
        yield engine
    finally:
        engine.close()


@pytest.fixture(scope="module")
def server_template(
    falkordb_url: str, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, dict[bytes, bytes]]:
    """The populated workspace on the FalkorDB server: its home and every server key, dumped
    (each case restores them into an emptied server)."""
    home = tmp_path_factory.mktemp("server-template") / ".lcg"
    server = FalkorBackend(falkordb_url)
    try:
        server.client.flushall()
        engine = open_engine(_server_settings(home, falkordb_url))
        try:
            anyio.run(_populate, engine)
        finally:
            engine.close()
        client = _raw_client(falkordb_url)
        try:
            dumped = {key: bytes(client.dump(key)) for key in client.scan_iter()}
        finally:
            client.close()
    finally:
        server.close()
    return home, dumped


def _raw_client(url: str) -> Any:
    """A client that returns bytes: DUMP payloads are binary."""
    import redis  # noqa: TID251  the test dumps and restores the server's keys byte for byte

    return redis.Redis.from_url(url, decode_responses=False)


def _server_settings(home: Path, url: str) -> Settings:
    return Settings.for_home(home, storage="falkordb", falkordb_url=url)


@pytest.fixture
def workspace(
    request: pytest.FixtureRequest, storage: dict[str, object], tmp_path: Path
) -> Iterator[Engine]:
    """The shared copy for a case the params model refuses, else a fresh copy of its own; on
    FalkorDB, the server restored to the template and a copy of its home."""
    case = request.node.callspec.params.get("case")
    refused = isinstance(case, Case) and refused_by_params_model(case)
    if storage:
        if refused:
            pytest.skip("refused by the params model before any store is reached: as on Kuzu")
        url = str(storage["falkordb_url"])
        home, dumped = request.getfixturevalue("server_template")
        client = _raw_client(url)
        try:
            client.flushall()
            for key, payload in dumped.items():
                client.restore(key, 0, payload)
        finally:
            client.close()
        shutil.copytree(home, tmp_path / "ws" / ".lcg")
        engine = open_engine(_server_settings(tmp_path / "ws" / ".lcg", url))
    elif refused:
        yield request.getfixturevalue("shared_workspace")
        return
    else:
        engine = _open_copy(request.getfixturevalue("template"), tmp_path / "ws" / ".lcg")
    try:
        yield engine
    finally:
        engine.close()


def wal_snapshot(root: Path) -> dict[str, bytes | None]:
    """Every directory (None) and file (its bytes) under the WAL root."""
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(root.rglob("*"))
    }


def db_snapshot(engine: Engine) -> dict[str, list[str]]:
    if engine.settings.storage != "kuzu":
        return server_snapshot(engine)
    with engine.reader() as conn:
        return {
            table: sorted(repr(row) for row in conn.rows(query))
            for table, query in DB_QUERIES.items()
        }


def server_snapshot(engine: Engine) -> dict[str, list[str]]:
    """Every row, hop, mention, embedding row, meta entry and WAL line of every group, read
    through the storage protocol (FalkorDB returns scalars only, not whole nodes)."""
    out: dict[str, list[str]] = {}
    store = exclusive.store(engine)
    with engine.reader() as r:
        for g in r.group_ids():
            out[f"{g} entities"] = sorted(repr(e) for page in r.entity_pages(g) for e in page)
            out[f"{g} facts"] = sorted(repr(f) for page in r.fact_pages(g) for f in page)
            out[f"{g} episodes"] = sorted(repr(e) for page in r.episode_pages(g) for e in page)
            out[f"{g} mentions"] = sorted(repr(m) for page in r.mention_pages(g) for m in page)
            hops = r.rows(
                "MATCH (a:Entity)-[:RELATES_TO]->(f:Fact)-[:RELATES_TO]->(b:Entity) "
                "WHERE f.group_id = $g RETURN a.uuid, f.uuid, b.uuid",
                {"g": g},
            )
            out[f"{g} hops"] = sorted(repr(h) for h in hops)
            out[f"{g} embeddings"] = sorted(repr(x) for x in r.embedding_hashes(g).items())
            out[f"{g} meta"] = sorted(repr(x) for x in r.meta_with_prefix("", g).items())
            out[f"{g} position"] = [repr(r.position(g))]
            out[f"{g} wal"] = [repr(x) for x in store.stream_records(g)]
        out["global meta"] = sorted(repr(x) for x in r.meta_with_prefix("").items())
    return out


async def resolved_names(engine: Engine) -> dict[tuple[str, str], str | None]:
    out = {}
    for group, name in KNOWN_NAMES:
        entity = await engine.entity_by_name(group, name)
        out[(group, name)] = entity.uuid if entity else None
    return out


def remove_default_generation(engine: Engine) -> None:
    (engine.settings.wal_dir / "liminis" / ".wal-generation.json").unlink()


@dataclass(frozen=True)
class Case:
    method: str
    params: Any
    error: type[LcgError]
    field: str | None = None
    mentions: str | None = None
    prepare: Callable[[Engine], None] | None = None


def bad(
    case_id: str,
    method: str,
    params: Any,
    error: type[LcgError] = InvalidRequestError,
    *,
    field: str | None = None,
    mentions: str | None = None,
    prepare: Callable[[Engine], None] | None = None,
    kuzu_only: str | None = None,
) -> Any:
    """One case: InvalidRequestError cases name their `field`; the message must mention
    `mentions` (default: the field). `kuzu_only`: why the case does not apply on FalkorDB."""
    if error is InvalidRequestError:
        assert field is not None, case_id
    text = mentions or field
    assert text is not None, case_id
    marks = [pytest.mark.kuzu_only(kuzu_only)] if kuzu_only else []
    return pytest.param(Case(method, params, error, field, text, prepare), id=case_id, marks=marks)


def refused_by_params_model(case: Case) -> bool:
    """True when the params model alone rejects the case (the engine is never called)."""
    try:
        parse_params(REGISTRY[case.method].params, case.params)
    except InvalidRequestError:
        return case.prepare is None
    return False


AE = "knowledge_assert_entity"
AR = "knowledge_assert_relationship"
DE = "knowledge_delete_episode"
DS = "knowledge_delete_by_source"
DC = "knowledge_delete_chunk_episode"
DG = "knowledge_delete_by_group"
CA = "knowledge_clear_all"
QC = "knowledge_query_cypher"
RB = "knowledge_rebuild_from_wal"
MC = "knowledge_wal_mark_create"
MD = "knowledge_wal_mark_delete"
ML = "knowledge_wal_mark_list"
DW = "knowledge_dump_wal"
RC = "knowledge_recover"
AC = "knowledge_apply_corrections"
XE = "knowledge_add_cross_group_edge"
AF = "knowledge_add_facts"


def create_taken_mark(engine: Engine) -> None:
    create_mark(engine.parts.wal.directory("liminis"), "taken", 0, None)


def fill_default_dump_target(engine: Engine) -> None:
    target = engine.settings.db_path.parent.parent / "wal-compacted"
    target.mkdir()
    (target / "keep.txt").write_text("not mine")


REL = {"source_name": "Neil Armstrong", "target_name": "Apollo 11", "predicate": "COMMANDED"}
FACT = {
    "source": "Buzz Aldrin",
    "target": "Apollo 11",
    "relation_type": "FLEW_ON",
    "fact": "Buzz Aldrin flew on Apollo 11.",
}
ADD = {"reference_time": "1969-07-16", "facts": [FACT]}
TOO_LONG_PLAIN = "g" * 201  # plain characters, but more than 200 of them
TOO_LONG_ENCODED = "é" * 34  # 34 chars, 68 bytes, 204 characters once percent-encoded
TOO_LONG_SLASHES = "/" * 67  # 201 characters once percent-encoded

CASES = [
    # -- knowledge_assert_entity ----------------------------------------------------------------
    bad("assert_entity/name-missing", AE, {}, field="name"),
    bad("assert_entity/name-null", AE, {"name": None}, field="name"),
    bad("assert_entity/name-empty", AE, {"name": ""}, field="name"),
    bad("assert_entity/name-blank", AE, {"name": "   "}, field="name"),
    bad("assert_entity/name-number", AE, {"name": 42}, field="name"),
    bad("assert_entity/params-not-an-object", AE, ["Neil Armstrong"], field="name"),
    bad(
        "assert_entity/entity_uuid-number", AE, {"name": "X", "entity_uuid": 7}, field="entity_uuid"
    ),
    bad(
        "assert_entity/entity_uuid-empty", AE, {"name": "X", "entity_uuid": ""}, field="entity_uuid"
    ),
    bad(
        "assert_entity/entity_uuid-unknown",
        AE,
        {"name": "Ghost", "entity_uuid": UNKNOWN_UUID},
        NotFoundError,
        mentions="entity_uuid",
    ),
    bad(
        "assert_entity/entity_uuid-of-another-group",
        AE,
        {"name": "Saturn V", "entity_uuid": SATURN},
        NotFoundError,
        mentions=SATURN,
    ),
    bad("assert_entity/labels-string", AE, {"name": "X", "labels": "Person"}, field="labels"),
    bad("assert_entity/labels-object", AE, {"name": "X", "labels": {"a": 1}}, field="labels"),
    bad(
        "assert_entity/labels-with-number",
        AE,
        {"name": "X", "labels": ["Person", 7]},
        field="labels",
    ),
    bad("assert_entity/summary-number", AE, {"name": "X", "summary": 5}, field="summary"),
    bad(
        "assert_entity/attributes-string",
        AE,
        {"name": "X", "attributes": "a=1"},
        field="attributes",
    ),
    bad(
        "assert_entity/attributes-list", AE, {"name": "X", "attributes": [1, 2]}, field="attributes"
    ),
    bad("assert_entity/attributes-number", AE, {"name": "X", "attributes": 5}, field="attributes"),
    bad("assert_entity/group_id-empty", AE, {"name": "X", "group_id": ""}, field="group_id"),
    bad("assert_entity/group_id-number", AE, {"name": "X", "group_id": 3}, field="group_id"),
    bad(
        "assert_entity/group_id-over-200-chars",
        AE,
        {"name": "X", "group_id": TOO_LONG_PLAIN},
        field="group_id",
    ),
    bad(
        "assert_entity/group_id-over-200-once-encoded",
        AE,
        {"name": "X", "group_id": TOO_LONG_ENCODED},
        field="group_id",
    ),
    bad(
        "assert_entity/group_id-slashes-over-200-once-encoded",
        AE,
        {"name": "X", "group_id": TOO_LONG_SLASHES},
        field="group_id",
    ),
    bad(
        "assert_entity/group_id-collides-by-case",
        AE,
        {"name": "X", "group_id": "LIMINIS"},
        ConflictError,
        mentions="LIMINIS",
        kuzu_only="group WAL directories must not collide case-insensitively on disk; a server's group keys are case-sensitive and the workspace WAL stays empty",
    ),
    bad(
        "assert_entity/rename-onto-an-active-name",
        AE,
        {"name": "Buzz Aldrin", "entity_uuid": COLLINS},
        ConflictError,
        mentions="Buzz Aldrin",
    ),
    # -- knowledge_assert_relationship ----------------------------------------------------------
    bad("assert_relationship/everything-missing", AR, {}, field="source_name"),
    bad(
        "assert_relationship/target-missing",
        AR,
        {"source_name": "Neil Armstrong"},
        field="target_name",
    ),
    bad(
        "assert_relationship/predicate-missing",
        AR,
        {"source_name": "Neil Armstrong", "target_name": "Apollo 11"},
        field="predicate",
    ),
    bad("assert_relationship/predicate-blank", AR, {**REL, "predicate": "  "}, field="predicate"),
    bad(
        "assert_relationship/source_name-number", AR, {**REL, "source_name": 1}, field="source_name"
    ),
    bad(
        "assert_relationship/target_name-list",
        AR,
        {**REL, "target_name": ["Apollo 11"]},
        field="target_name",
    ),
    bad(
        "assert_relationship/source-unknown",
        AR,
        {**REL, "source_name": "Yuri Gagarin"},
        NotFoundError,
        mentions="Yuri Gagarin",
    ),
    bad(
        "assert_relationship/target-unknown",
        AR,
        {**REL, "target_name": "Vostok 1"},
        NotFoundError,
        mentions="Vostok 1",
    ),
    bad(
        "assert_relationship/endpoint-only-in-another-group",
        AR,
        {**REL, "target_name": "Saturn V"},
        NotFoundError,
        mentions="Saturn V",
    ),
    bad(
        "assert_relationship/valid_at-words", AR, {**REL, "valid_at": "yesterday"}, field="valid_at"
    ),
    bad(
        # A real bare date is accepted (its midnight UTC); an impossible one is not.
        "assert_relationship/valid_at-impossible-date-only",
        AR,
        {**REL, "valid_at": "1969-02-30"},
        field="valid_at",
    ),
    bad(
        "assert_relationship/valid_at-impossible-month",
        AR,
        {**REL, "valid_at": "1969-13-16T00:00:00Z"},
        field="valid_at",
    ),
    bad("assert_relationship/valid_at-number", AR, {**REL, "valid_at": 1969}, field="valid_at"),
    bad(
        "assert_relationship/valid_at-checked-before-resolution",
        AR,
        {"source_name": "Nobody", "target_name": "Nobody", "predicate": "P", "valid_at": "soon"},
        field="valid_at",
    ),
    bad(
        "assert_relationship/attributes-string", AR, {**REL, "attributes": "{}"}, field="attributes"
    ),
    bad("assert_relationship/fact-number", AR, {**REL, "fact": 5}, field="fact"),
    bad(
        "assert_relationship/relation_type-list",
        AR,
        {**REL, "relation_type": ["X"]},
        field="relation_type",
    ),
    bad("assert_relationship/group_id-empty", AR, {**REL, "group_id": ""}, field="group_id"),
    bad(
        "assert_relationship/group_id-unencodable",
        AR,
        {**REL, "group_id": TOO_LONG_ENCODED},
        field="group_id",
    ),
    bad(
        "assert_relationship/supersedes-string",
        AR,
        {**REL, "supersedes": UNKNOWN_UUID},
        field="supersedes",
    ),
    bad(
        "assert_relationship/supersedes-unknown-uuid",
        AR,
        {**REL, "predicate": "FLEW", "supersedes": [UNKNOWN_UUID]},
        field="supersedes",
        mentions=UNKNOWN_UUID,
    ),
    # -- knowledge_add_facts (lcg) ----------------------------------------------------------------
    bad("add_facts/reference_time-missing", AF, {"facts": [FACT]}, field="reference_time"),
    bad(
        "add_facts/reference_time-words",
        AF,
        {**ADD, "reference_time": "last week"},
        field="reference_time",
    ),
    bad("add_facts/nothing", AF, {"reference_time": "1969-07-16"}, field="facts"),
    bad("add_facts/facts-object", AF, {**ADD, "facts": FACT}, field="facts"),
    bad(
        "add_facts/fact-source-missing",
        AF,
        {**ADD, "facts": [{**FACT, "source": ""}]},
        field="facts",
        mentions="facts[0].source",
    ),
    bad(
        "add_facts/fact-sentence-number",
        AF,
        {**ADD, "facts": [{**FACT, "fact": 5}]},
        field="facts",
        mentions="facts[0].fact",
    ),
    bad(
        "add_facts/valid_at-words",
        AF,
        {**ADD, "facts": [FACT, {**FACT, "valid_at": "soon"}]},
        field="facts",
        mentions="facts[1].valid_at",
    ),
    bad(
        "add_facts/invalid_at-before-valid_at",
        AF,
        {**ADD, "facts": [{**FACT, "valid_at": "1969-07-20", "invalid_at": "1969-07-16"}]},
        field="facts",
        mentions="facts[0].invalid_at",
    ),
    bad(
        "add_facts/invalid_at-before-reference_time",
        AF,
        {**ADD, "facts": [{**FACT, "invalid_at": "1969-07-01T00:00:00Z"}]},
        field="facts",
        mentions="facts[0].invalid_at",
    ),
    bad(
        "add_facts/supersedes-string",
        AF,
        {**ADD, "facts": [{**FACT, "supersedes": UNKNOWN_UUID}]},
        field="facts",
        mentions="facts[0].supersedes",
    ),
    bad(
        "add_facts/entity-labels-string",
        AF,
        {**ADD, "entities": [{"name": "Buzz Aldrin", "labels": "Person"}]},
        field="entities",
        mentions="entities[0].labels",
    ),
    bad("add_facts/group_id-empty", AF, {**ADD, "group_id": ""}, field="group_id"),
    bad(
        "add_facts/supersedes-unknown-uuid",
        AF,
        {**ADD, "facts": [FACT, {**FACT, "supersedes": [UNKNOWN_UUID]}]},
        field="facts",
        mentions=f"facts[1].supersedes[0]: '{UNKNOWN_UUID}'",
    ),
    bad(
        "add_facts/endpoint-unknown",
        AF,
        {**ADD, "entities": [{"name": "Eagle"}], "facts": [FACT, {**FACT, "target": "Vostok 1"}]},
        field="facts",
        mentions="facts[1].target: 'Vostok 1'",
    ),
    bad(
        "add_facts/endpoint-only-in-another-group",
        AF,
        {**ADD, "facts": [{**FACT, "source": "Saturn V"}]},
        field="facts",
        mentions="facts[0].source: 'Saturn V'",
    ),
    # -- knowledge_delete_episode ---------------------------------------------------------------
    bad("delete_episode/episode_uuid-missing", DE, {}, field="episode_uuid"),
    bad("delete_episode/episode_uuid-empty", DE, {"episode_uuid": ""}, field="episode_uuid"),
    bad("delete_episode/episode_uuid-number", DE, {"episode_uuid": 42}, field="episode_uuid"),
    bad(
        "delete_episode/episode_uuid-list",
        DE,
        {"episode_uuid": [MOON_EPISODE]},
        field="episode_uuid",
    ),
    # -- knowledge_delete_by_source -------------------------------------------------------------
    bad("delete_by_source/everything-missing", DS, {}, field="source_file"),
    bad(
        "delete_by_source/source_file-missing", DS, {"group_ids": ["liminis"]}, field="source_file"
    ),
    bad(
        "delete_by_source/source_file-number",
        DS,
        {"source_file": 3, "group_ids": ["liminis"]},
        field="source_file",
    ),
    bad(
        "delete_by_source/group_ids-omitted",
        DS,
        {"source_file": "notes/moon.md"},
        field="group_ids",
    ),
    bad(
        "delete_by_source/group_ids-empty",
        DS,
        {"source_file": "notes/moon.md", "group_ids": []},
        field="group_ids",
    ),
    bad(
        "delete_by_source/group_ids-bare-string",
        DS,
        {"source_file": "notes/moon.md", "group_ids": "liminis"},
        field="group_ids",
    ),
    bad(
        "delete_by_source/group_ids-empty-string-element",
        DS,
        {"source_file": "notes/moon.md", "group_ids": ["liminis", ""]},
        field="group_ids",
    ),
    bad(
        "delete_by_source/group_ids-number-element",
        DS,
        {"source_file": "notes/moon.md", "group_ids": ["liminis", 5]},
        field="group_ids",
    ),
    # -- knowledge_delete_chunk_episode ---------------------------------------------------------
    bad("delete_chunk/chunk_id-missing", DC, {"group_ids": ["liminis"]}, field="chunk_id"),
    bad(
        "delete_chunk/chunk_id-blank",
        DC,
        {"chunk_id": " ", "group_ids": ["liminis"]},
        field="chunk_id",
    ),
    bad(
        "delete_chunk/chunk_id-number",
        DC,
        {"chunk_id": 1, "group_ids": ["liminis"]},
        field="chunk_id",
    ),
    bad("delete_chunk/group_ids-omitted", DC, {"chunk_id": "chunk-1"}, field="group_ids"),
    bad(
        "delete_chunk/group_ids-null",
        DC,
        {"chunk_id": "chunk-1", "group_ids": None},
        field="group_ids",
    ),
    bad(
        "delete_chunk/group_ids-empty",
        DC,
        {"chunk_id": "chunk-1", "group_ids": []},
        field="group_ids",
    ),
    bad(
        "delete_chunk/group_ids-object",
        DC,
        {"chunk_id": "chunk-1", "group_ids": {"g": 1}},
        field="group_ids",
    ),
    # -- knowledge_delete_by_group --------------------------------------------------------------
    bad("delete_by_group/group_ids-missing", DG, {"confirm": True}, field="group_ids"),
    bad(
        "delete_by_group/group_ids-empty", DG, {"group_ids": [], "confirm": True}, field="group_ids"
    ),
    bad(
        "delete_by_group/group_ids-bare-string",
        DG,
        {"group_ids": "liminis", "confirm": True},
        field="group_ids",
    ),
    bad(
        "delete_by_group/group_ids-empty-element",
        DG,
        {"group_ids": [""], "confirm": True},
        field="group_ids",
    ),
    bad("delete_by_group/confirm-omitted", DG, {"group_ids": ["liminis"]}, field="confirm"),
    bad(
        "delete_by_group/confirm-and-dry_run-false",
        DG,
        {"group_ids": ["liminis"], "confirm": False, "dry_run": False},
        field="confirm",
    ),
    bad(
        "delete_by_group/confirm-string",
        DG,
        {"group_ids": ["liminis"], "confirm": "true"},
        field="confirm",
    ),
    bad(
        "delete_by_group/confirm-number",
        DG,
        {"group_ids": ["liminis"], "confirm": 1},
        field="confirm",
    ),
    bad(
        "delete_by_group/dry_run-string",
        DG,
        {"group_ids": ["liminis"], "dry_run": "yes", "confirm": True},
        field="dry_run",
    ),
    # -- knowledge_clear_all --------------------------------------------------------------------
    bad("clear_all/confirm-omitted", CA, {}, field="confirm"),
    bad("clear_all/confirm-false", CA, {"confirm": False}, field="confirm"),
    bad("clear_all/confirm-string", CA, {"confirm": "true"}, field="confirm"),
    bad("clear_all/confirm-number", CA, {"confirm": 1}, field="confirm"),
    bad(
        "clear_all/preserve_wal-string",
        CA,
        {"confirm": True, "preserve_wal": "yes"},
        field="preserve_wal",
    ),
    # -- knowledge_query_cypher -----------------------------------------------------------------
    bad("query_cypher/query-missing", QC, {}, field="query"),
    bad("query_cypher/query-blank", QC, {"query": "  "}, field="query"),
    bad("query_cypher/query-number", QC, {"query": 42}, field="query"),
    bad(
        "query_cypher/create-in-unknown-table",
        QC,
        {"query": "CREATE (n:Nope {x: 1})"},
        StorageError,
        mentions="Nope",
        kuzu_only="a raw Cypher mutation is refused on FalkorDB before the store is reached (InvalidRequestError naming query), not run and failed by Kuzu",
    ),
    bad(
        "query_cypher/set-unknown-property",
        QC,
        {"query": "MATCH (e:Entity) SET e.nonexistent = 1"},
        StorageError,
        mentions="nonexistent",
        kuzu_only="a raw Cypher mutation is refused on FalkorDB before the store is reached (InvalidRequestError naming query), not run and failed by Kuzu",
    ),
    bad(
        "query_cypher/fails-after-modifying-rows",
        QC,
        {
            "query": "MATCH (e:Entity) SET e.summary = 'wiped' WITH count(e) AS n "
            f"CREATE (:Entity {{uuid: '{COLLINS}', name: 'dup'}})"
        },
        StorageError,
        mentions=COLLINS,
        kuzu_only="a raw Cypher mutation is refused on FalkorDB before the store is reached (InvalidRequestError naming query), not run and failed by Kuzu",
    ),
    bad(
        "query_cypher/read-of-unknown-table",
        QC,
        {"query": "MATCH (n:Nope) RETURN n"},
        StorageError,
        mentions="Nope",
        kuzu_only="openCypher on FalkorDB has no schema: a read of an unknown label answers no rows, not an error",
    ),
    bad(
        "query_cypher/ddl-on-existing-table",
        QC,
        {"query": "CREATE NODE TABLE Entity(uuid STRING PRIMARY KEY)"},
        StorageError,
        mentions="Entity",
        kuzu_only="a raw Cypher mutation is refused on FalkorDB before the store is reached (InvalidRequestError naming query), not run and failed by Kuzu",
    ),
    bad(
        "query_cypher/two-statements",
        QC,
        {"query": "MATCH (e:Entity) SET e.summary = 'x'; MATCH (e:Entity) RETURN e.summary"},
        field="query",
    ),
    bad("query_cypher/two-reads", QC, {"query": "RETURN 1; RETURN 2"}, field="query"),
    bad("query_cypher/begin-transaction", QC, {"query": "BEGIN TRANSACTION"}, field="query"),
    bad("query_cypher/commit", QC, {"query": "COMMIT"}, field="query"),
    bad("query_cypher/rollback", QC, {"query": "rollback"}, field="query"),
    # -- knowledge_rebuild_from_wal -------------------------------------------------------------
    bad("rebuild/from_seq-negative", RB, {"from_seq": -1}, field="from_seq"),
    bad("rebuild/from_seq-boolean", RB, {"from_seq": True}, field="from_seq"),
    bad("rebuild/from_seq-float", RB, {"from_seq": 1.0}, field="from_seq"),
    bad("rebuild/from_seq-string", RB, {"from_seq": "0"}, field="from_seq"),
    bad("rebuild/from_seq-list", RB, {"from_seq": [0]}, field="from_seq"),
    bad("rebuild/to_seq-negative", RB, {"from_seq": 1, "to_seq": -1}, field="to_seq"),
    bad("rebuild/to_seq-boolean", RB, {"from_seq": 1, "to_seq": False}, field="to_seq"),
    bad("rebuild/to_seq-float", RB, {"from_seq": 1, "to_seq": 2.5}, field="to_seq"),
    bad("rebuild/to_seq-string", RB, {"from_seq": 1, "to_seq": "9"}, field="to_seq"),
    bad("rebuild/to_seq-before-from_seq", RB, {"from_seq": 5, "to_seq": 3}, field="to_seq"),
    bad("rebuild/group_id-number", RB, {"group_id": 1}, field="group_id"),
    bad("rebuild/group_id-unencodable", RB, {"group_id": TOO_LONG_SLASHES}, field="group_id"),
    bad(
        "rebuild/group_id-without-wal",
        RB,
        {"group_id": "nowhere"},
        field="group_id",
        mentions="nowhere",
    ),
    bad("rebuild/dry_run-string", RB, {"dry_run": "true"}, field="dry_run"),
    bad("rebuild/force_clear-string", RB, {"force_clear": "yes"}, field="force_clear"),
    bad("rebuild/data-present-without-force_clear", RB, {}, ConflictError, mentions="force_clear"),
    bad(
        "rebuild/data-present-in-named-group-without-force_clear",
        RB,
        {"group_id": "mission-b", "from_seq": 0},
        ConflictError,
        mentions="force_clear",
    ),
    bad(
        "rebuild/data-present-encoded-group-without-force_clear",
        RB,
        {"group_id": "team/ops"},
        ConflictError,
        mentions="team/ops",
    ),
    bad(
        "rebuild/dry_run-with-data-present",
        RB,
        {"dry_run": True},
        ConflictError,
        mentions="dry run",
    ),
    bad(
        "rebuild/generation-file-missing",
        RB,
        {"from_seq": 1},
        WalGenerationError,
        mentions=".wal-generation.json",
        prepare=remove_default_generation,
        kuzu_only="the generation file belongs to the workspace's WAL files; a server's stream has no generation",
    ),
    # -- WAL administration ----------------------------------------------------------------------
    bad("mark_create/name-missing", MC, {}, field="name"),
    bad("mark_create/name-number", MC, {"name": 7}, field="name"),
    bad("mark_create/name-invalid", MC, {"name": "a b"}, CheckpointNameError, field="name"),
    bad("mark_create/group_id-number", MC, {"name": "m", "group_id": 1}, field="group_id"),
    bad(
        "mark_create/group_id-unencodable",
        MC,
        {"name": "m", "group_id": TOO_LONG_SLASHES},
        field="group_id",
    ),
    bad(
        "mark_create/already-exists",
        MC,
        {"name": "taken"},
        CheckpointExistsError,
        mentions="already exists",
        prepare=create_taken_mark,
        kuzu_only="WAL marks name positions of the workspace's WAL files (a server group's position is never recorded there)",
    ),
    bad("mark_delete/not-found", MD, {"name": "nope"}, CheckpointNotFoundError, mentions="nope"),
    bad("mark_delete/name-invalid", MD, {"name": "../x"}, CheckpointNameError, field="name"),
    bad("mark_list/group_id-number", ML, {"group_id": 1}, field="group_id"),
    bad("dump_wal/target_dir-number", DW, {"target_dir": 5}, field="target_dir"),
    bad("dump_wal/group_id-empty", DW, {"group_id": ""}, field="group_id"),
    bad(
        "dump_wal/target-not-empty",
        DW,
        {},
        field="target_dir",
        mentions="not empty",
        prepare=fill_default_dump_target,
    ),
    # -- recovery --------------------------------------------------------------------------------
    bad("recover/strategy-missing", RC, {}, field="strategy", mentions="strategy is required"),
    bad("recover/strategy-empty", RC, {"strategy": ""}, field="strategy"),
    bad("recover/strategy-number", RC, {"strategy": 1}, field="strategy"),
    bad(
        "recover/strategy-unknown",
        RC,
        {"strategy": "pray"},
        field="strategy",
        mentions="Unknown strategy: pray",
    ),
    # -- typing maintenance (an unknown scope is a success:false result, not an error) -----------
    bad(
        "reprocess_entity_types/scope-number",
        "knowledge_reprocess_entity_types",
        {"scope": 1},
        field="scope",
    ),
    bad(
        "reprocess_entity_types/group_id-empty",
        "knowledge_reprocess_entity_types",
        {"group_id": ""},
        field="group_id",
    ),
    bad(
        "reprocess_relation_types/dry_run-string",
        "knowledge_reprocess_relation_types",
        {"dry_run": "yes"},
        field="dry_run",
    ),
    bad(
        "canonicalize_relations/group_id-missing",
        "knowledge_canonicalize_relations",
        {},
        field="group_id",
        mentions="group_id is required and must be a non-empty string",
    ),
    bad(
        "canonicalize_relations/threshold-above-1",
        "knowledge_canonicalize_relations",
        {"group_id": "liminis", "embedding_threshold": 1.5},
        field="embedding_threshold",
    ),
    bad(
        "backfill_relation_types/group_id-number",
        "knowledge_backfill_relation_types",
        {"group_id": 3},
        field="group_id",
    ),
    # -- embedding maintenance -------------------------------------------------------------------
    bad(
        "backfill_summary_embeddings/batch_size-zero",
        "knowledge_backfill_summary_embeddings",
        {"batch_size": 0},
        field="batch_size",
    ),
    bad(
        "backfill_summary_embeddings/group_ids-number",
        "knowledge_backfill_summary_embeddings",
        {"group_ids": [7]},
        field="group_ids",
    ),
    # -- ingestion -------------------------------------------------------------------------------
    bad(
        "process_chunk/chunk_text-missing",
        "knowledge_process_chunk",
        {"chunk_id": "c", "source_file": "f"},
        field="chunk_text",
        mentions="chunk_text is required and must be non-empty",
    ),
    bad(
        "process_chunk/chunk_text-blank",
        "knowledge_process_chunk",
        {"chunk_text": "  ", "chunk_id": "c", "source_file": "f"},
        field="chunk_text",
    ),
    bad(
        "process_chunk/chunk_id-missing",
        "knowledge_process_chunk",
        {"chunk_text": "x", "source_file": "f"},
        field="chunk_id",
        mentions="chunk_id is required",
    ),
    bad(
        "process_chunk/source_file-missing",
        "knowledge_process_chunk",
        {"chunk_text": "x", "chunk_id": "c"},
        field="source_file",
        mentions="source_file is required",
    ),
    bad(
        "process_chunk/reference_time-invalid",
        "knowledge_process_chunk",
        {"chunk_text": "x", "chunk_id": "c", "source_file": "f", "reference_time": "soon"},
        field="reference_time",
        mentions="reference_time is not valid ISO 8601: soon",
    ),
    bad(
        "process_chunk/group_id-empty",
        "knowledge_process_chunk",
        {"chunk_text": "x", "chunk_id": "c", "source_file": "f", "group_id": ""},
        field="group_id",
    ),
    bad("add_episode/name-number", "knowledge_add_episode", {"name": 1}, field="name"),
    bad(
        "add_episode/reference_time-number",
        "knowledge_add_episode",
        {"name": "n", "episode_body": "b", "reference_time": 1969},
        field="reference_time",
    ),
    bad(
        "add_episode/group_id-number",
        "knowledge_add_episode",
        {"name": "n", "episode_body": "b", "group_id": 7},
        field="group_id",
    ),
    # -- curation, cross-group pointers, export/import -------------------------------------------
    bad(
        "merge/alias_uuids-string",
        "knowledge_merge_entities",
        {"canonical_name": "Michael Collins", "alias_uuids": COLLINS},
        field="alias_uuids",
    ),
    bad("merge/group_id-number", "knowledge_merge_entities", {"group_id": 1}, field="group_id"),
    bad("apply_corrections/dry_run-string", AC, {"dry_run": "yes"}, field="dry_run"),
    bad(
        "apply_corrections/no-workspace-root",
        AC,
        {},
        ConfigError,
        mentions="LIMINIS_WORKSPACE_ROOT not set",
    ),
    bad(
        "cross_edge/source-missing",
        XE,
        {"name": "N", "target": {"uuid": COLLINS}},
        field="source",
        mentions="endpoint must have either 'uuid' alone",
    ),
    bad(
        "cross_edge/target-mixed",
        XE,
        {"source": {"uuid": COLLINS}, "target": {"uuid": COLLINS, "endpoint_name": "x"}},
        field="target",
        mentions="not a mix",
    ),
    bad(
        "cross_edge/foreign-blank",
        XE,
        {"source": {"source_group_id": " ", "endpoint_name": "x"}, "target": {"uuid": COLLINS}},
        field="source",
        mentions="(FR-002)",
    ),
    bad(
        "cross_edge/uuid-unknown",
        XE,
        {"source": {"uuid": UNKNOWN_UUID}, "target": {"uuid": COLLINS}},
        NotFoundError,
        mentions=f"cross-group edge endpoint {UNKNOWN_UUID} does not exist",
    ),
    bad(
        "cross_edge/uuid-other-group",
        XE,
        {"source": {"uuid": COLLINS}, "target": {"uuid": COLLINS}, "group_id": "mission-b"},
        field="source",
        mentions="foreign to this edge's own group 'mission-b'",
    ),
    bad(
        "rebind/source_group_id-missing",
        "knowledge_rebind_pointers",
        {},
        field="source_group_id",
        mentions="source_group_id is required",
    ),
    bad(
        "rebind/source_group_id-number",
        "knowledge_rebind_pointers",
        {"source_group_id": 3},
        field="source_group_id",
    ),
    bad("code_ingest/path-missing", "knowledge_code_ingest", {}, field="path"),
    bad("code_ingest/path-blank", "knowledge_code_ingest", {"path": "  "}, field="path"),
    bad(
        "code_ingest/not-a-directory",
        "knowledge_code_ingest",
        {"path": "/nonexistent-lcg-dir"},
        field="path",
        mentions="not a directory",
    ),
    bad("export/path-missing", "knowledge_export_graph", {}, field="path"),
    bad("import/path-missing", "knowledge_import_graph", {}, field="path"),
    bad(
        "import/file-missing",
        "knowledge_import_graph",
        {"path": "nonexistent-lcg-dir/graph.jsonl"},
        field="path",
        mentions="cannot read",
    ),
    # Paths over a transport stay inside the workspace (or LCG_EXPORT_DIR), whether or not the
    # outside path exists: the answer is the same for both.
    bad(
        "import/path-outside-existing",
        "knowledge_import_graph",
        {"path": "/etc/passwd"},
        field="path",
        mentions="is outside the workspace",
    ),
    bad(
        "import/path-outside-missing",
        "knowledge_import_graph",
        {"path": "/nonexistent-lcg-dir/graph.jsonl"},
        field="path",
        mentions="is outside the workspace",
    ),
    bad(
        "export/path-outside",
        "knowledge_export_graph",
        {"path": "/tmp/lcg-export-outside.jsonl"},
        field="path",
        mentions="is outside the workspace",
    ),
    bad(
        "export/path-dotdot",
        "knowledge_export_graph",
        {"path": "../../outside.jsonl"},
        field="path",
        mentions="is outside the workspace",
    ),
    bad(
        "export/path-into-the-wal",
        "knowledge_export_graph",
        {"path": "../wal/liminis/x.jsonl", "overwrite": True},
        field="path",
        mentions="overlaps the live WAL directory",
    ),
    bad(
        "dump_wal/target-outside",
        DW,
        {"target_dir": "/tmp/lcg-dump-outside"},
        field="target_dir",
        mentions="is outside the workspace",
    ),
]


@pytest.mark.parametrize("case", CASES)
async def test_bad_input_is_refused_and_changes_nothing(workspace: Engine, case: Case) -> None:
    engine = workspace
    if case.prepare is not None:
        case.prepare(engine)
    # Status first: it refreshes the WAL bounds cache, a derived file the snapshot includes.
    status_before = await dispatch(engine, "knowledge_status", {})
    names_before = await resolved_names(engine)
    assert all(names_before.values())
    wal_before = wal_snapshot(engine.settings.wal_dir)
    db_before = db_snapshot(engine)

    with pytest.raises(LcgError) as info:
        await dispatch(engine, case.method, case.params)

    err = info.value
    assert type(err) is case.error, err
    if isinstance(err, InvalidRequestError):
        assert err.field == case.field, err.wire_message()
    assert case.mentions is not None and case.mentions in err.wire_message()
    assert wal_snapshot(engine.settings.wal_dir) == wal_before
    assert db_snapshot(engine) == db_before
    assert await dispatch(engine, "knowledge_status", {}) == status_before
    assert await resolved_names(engine) == names_before
    # ...and the engine is still healthy: a write lands and every reader sees it.
    probe = await dispatch(engine, "knowledge_assert_entity", {"name": "Probe"})
    for _ in range(3):
        nodes = await dispatch(engine, "knowledge_get_nodes_by_group", {"group_ids": ["liminis"]})
        assert probe["entity_uuid"] in {n["uuid"] for n in nodes["nodes"]}


def test_every_write_method_has_bad_input_cases() -> None:
    writes = {name for name, m in REGISTRY.items() if m.scope in ("write", "admin", "cypher")}
    covered = {p.values[0].method for p in CASES}
    assert (
        writes
        - {
            "knowledge_build_indices",
            "knowledge_close",
            "knowledge_prepare_checkpoint",
            "knowledge_recover_full",
        }
        <= covered
    )  # no params to get wrong


@pytest.mark.parametrize(
    ("method", "params"),
    [
        pytest.param(DE, {"episode_uuid": UNKNOWN_UUID}, id="delete_episode/unknown-uuid"),
        pytest.param(
            DS,
            {"source_file": "nothing.md", "group_ids": ["liminis"]},
            id="delete_by_source/no-match",
        ),
        pytest.param(
            DC, {"chunk_id": "chunk-1", "group_ids": ["mission-b"]}, id="delete_chunk/other-group"
        ),
        pytest.param(DG, {"group_ids": ["liminis"], "dry_run": True}, id="delete_by_group/dry-run"),
        pytest.param(
            DG,
            {"group_ids": ["empty-group"], "confirm": True},
            id="delete_by_group/group-without-data",
        ),
        pytest.param(
            RB,
            {"group_id": "mission-b", "from_seq": 1, "dry_run": True},
            id="rebuild/dry-run-tail",
        ),
    ],
)
async def test_requests_that_match_nothing_succeed_and_change_nothing(
    workspace: Engine, method: str, params: dict[str, Any]
) -> None:
    engine = workspace
    wal_before = wal_snapshot(engine.settings.wal_dir)
    db_before = db_snapshot(engine)
    result = await dispatch(engine, method, params)
    assert result.get("success", True) is True
    assert result.get("deleted_count", 0) == 0
    assert wal_snapshot(engine.settings.wal_dir) == wal_before
    assert db_snapshot(engine) == db_before
