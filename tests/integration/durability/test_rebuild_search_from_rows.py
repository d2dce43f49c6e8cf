"""A bulk replay (open with no database, `knowledge_rebuild_from_wal` from 0) serves the search
partitions it built from its folded rows: none is read back from the database, and they answer
exactly like partitions loaded from the database (and like the original workspace)."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

import numpy as np
import pytest

from lcg import Engine, Settings, open_engine
from lcg.admin import rebuild
from lcg.engine import Batch
from lcg.search.index import FAMILIES, SearchIndex
from lcg.service.registry import dispatch
from lcg.storage.kuzu_backend import KuzuReader
from lcg.storage.store import delete_database_files
from lcg.timeutil import now, to_wal
from lcg.wal.records import Op

pytestmark = pytest.mark.anyio

GROUPS = ("alpha", "beta")
QUERIES = ("Ada engine", "program notes", "Babbage", "worked with", "Countess")


def _ops(group: str) -> list[list[Op]]:
    at = now()
    ent = [
        Op("entity.upsert", {"uuid": f"{group}-{i}", "name": name, "summary": summary})
        for i, (name, summary) in enumerate(
            [
                ("Ada Lovelace", "Wrote the first program for the Analytical Engine."),
                ("Charles Babbage", ""),
                ("Analytical Engine", "A mechanical general-purpose computer."),
                ("Σωκράτης", "φιλόσοφος"),
            ]
        )
    ]
    facts = [
        Op(
            "fact.upsert",
            {
                "uuid": f"{group}-f{i}",
                "source": f"{group}-{s}",
                "target": f"{group}-{t}",
                "name": name,
                "fact": text,
                "valid_at": to_wal(at - timedelta(days=i)),
                "created_at": to_wal(at),
            },
        )
        for i, (s, t, name, text) in enumerate(
            [
                (0, 1, "WORKED_WITH", "Ada worked with Babbage"),
                (1, 2, "DESIGNED", "Babbage designed the Analytical Engine"),
                (0, 2, "PROGRAMMED", "Ada wrote notes on programming the engine"),
            ]
        )
    ]
    episodes = [
        Op("episode.add", {"uuid": f"{group}-p{i}", "name": f"n{i}", "content": text})
        for i, text in enumerate(["Ada and Babbage met in 1833.", "", "to be deleted"])
    ]
    later = [
        Op("entity.upsert", {"uuid": f"{group}-0", "name": "Ada King", "summary": "Countess."}),
        Op("fact.invalidate", {"uuid": f"{group}-f0", "invalid_at": to_wal(at)}),
        Op("episode.delete", {"uuid": f"{group}-p2"}),
    ]
    return [ent + facts + episodes, later]


def _partitions(index: SearchIndex, family: str, group: str) -> dict[str, Any]:
    """A partition's documents by uuid (postings, vectors, columns, tags) from one index's view."""
    ((_, view),) = index.views(family, [group])
    docs: dict[int, Counter[tuple[int, int]]] = {}
    for term in range(view.base_terms):
        hit, tf = view.postings(term)
        for doc, count in zip(hit.tolist(), tf.tolist(), strict=True):
            docs.setdefault(doc, Counter())[(term, count)] += 1
    return {
        uuid: (
            bool(view.alive[doc]),
            int(view.doc_len[doc]),
            dict(docs.get(doc, {})),
            {k: int(c[doc]) for k, c in view.columns.items()},
            {
                k: v.get(np.array([doc])).round(6).tolist() if view.has_vector[k][doc] else None
                for k, v in view.vectors.items()
            },
            view.tags[doc],
        )
        for doc, uuid in enumerate(view.uuids[: view.n])
    }


async def _answers(engine: Engine) -> list[Any]:
    out = []
    for group in GROUPS:
        for query in QUERIES:
            for method in ("knowledge_find_entities", "knowledge_find_relationships"):
                found = await dispatch(engine, method, {"query": query, "group_ids": [group]})
                out.append(found)
    return out


@pytest.fixture
def column_reads(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How often each group's search columns were read from the database."""
    reads: Counter[str] = Counter()
    for name in ("entity_columns", "fact_columns", "episode_columns"):
        real = getattr(KuzuReader, name)

        def counted(self: Any, group_id: str, *args: Any, _real: Any = real) -> Any:
            reads[group_id] += 1
            return _real(self, group_id, *args)

        monkeypatch.setattr(KuzuReader, name, counted)
    return reads


async def test_open_with_no_database_serves_partitions_built_from_the_replayed_rows(
    settings: Settings, column_reads: Counter[str]
) -> None:
    engine = open_engine(settings)
    try:
        for group in GROUPS:
            for ops in _ops(group):
                await engine.write(lambda conn, ops=ops, group=group: (None, [Batch(group, ops)]))
        original = await _answers(engine)
    finally:
        engine.close()
    delete_database_files(settings.db_path)
    column_reads.clear()
    engine = open_engine(settings)
    try:
        assert column_reads == Counter()  # no group's partitions were read back
        index = engine.parts.search
        installed = {(f, g): _partitions(index, f, g) for f in FAMILIES for g in GROUPS}
        assert await _answers(engine) == original
        index.reset()
        loaded = {(f, g): _partitions(index, f, g) for f in FAMILIES for g in GROUPS}
        assert set(column_reads) == set(GROUPS)  # these came from the database
        assert loaded == installed
        assert all(installed.values())
    finally:
        engine.close()


async def test_a_full_rebuild_from_wal_installs_partitions_built_from_its_rows(
    settings: Settings, column_reads: Counter[str]
) -> None:
    engine = open_engine(settings)
    try:
        for group in GROUPS:
            for ops in _ops(group):
                await engine.write(lambda conn, ops=ops, group=group: (None, [Batch(group, ops)]))
        original = await _answers(engine)
        column_reads.clear()
        result = await rebuild.rebuild_from_wal(engine, "alpha", 0, None, False, True)
        assert result["replay_mode"] == "bulk"
        assert column_reads["alpha"] == 0
        index = engine.parts.search
        installed = {f: _partitions(index, f, "alpha") for f in FAMILIES}
        assert await _answers(engine) == original
        index.invalidate(["alpha"])
        assert {f: _partitions(index, f, "alpha") for f in FAMILIES} == installed
        assert column_reads["alpha"] == len(FAMILIES)
    finally:
        engine.close()
