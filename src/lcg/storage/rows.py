"""Result rows to records: the column order of the `_ENTITY`/`_FACT`/`_EPISODE` projections that
every backend returns, shared so a field added to a record is mapped once. Each backend passes
its own time decoder (Kuzu TIMESTAMP values, FalkorDB integer microseconds); `stored_time`
decodes either, for raw `GraphReader.rows` answers."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from lcg.models import Entity, Episode, Fact

When = Callable[[Any], datetime | None]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def stored_time(value: Any) -> datetime | None:
    """A time column of a raw `GraphReader.rows` answer, from either backend, as an aware UTC
    datetime: Kuzu's TIMESTAMP (naive UTC) or FalkorDB's integer microseconds since the epoch."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    if isinstance(value, int) and not isinstance(value, bool):
        return _EPOCH + timedelta(microseconds=value)
    raise TypeError(f"not a stored time: {value!r}")


def entity(row: Sequence[Any], when: When) -> Entity:
    return Entity(
        uuid=row[0],
        group_id=row[1],
        name=row[2] or "",
        labels=tuple(row[3] or ()),
        summary=row[4] or "",
        attributes=row[5] or "{}",
        created_at=when(row[6]),
        merged_into=row[7],
    )


def fact(row: Sequence[Any], when: When) -> Fact:
    return Fact(
        uuid=row[0],
        group_id=row[1],
        source_uuid=row[2] or "",
        target_uuid=row[3] or "",
        name=row[4] or "",
        fact=row[5] or "",
        relation_type=row[6] or None,  # stored as "" (never NULL: bench/results/kuzu-0.11.3.md)
        attributes=row[7] or "{}",
        episodes=tuple(row[8] or ()),
        valid_at=when(row[9]),
        invalid_at=when(row[10]),
        created_at=when(row[11]),
        expired_at=when(row[12]),
    )


def episode(row: Sequence[Any], when: When) -> Episode:
    return Episode(
        uuid=row[0],
        group_id=row[1],
        name=row[2] or "",
        content=row[3] or "",
        source=row[4] or "text",
        source_description=row[5] or "",
        source_file=row[6] or "",
        chunk_id=row[7] or "",
        created_at=when(row[8]),
        valid_at=when(row[9]),
    )


def provenance_of(rows: Iterable[Sequence[Any]]) -> dict[str, list[tuple[str, str]]]:
    """(entity uuid, episode uuid, source_description, created_at) rows, in any order, as each
    entity's (episode uuid, source_description) pairs: oldest episode first (no created_at
    last, then by uuid), each episode once."""
    ordered = sorted(rows, key=lambda r: (r[3] is None, r[3] or 0, r[1]))
    out: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for entity, episode, desc, _ in ordered:
        if all(episode != seen for seen, _ in out[entity]):
            out[entity].append((episode, desc or ""))
    return out
