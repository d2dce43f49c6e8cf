"""Provenance of facts: the episodes that asserted each one, cited on every fact a read returns.

A fact row keeps the uuids of the episodes it came from (`Fact.episodes`: the one that first
asserted it, then each later episode that repeated it). A read that returns facts cites them on
each record (docs/api.md §records, docs/temporal.md §1):

- `episode_uuids` / `source_descriptions` (the reference's keys, aligned): the fact's own
  episodes, oldest first, where the reference leaves them `[]`; where it fills them with the
  episodes mentioning either endpoint (`knowledge_list_relationships`,
  `knowledge_get_entity_neighbors`) those come first as it defines, then any of the fact's own
  episodes they lack;
- `provenance` (lcg): one `{uuid, source_description, valid_at}` per own episode, `valid_at`
  being the episode's reference time (its `valid_at`, else its `created_at`; DB read format,
  null when unknown). An episode deleted
  since (`knowledge_delete_episode` keeps the facts) is still named, with `""` and null.

The episodes of an answer page are looked up at once: their source and date from the temporal
rows held in memory where they are built (lcg.search.factrows), else from the search row
cache (lcg.search.rows: the episode rows searches read), the rest in one batched read by
primary key (`GraphReader.episodes_of_hits`); a bulk dump that names more than
`BULK_EPISODES` episodes not held reads its groups' episodes page by page instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from lcg.models import Episode, Fact
from lcg.search.factrows import Stamp
from lcg.timeutil import to_read_format

if TYPE_CHECKING:
    from lcg.engine import Engine
    from lcg.search.index import SearchIndex
    from lcg.storage.backend import GraphReader

__all__ = [
    "BULK_EPISODES",
    "Stamp",
    "cite",
    "fact_episodes",
    "in_memory",
    "provenance_of",
    "stamps_of",
    "stored",
]

# From how many distinct episodes a lookup reads the groups' episode pages rather than by key
# (a key costs ~0.3 ms in Kuzu; a page of 500 episodes about what 30 keys do).
BULK_EPISODES = 2048
_PAGE = 500


def _wanted(facts: Iterable[Fact]) -> dict[str, str]:
    """Episode uuid -> the group of the first fact naming it."""
    wanted: dict[str, str] = {}
    for fact in facts:
        for uuid in fact.episodes:
            wanted.setdefault(uuid, fact.group_id)
    return wanted


def _stamp(ep: Episode) -> Stamp:
    """An episode's source and date: its valid_at, else its created_at (both are its reference
    time when ingested; an episode written without a valid_at has its created_at)."""
    return ep.source_description, ep.valid_at or ep.created_at


def in_memory(index: SearchIndex, uuids: Iterable[str]) -> tuple[dict[str, Stamp], list[str]]:
    """The stamps of `uuids` held in memory (the temporal rows, then the row cache), and the
    uuids neither holds."""
    held = index.temporal
    found, rest = held.episode_stamps(uuids) if held is not None else ({}, list(uuids))
    if rest and index.rows is not None:
        cached = index.rows["episode"].get(rest)
        found.update((u, _stamp(ep)) for u, ep in cached.items())
        rest = [u for u in rest if u not in cached]
    return found, rest


def stored(
    conn: GraphReader, index: SearchIndex, wanted: Mapping[str, str], rest: list[str]
) -> dict[str, Stamp]:
    """The stamps of `rest` read from the store (and put in the row cache)."""
    groups = list(dict.fromkeys(wanted[u] for u in rest))
    cache = index.rows["episode"] if index.rows is not None else None
    # Taken before the read (each statement is its own snapshot): a commit landing meanwhile
    # keeps its rows out of the cache.
    version = cache.version if cache is not None else 0
    if len(rest) > BULK_EPISODES:
        need = set(rest)
        read = {
            ep.uuid: ep
            for group in groups
            for page in conn.episode_pages(group, _PAGE)
            for ep in page
            if ep.uuid in need
        }
    else:
        read = conn.episodes_of_hits(groups, rest)
        missing = [u for u in rest if u not in read]
        if missing:  # an episode of another group than its fact's (cross-group data)
            read.update(conn.episodes_by_uuids(missing))
        if cache is not None:
            cache.put(version, read.items())
    return {u: _stamp(ep) for u, ep in read.items()}


def stamps_of(
    index: SearchIndex,
    conn: GraphReader,
    facts: Iterable[Fact],
    also: Mapping[str, str] | None = None,
) -> dict[str, Stamp]:
    """(source_description, valid_at) of the stored episodes the `facts` name, by uuid (deleted
    ones absent), looked up at once on `conn` (module docstring); `also`: more episodes (uuid
    -> group) to look up with them."""
    wanted = {**(also or {}), **_wanted(facts)}
    found, rest = in_memory(index, wanted)
    if rest:
        found.update(stored(conn, index, wanted, rest))
    return found


def _by(stamps: Mapping[str, Stamp], uuid: str, as_of: datetime | None) -> bool:
    """Whether episode `uuid` was written by `as_of` (its valid_at; unknown: no)."""
    when = stamps.get(uuid, ("", None))[1]
    return as_of is None or (when is not None and when <= as_of)


def provenance_of(
    fact: Fact, stamps: Mapping[str, Stamp], as_of: datetime | None = None
) -> list[dict[str, Any]]:
    """The `provenance` list of a fact record: each own episode with its source and date; at
    a past instant `as_of`, only those written by then, unless none was (a fact learned later
    about an earlier time still names where it came from)."""
    own = list(dict.fromkeys(fact.episodes))
    then = [u for u in own if _by(stamps, u, as_of)]
    out = []
    for uuid in then or own:
        source, valid_at = stamps.get(uuid, ("", None))
        out.append(
            {"uuid": uuid, "source_description": source, "valid_at": to_read_format(valid_at)}
        )
    return out


def cite(
    record: dict[str, Any],
    fact: Fact,
    stamps: Mapping[str, Stamp],
    *,
    endpoints: bool = False,
    as_of: datetime | None = None,
) -> dict[str, Any]:
    """`record` (the wire record of `fact`) with its provenance filled in (module docstring);
    `endpoints`: its `episode_uuids` already hold the episodes mentioning either endpoint;
    `as_of`: a past-time read, which names no episode written later (`provenance_of`; of the
    endpoints' episodes, those whose date `stamps` holds)."""
    cited = provenance_of(fact, stamps, as_of)
    if endpoints:
        if as_of is not None:
            pairs = [
                (u, d)
                for u, d in zip(record["episode_uuids"], record["source_descriptions"], strict=True)
                if _by(stamps, u, as_of)
            ]
            record["episode_uuids"] = [u for u, _ in pairs]
            record["source_descriptions"] = [d for _, d in pairs]
        have = set(record["episode_uuids"])
        extra = [c for c in cited if c["uuid"] not in have]
        record["episode_uuids"] = [*record["episode_uuids"], *(c["uuid"] for c in extra)]
        record["source_descriptions"] = [
            *record["source_descriptions"],
            *(c["source_description"] for c in extra),
        ]
    else:
        record["episode_uuids"] = [c["uuid"] for c in cited]
        record["source_descriptions"] = [c["source_description"] for c in cited]
    record["provenance"] = cited
    return record


async def fact_episodes(engine: Engine, facts: list[Fact]) -> dict[str, Stamp]:
    """`stamps_of` the `facts`, taking a pooled reader only for those memory lacks."""
    index = engine.parts.search
    wanted = _wanted(facts)
    found, rest = in_memory(index, wanted)
    if rest:
        found.update(await engine.read(lambda conn: stored(conn, index, wanted, rest)))
    return found
