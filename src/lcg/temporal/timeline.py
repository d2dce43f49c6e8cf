"""Fact history: changes in a time window and an entity's timeline, with supersession links.

A fact changes four ways, one per bi-temporal column: it **started** (`valid_at`), **ended**
(`invalid_at`), was **learned** (`created_at`) or **retired** (`expired_at`). A window is
half-open, `[since, until)`.

What superseded what is derived, not stored (the WAL's `fact.invalidate` records only the
fact's new `invalid_at`/`expired_at`). Supersession (lcg.ingest.supersede, or any
`Engine.commit_episode` with invalidations) retires fact O in the commit that adds its
successor N: O's `invalid_at` is N's `valid_at` and O's `expired_at` is N's `created_at`. So N
succeeds a retired O when N is in the same group, shares an endpoint with O, started exactly
when O ended (`N.valid_at == O.invalid_at`) and was learned when O was retired (within
`SAME_COMMIT`). Facts added by the same commit qualify too when they share an endpoint, so
among several candidates only those with the same relation (equal predicate `name`, or equal
non-null `relation_type`) are kept; if none has it, the link is left out rather than guessed.
A fact that ended without being retired (created with its `invalid_at`) is succeeded by a fact
with the same source and relation that started when it ended.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from lcg.errors import NotFoundError
from lcg.models import Entity, Fact, entity_to_wire, fact_to_wire
from lcg.temporal import columns, provenance
from lcg.temporal.provenance import Stamp
from lcg.timeutil import now, to_read_format

if TYPE_CHECKING:
    from lcg.engine import Engine
    from lcg.storage.backend import GraphReader

__all__ = [
    "CHANGE_KINDS",
    "SAME_COMMIT",
    "entity_timeline",
    "fact_changes",
    "fact_record",
    "fact_status",
    "stable_key",
    "successions",
]

CHANGE_KINDS = ("started", "ended", "learned", "retired")
_COLUMNS = {
    "started": "valid_at",
    "ended": "invalid_at",
    "learned": "created_at",
    "retired": "expired_at",
}
SAME_COMMIT = timedelta(seconds=5)


def fact_record(fact: Fact, stamps: Mapping[str, Stamp] | None = None) -> dict[str, Any]:
    """The edge object of docs/api.md §records with both system-time columns filled in, citing
    the fact's episodes (lcg.temporal.provenance; `stamps`: the source and date of the stored
    ones it names).

    The reference's reads always answer `created_at: ""` and have no `expired_at`; lcg's
    temporal methods return both (DB read format, `expired_at` null until it is retired).
    """
    record = provenance.cite(fact_to_wire(fact), fact, stamps or {})
    record["created_at"] = to_read_format(fact.created_at) or ""
    record["expired_at"] = to_read_format(fact.expired_at)
    return record


def stable_key(fact: Fact) -> tuple[str, str, str]:
    """How facts sharing an instant are ordered: by sentence, then predicate, then uuid. A
    uuid is minted at random, so ordering ties by it alone printed the same graph, ingested
    twice, in two orders; the uuid only separates facts whose text is the same too."""
    return fact.fact, fact.name, fact.uuid


def fact_status(fact: Fact, at: datetime) -> str:
    """`current`, `ended` (its validity is over, the graph still holds it), `superseded`
    (retired with an end of validity) or `retracted` (retired without one)."""
    if fact.expired_at is not None and fact.expired_at <= at:
        return "superseded" if fact.invalid_at is not None else "retracted"
    if fact.invalid_at is not None and fact.invalid_at <= at:
        return "ended"
    return "current"


def _same_relation(old: Fact, new: Fact) -> bool:
    if old.name == new.name:
        return True
    return bool(old.relation_type) and old.relation_type == new.relation_type


def successions(facts: Iterable[Fact]) -> dict[str, list[str]]:
    """Old fact uuid -> uuids of the facts that superseded it (module docstring's rule)."""
    unique = {f.uuid: f for f in facts}
    by_end: dict[tuple[str, str], list[Fact]] = defaultdict(list)
    for fact in unique.values():
        for end in dict.fromkeys((fact.source_uuid, fact.target_uuid)):
            by_end[(fact.group_id, end)].append(fact)
    out: dict[str, list[str]] = {}
    for old in unique.values():
        if old.invalid_at is None:
            continue
        near = {
            f.uuid: f
            for end in (old.source_uuid, old.target_uuid)
            for f in by_end[(old.group_id, end)]
            if f.uuid != old.uuid and f.valid_at == old.invalid_at
        }
        if old.expired_at is None:
            found = [
                f
                for f in near.values()
                if f.source_uuid == old.source_uuid and _same_relation(old, f)
            ]
        else:
            retired = old.expired_at
            found = [
                f
                for f in near.values()
                if f.created_at is not None and abs(f.created_at - retired) <= SAME_COMMIT
            ]
            if len(found) > 1:
                found = [f for f in found if _same_relation(old, f)]
        if found:
            out[old.uuid] = sorted(f.uuid for f in found)
    return out


async def fact_changes(
    engine: Engine,
    since: datetime,
    until: datetime | None,
    group_ids: list[str] | None,
    entity_uuid: str | None,
    limit: int,
) -> dict[str, Any]:
    """Facts that started, ended, were learned or retired in `[since, until)`, in time order.

    One entry per (fact, kind); entries sharing an instant are ordered started, ended, learned,
    retired, then by `stable_key` (sentence, predicate, uuid). At most `limit` entries; `truncated` says whether more existed.
    """
    end = until or now()
    views = (
        None
        if entity_uuid is not None
        else await columns.fact_views(engine.parts.search, group_ids)
    )
    held = None if views is None else await columns.held_rows(engine.parts.search)

    def read(conn: GraphReader) -> list[Fact]:
        if views is None:
            return conn.fact_changes(group_ids, since, end, entity_uuid)
        kinds = [_COLUMNS[kind] for kind in CHANGE_KINDS]
        return columns.changed_facts(views, conn, since, end, kinds, limit, held)

    facts = await engine.read(read)
    entries: list[tuple[datetime, int, tuple[str, str, str], Fact]] = []
    for fact in facts:
        for rank, kind in enumerate(CHANGE_KINDS):
            at = getattr(fact, _COLUMNS[kind])
            if at is not None and since <= at < end:
                entries.append((at, rank, stable_key(fact), fact))
    entries.sort(key=lambda e: (e[0], e[1], e[2]))
    kept = entries[:limit]
    episodes = await provenance.fact_episodes(engine, [fact for *_, fact in kept])
    changes = [
        {"kind": CHANGE_KINDS[rank], "at": to_read_format(at), "fact": fact_record(fact, episodes)}
        for at, rank, _, fact in kept
    ]
    return {
        "changes": changes,
        "count": len(changes),
        "since": to_read_format(since),
        "until": to_read_format(end),
        "truncated": len(entries) > len(kept),
    }


async def entity_timeline(
    engine: Engine, entity_uuid: str | None, name: str | None, group_id: str
) -> dict[str, Any]:
    """Every fact about an entity, current and past, in valid-time order, with supersession.

    Facts without `valid_at` are placed at the time the graph learned them.

    Raises:
        NotFoundError: no entity has that uuid (or that name in the group).
    """
    if entity_uuid is None:
        found = await engine.entity_by_name(group_id, name or "")
        if found is None:
            raise NotFoundError(
                "entity", name or "", f"'{name}' does not exist in group '{group_id}'"
            )
        entity_uuid = found.uuid
    uuid = entity_uuid

    def read(conn: GraphReader) -> tuple[Entity | None, list[Fact], list[Fact]]:
        entity = conn.entity_by_uuid(uuid)
        if entity is None:
            return None, [], []
        facts = conn.facts_around([uuid])
        # The entity's own facts are read once: its peers' facts add the others.
        ends = {e for f in facts for e in (f.source_uuid, f.target_uuid)} - {uuid}
        peers = conn.facts_around(sorted(ends)) if ends else []
        return entity, facts, peers

    entity, facts, peers = await engine.read(read)
    if entity is None:
        raise NotFoundError("entity", uuid)
    successors = successions([*facts, *peers])
    predecessors: dict[str, list[str]] = defaultdict(list)
    for old, news in successors.items():
        for new in news:
            predecessors[new].append(old)
    at = now()

    def order(f: Fact) -> tuple[datetime, datetime, str, str, str]:
        # Facts learned together with the same start (one episode) are ordered by their text,
        # not by their random uuids, so the same history reads the same on every run.
        floor = datetime.min.replace(tzinfo=at.tzinfo)
        start = f.valid_at or f.created_at or floor
        return (start, f.created_at or floor, *stable_key(f))

    episodes = await provenance.fact_episodes(engine, facts)
    records = []
    for fact in sorted(facts, key=order):
        record = fact_record(fact, episodes)
        record["direction"] = "outgoing" if fact.source_uuid == uuid else "incoming"
        record["status"] = fact_status(fact, at)
        record["supersedes"] = sorted(predecessors.get(fact.uuid, []))
        record["superseded_by"] = successors.get(fact.uuid, [])
        records.append(record)
    return {"entity": entity_to_wire(entity), "facts": records, "count": len(records)}
