"""What a read at a past instant may show: entities, summaries and facts as they stood then.

An entity row holds one summary, merged from every episode that mentioned it (lcg.ingest), so
at a past valid-time instant `as_of` it may hold sentences of episodes written later: text the
graph did not have then. The rules a past-time read applies (docs/temporal.md §4), judged by
the dates of episodes (`valid_at`, an episode's reference time), since an entity's or a fact's
`created_at` is a system time for direct writes:

- an entity that episodes mention, all of them written after `as_of`, is not a seed of the
  read (`seeds_as_of`): it is reached only through a fact the read shows;
- an entity's summary is shown only when no episode mentioning it is later than `as_of`;
  otherwise it is left out, and the facts valid then, which the read lists with their own
  citations, describe it. Nothing records which sentence of a summary came from which
  episode, so a summary that one later episode touched is left out whole;
- a fact that starts after `as_of` (marked NOT YET VALID) is shown only when it was known by
  then: one of its episodes is dated `as_of` or earlier, or none of them is stored with a date
  (a direct write: nothing says it was learned later).

An entity without any mentioning episode (a direct write) is shown with its summary. The
mentioning episodes are found and dated in one batched lookup per call: from the temporal rows
held in memory where they are built (lcg.search.factrows), else from the store.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING

from lcg.models import Entity, Fact
from lcg.temporal import provenance

if TYPE_CHECKING:
    from lcg.search.index import SearchIndex
    from lcg.storage.backend import GraphReader

__all__ = ["entities_as_of", "known_by", "mentions", "seeds_as_of"]


def mentions(
    index: SearchIndex, conn: GraphReader, uuids: list[str]
) -> Mapping[str, list[tuple[str, str]]]:
    """Entity uuid -> the episodes that mention it, as (episode uuid, group)."""
    held = index.temporal
    if held is not None and not held.pending():  # built (or disabled): never start the scans
        return held.endpoint_provenance(conn, uuids)
    return conn.endpoint_provenance(uuids)


def _dates(
    index: SearchIndex, conn: GraphReader, wanted: Mapping[str, str]
) -> dict[str, datetime | None]:
    """Episode uuid -> its valid_at, for the stored ones among `wanted` (uuid -> group)."""
    stamps, rest = provenance.in_memory(index, wanted)
    if rest:
        stamps.update(provenance.stored(conn, index, wanted, rest))
    return {u: when for u, (_, when) in stamps.items()}


def _later(
    index: SearchIndex, conn: GraphReader, entities: Mapping[str, Entity], as_of: datetime
) -> dict[str, list[bool]]:
    """Per entity, for each episode mentioning it, whether that episode is dated after `as_of`
    (or undated)."""
    found = mentions(index, conn, list(entities))
    wanted = {ep: entities[u].group_id for u in entities for ep, _ in found.get(u, [])}
    dates = _dates(index, conn, wanted) if wanted else {}
    out: dict[str, list[bool]] = {}
    for uuid in entities:
        when = [dates.get(ep) for ep, _ in found.get(uuid, [])]
        out[uuid] = [w is None or w > as_of for w in when]
    return out


def entities_as_of(
    index: SearchIndex, conn: GraphReader, entities: Iterable[Entity], as_of: datetime
) -> dict[str, Entity]:
    """`entities` by uuid as a read at `as_of` shows them (module docstring): the summary of
    one that a later episode mentions is emptied."""
    found = {e.uuid: e for e in entities if e.summary.strip()}
    later = _later(index, conn, found, as_of) if found else {}
    out = {e.uuid: e for e in entities}
    for uuid, flags in later.items():
        if any(flags):
            out[uuid] = replace(out[uuid], summary="")
    return out


def seeds_as_of(
    index: SearchIndex, conn: GraphReader, entities: Sequence[Entity], as_of: datetime
) -> list[Entity]:
    """The `entities` (search hits, in order) that a read at `as_of` may start from: not
    those that only episodes dated later mention."""
    later = _later(index, conn, {e.uuid: e for e in entities}, as_of) if entities else {}
    return [e for e in entities if not (later.get(e.uuid) and all(later[e.uuid]))]


def known_by(index: SearchIndex, conn: GraphReader, fact: Fact, as_of: datetime) -> bool:
    """Whether a read at `as_of` may show `fact` (module docstring): it started by then, or
    it was known by then."""
    start = fact.valid_at or fact.created_at
    if start is None or start <= as_of or not fact.episodes:
        return True
    dates = _dates(index, conn, dict.fromkeys(fact.episodes, fact.group_id))
    dated = [w for w in dates.values() if w is not None]
    return not dated or any(w <= as_of for w in dated)
