"""The ingest group index as a projection of the WAL (lcg.wal.projection): a committed batch of
what ingestion writes is taken in place, anything else marks the index for a reload."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np

from lcg.ingest.index import GroupIndex
from lcg.models import EmbeddingRow, Entity, Fact
from lcg.wal.changes import EntityUpsert, FactInvalidate, FactUpsert, GroupPurge
from lcg.wal.projection import Projection

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def _row(kind: str, owner: str, value: float) -> EmbeddingRow:
    return EmbeddingRow(kind, owner, "g", f"{kind}:{owner}", np.full(4, value, dtype=np.float32))


def _index() -> GroupIndex:
    index = GroupIndex("g", 4, position=("gen", 3))
    index.put_entity(Entity("ada", "g", "Ada"), np.full(4, 1.0, dtype=np.float32))
    return index


def test_a_batch_of_what_ingestion_writes_is_taken_in_place() -> None:
    index = _index()
    projection: Projection = index
    fact = Fact("f1", "g", "ada", "bo", "KNOWS", "Ada knows Bo.", valid_at=T0)
    projection.apply(
        "g",
        [EntityUpsert(Entity("bo", "g", "Bo")), FactUpsert(fact)],
        [
            _row("entity_name", "bo", 2.0),
            _row("entity_summary", "bo", 9.0),
            _row("fact", "f1", 3.0),
        ],
    )
    assert index.position == ("gen", 3)  # the caller moves it
    assert index.lookup_norm("bo") == "bo" and "f1" in index.facts
    assert index.names is not None and index.fact_vectors is not None
    name, sentence = index.names.get("bo"), index.fact_vectors.get("f1")
    assert name is not None and float(name[0]) == 2.0  # the name's row, not the summary's
    assert sentence is not None and float(sentence[0]) == 3.0
    projection.apply("g", [FactInvalidate("f1", T0, T0)], [])
    assert "f1" not in index.facts and index.retired


def test_a_batch_it_cannot_take_in_place_marks_it_for_a_reload() -> None:
    renamed = _index()
    renamed.apply("g", [EntityUpsert(Entity("ada", "g", "Ada Quill"))], [])
    assert renamed.position is None and renamed.lookup_norm("ada quill") is None
    purged = _index()
    purged.apply("g", [GroupPurge()], [])
    assert purged.position is None
    other = _index()
    other.apply("h", [GroupPurge()], [])  # another group's batch: nothing of this one
    other.reload(["h"])
    assert other.position == ("gen", 3)
    other.reload()
    assert other.position is None
