"""Context for agents: graph facts around a question, packed into a cited block under a budget.

`get_context` seeds from hybrid search (entities and facts matching the query), expands `hops`
steps through facts, ranks, and packs a plain-text block whose estimated size,
`ceil(UTF-8 bytes / 4)` tokens for the *whole* block, never exceeds the budget. Invariants:

- a fact line is written only together with (or after) the lines of both its endpoints, so the
  block never cites a fact whose entities it does not show;
- facts valid at the reference instant (`as_of`, default now) come first; the others (ended or
  superseded) follow, marked with their validity window; withdrawn facts (retired without an
  end of validity) are never shown;
- whatever was found but not written is counted (`omitted_nodes`, `omitted_facts`), and
  `truncated` says whether anything was.

Expansion is bounded: at most `MAX_FRONTIER` entities (the nearest, seeds first, then those
reached through the best-ranked facts) are expanded per hop, at most `DEGREE_CAP` facts of one
entity are taken per hop (current first, then the latest), and at most `MAX_CANDIDATE_FACTS`
facts are ranked; facts cut by these bounds count as omitted.

Where it reads: the expansion runs on the search index's fact columns (endpoints and
the four instants of every fact, kept in step with commits), not on the store: a Kuzu 0.11
traversal costs ~3 ms per entity at any size and an `IN`-list or `UNWIND` one scans the table
(~0.65 s at 1M facts), so two hops read ~800 rows a call. Only what the block may show is read
from the store: existence of the reached entities comes from the name index, and the ranked
facts and their endpoints are fetched in slices of `HYDRATE` as the packing writes them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import anyio
import numpy as np
import numpy.typing as npt

from lcg.graph import hybrid
from lcg.models import Entity, Fact
from lcg.search.index import ALWAYS, NEVER, SearchIndex, micros
from lcg.search.partition import View
from lcg.temporal import asof
from lcg.temporal.evidence import Passage, find_passages, pack_passages
from lcg.temporal.timeline import fact_status, successions
from lcg.timefilter import CURRENT, TimeFilter
from lcg.timeutil import now, to_read_format

if TYPE_CHECKING:
    from lcg.engine import Engine
    from lcg.storage.backend import GraphReader

__all__ = [
    "DEGREE_CAP",
    "HYDRATE",
    "MAX_CANDIDATE_FACTS",
    "MAX_FRONTIER",
    "MISFITS",
    "PASSAGE_SHARE",
    "Candidate",
    "Packed",
    "add_passages",
    "estimate_tokens",
    "get_context",
    "pack",
    "split_budget",
    "successor_of",
]

MAX_FRONTIER = 64
MAX_CANDIDATE_FACTS = 600
DEGREE_CAP = 200
HYDRATE = 8
MISFITS = 8
# The share of the budget the verbatim passages get first (lcg.temporal.evidence); the graph lines
# take the rest, and passages fill what they leave. Measured with bench/evidence.py
# (docs/search.md, "Context").
PASSAGE_SHARE = 0.9
_PASSAGES_HEAD = "Passages:\n"
Ints = npt.NDArray[np.int64]
_SUMMARY_CHARS = 280
# The fewest bytes a line can take besides its uuid (its uuid's characters are at least as many
# bytes): "[F1] E1 --> E1:  [valid] (fact )\n" and "[E1]  (entity )\n". A line whose lower
# bound already exceeds the room left is skipped without being formatted: past the first few
# dozen facts the budget is full and most candidates are (pack was ~15% of a context read's CPU).
_FACT_LINE_MIN = 33
_ENTITY_LINE_MIN = 16
_QUERY_CHARS = 200


def estimate_tokens(text: str) -> int:
    """The token estimate the budget is checked against: ceil(UTF-8 bytes / 4)."""
    return math.ceil(len(text.encode("utf-8")) / 4)


@dataclass(frozen=True)
class Candidate:
    """A fact found by the expansion, before its row is read."""

    uuid: str
    source_uuid: str
    target_uuid: str


@dataclass
class Packed:
    """The packed block and what it holds and left out."""

    text: str
    node_ids: list[str] = field(default_factory=list)
    fact_ids: list[str] = field(default_factory=list)
    omitted_nodes: int = 0
    omitted_facts: int = 0


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _entity_line(label: str, e: Entity, cites: Sequence[str] = ()) -> str:
    """`[E1] name (labels) — summary (entity <uuid>; passages P2, P5)`: the passages cited are
    the quoted episodes that mention the entity."""
    kinds = [x for x in e.labels if x != "Entity"]
    kind = f" ({', '.join(kinds)})" if kinds else ""
    summary = f" — {_clip(e.summary, _SUMMARY_CHARS)}" if e.summary.strip() else ""
    where = f"; passages {', '.join(cites)}" if cites else ""
    return f"[{label}] {_clip(e.name, 200)}{kind}{summary} (entity {e.uuid}{where})\n"


def _window(f: Fact) -> str:
    start = to_read_format(f.valid_at) or "?"
    end = to_read_format(f.invalid_at) or "now"
    return f"{start} → {end}"


def _fact_line(
    label: str,
    f: Fact,
    ends: tuple[str, str],
    current: bool,
    at: datetime,
    successor: Callable[[Fact], Fact | None] | None = None,
) -> str:
    if current and f.invalid_at is not None and at < f.invalid_at <= now():
        state = f"valid then; ENDED since, was valid {_window(f)}"  # a past read (`as_of`)
        after = successor(f) if successor is not None else None
        if after is not None:
            start = to_read_format(after.valid_at) or "?"
            state += f"; then: {_clip(after.fact, 300)} (fact {after.uuid}, from {start})"
    elif current:
        state = f"valid {_window(f)}" if f.valid_at or f.invalid_at else "valid"
    elif f.valid_at is not None and f.valid_at > at:
        state = f"NOT YET VALID, valid {_window(f)}"
    else:
        state = f"{fact_status(f, now()).upper()}, was valid {_window(f)}"
    cites = f"fact {f.uuid}"
    if f.episodes:
        cites += "; episodes " + ", ".join(f.episodes)
    text = f"{ends[0]} -{_clip(f.name, 80)}-> {ends[1]}: {_clip(f.fact, 600)}"
    return f"[{label}] {text} [{state}] ({cites})\n"


def pack(
    query: str,
    entities: Mapping[str, Entity],
    node_order: Sequence[str],
    facts: Sequence[Fact] | Sequence[Candidate],
    is_current: dict[str, bool],
    token_budget: int,
    at: datetime,
    *,
    lead: Sequence[str] = (),
    omitted_facts: int = 0,
    fact_of: Callable[[Candidate], Fact | None] | None = None,
    cites: Mapping[str, Sequence[str]] | None = None,
    successor: Callable[[Fact], Fact | None] | None = None,
) -> Packed:
    """Pack ranked entities and facts into a block of at most `token_budget` estimated tokens.

    `node_order` ranks entities, `facts` ranks facts; a fact is written only with both endpoints
    (added with it when not yet written). The `lead` entities get the first lines, then facts in
    rank order, then the remaining entities while they fit; after `MISFITS` facts (then
    entities) that were formatted and did not fit, the rest are not tried (each would be read
    from the store only to be left out). `omitted_facts` counts facts cut
    before packing. `at` is the instant validity is judged at (for the NOT YET VALID mark).
    `facts` may be candidates, whose rows `fact_of` reads when a line is written (one it cannot
    read counts as omitted); `entities` may likewise read its rows on first use. `cites`:
    entity uuid -> labels of the quoted passages whose episodes mention it (its line cites them;
    get_context passes them for the lead entities). `successor`: the fact that superseded an
    ENDED-since fact of a past read, named on its line (`successor_of`).
    """
    cited = cites or {}
    limit = token_budget * 4
    heads = _heads(query)
    used = sum(len(h.encode()) for h in heads)
    labels: dict[str, str] = {}
    node_lines: list[str] = []
    fact_lines: list[str] = []
    out = Packed(text="")

    def add_nodes(uuids: list[str], extra: int) -> bool:
        nonlocal used
        fresh = [u for u in dict.fromkeys(uuids) if u not in labels]
        try:
            lines = [
                _entity_line(f"E{len(labels) + i + 1}", entities[u], cited.get(u, ()))
                for i, u in enumerate(fresh)
            ]
        except KeyError:  # a row gone since the expansion found it
            return False
        cost = sum(len(line.encode()) for line in lines) + extra
        if used + cost > limit:
            return False
        for u, line in zip(fresh, lines, strict=True):
            labels[u] = f"E{len(labels) + 1}"
            node_lines.append(line)
            out.node_ids.append(u)
        used += cost - extra
        return True

    for uuid in lead:
        if uuid in entities:
            add_nodes([uuid], 0)
    misfits = 0
    for f in facts:
        ends = [f.source_uuid, f.target_uuid]
        if any(u not in entities for u in ends):
            out.omitted_facts += 1
            continue
        fresh = [u for u in dict.fromkeys(ends) if u not in labels]
        floor = _FACT_LINE_MIN + len(f.uuid) + sum(_ENTITY_LINE_MIN + len(u) for u in fresh)
        # Cannot fit whatever its text, or the block is as good as full: skip formatting it.
        if used + floor > limit or misfits >= MISFITS:
            out.omitted_facts += 1
            continue
        full = f if isinstance(f, Fact) else fact_of(f) if fact_of is not None else None
        if full is None:
            out.omitted_facts += 1
            continue
        names = [labels.get(u) or f"E{len(labels) + fresh.index(u) + 1}" for u in ends]
        line = _fact_line(
            f"F{len(fact_lines) + 1}",
            full,
            (names[0], names[1]),
            is_current.get(f.uuid, False),
            at,
            successor,
        )
        size = len(line.encode())
        if add_nodes(ends, size):
            fact_lines.append(line)
            out.fact_ids.append(f.uuid)
            used += size
        else:
            out.omitted_facts += 1
            misfits += 1
    misfits = 0
    for uuid in node_order:
        if misfits >= MISFITS:
            break
        if uuid in entities and uuid not in labels and used + _ENTITY_LINE_MIN + len(uuid) <= limit:
            misfits += not add_nodes([uuid], 0)
    out.omitted_nodes = sum(1 for u in node_order if u in entities and u not in labels)
    out.omitted_facts += omitted_facts
    out.text = heads[0] + heads[1] + "".join(node_lines) + heads[2] + "".join(fact_lines)
    return out


@dataclass
class _Found:
    node_order: list[str]
    facts: list[Candidate]
    is_current: dict[str, bool]
    cut_facts: int
    distance: dict[str, int]


def _around(
    index: SearchIndex,
    views: list[tuple[str, View]],
    keys: list[str],
    visible: TimeFilter,
    at_us: int,
) -> tuple[list[tuple[Candidate, bool, int]], int]:
    """The shown facts of `views` with an endpoint among `keys`, each once, as (candidate, is
    current, start); at most `DEGREE_CAP` per key (the current, then latest, first), and how
    many shown facts that cap left out."""
    codes = [c for c in (index.known_code(u) for u in keys) if c is not None]
    if not codes:
        return [], 0
    wanted = np.asarray(codes, dtype=np.int64)
    # A lookup table over the codes (the last entry false, for the clipped larger codes): one
    # gather per column, ~6 ms at 1M facts against ~20 ms for `np.isin`.
    table = np.zeros(int(wanted.max()) + 2, dtype=bool)
    table[wanted] = True
    out: list[tuple[Candidate, bool, int]] = []
    capped = 0
    for _, view in views:
        cols = view.columns
        src, tgt = cols["source"], cols["target"]
        touching = np.take(table, src, mode="clip") | np.take(table, tgt, mode="clip")
        docs = np.flatnonzero(view.live() & touching)
        inv, exp = cols["invalid_at"][docs], cols["expired_at"][docs]
        docs = docs[~((exp != NEVER) & (inv == NEVER))]  # withdrawn: never context
        if not len(docs):
            continue
        valid, created = cols["valid_at"][docs], cols["created_at"][docs]
        current = visible.mask(valid, cols["invalid_at"][docs], created, cols["expired_at"][docs])
        start = np.where(valid != ALWAYS, valid, np.where(created != ALWAYS, created, at_us))
        uuids = [view.uuids[d] for d in docs.tolist()]
        s, t = src[docs], tgt[docs]
        ends = index.decode(np.concatenate([s, t]).tolist())
        rows = [
            (Candidate(u, ends[i], ends[len(docs) + i]), bool(c), int(b))
            for i, (u, c, b) in enumerate(zip(uuids, current.tolist(), start.tolist(), strict=True))
        ]
        if len(rows) > DEGREE_CAP:
            rows, cut = _cap_degree(rows, s, t, wanted)
            capped += cut
        out += rows
    return out, capped


def _cap_degree(
    rows: list[tuple[Candidate, bool, int]], src: Ints, tgt: Ints, wanted: Ints
) -> tuple[list[tuple[Candidate, bool, int]], int]:
    """`rows` without the facts beyond the first `DEGREE_CAP` of each key they touch (ranked
    current first, then latest start, then uuid); a fact stays if any key keeps it."""
    touching: dict[int, list[int]] = {}
    for i, (a, b) in enumerate(zip(src.tolist(), tgt.tolist(), strict=True)):
        for code in {a, b}:
            touching.setdefault(code, []).append(i)
    keys = set(wanted.tolist())
    if all(len(v) <= DEGREE_CAP for k, v in touching.items() if k in keys):
        return rows, 0
    keep: set[int] = set()
    for code, idx in touching.items():
        if code in keys:
            idx.sort(key=lambda i: (not rows[i][1], -rows[i][2], rows[i][0].uuid))
            keep.update(idx[:DEGREE_CAP])
    kept = [r for i, r in enumerate(rows) if i in keep]
    return kept, len(rows) - len(kept)


def _expand(
    index: SearchIndex,
    views: list[tuple[str, View]],
    existing: Callable[[Iterable[str]], set[str]],
    seed_nodes: list[str],
    seed_facts: list[Fact],
    hops: int,
    visible: TimeFilter,
    at: datetime,
) -> _Found:
    """Seeds plus `hops` steps through facts (read from the search index's fact columns, no
    store reads); facts ranked current first, then seed facts, then by distance and recency."""
    at_us = micros(at, 0)
    distance: dict[str, int] = {}
    for uuid in seed_nodes:
        distance.setdefault(uuid, 0)
    for f in seed_facts:
        distance.setdefault(f.source_uuid, 0)
        distance.setdefault(f.target_uuid, 0)
    found: dict[str, tuple[Candidate, bool, int]] = {}
    for f in seed_facts:
        if _shown(f):
            start = micros(f.valid_at or f.created_at or at, 0)
            found.setdefault(
                f.uuid, (Candidate(f.uuid, f.source_uuid, f.target_uuid), visible.admits(f), start)
            )
    capped = 0
    frontier = list(distance)
    known: set[str] = set()

    def alive(keys: list[str]) -> list[str]:
        fresh = [k for k in keys if k not in known]
        known.update(existing(fresh))
        return [k for k in keys if k in known]

    for hop in range(1, hops + 1):
        rows, cut = _around(index, views, alive(frontier[:MAX_FRONTIER]), visible, at_us)
        capped += cut
        # The next frontier: ends first reached through the best facts (current, latest).
        rows.sort(key=lambda r: (not r[1], -r[2], r[0].uuid))
        nxt: list[str] = []
        for row in rows:
            found.setdefault(row[0].uuid, row)
            for end in (row[0].source_uuid, row[0].target_uuid):
                if end not in distance:
                    distance[end] = hop
                    nxt.append(end)
        frontier = nxt
    if hops == 0:
        inside = set(distance)
        rows, cut = _around(index, views, alive(list(distance)), visible, at_us)
        capped += cut
        for row in rows:
            if row[0].source_uuid in inside and row[0].target_uuid in inside:
                found.setdefault(row[0].uuid, row)
    is_current = {uuid: row[1] for uuid, row in found.items()}
    seed_rank = {f.uuid: i for i, f in enumerate(seed_facts)}

    def fact_key(row: tuple[Candidate, bool, int]) -> tuple[int, int, int, int, str]:
        c = row[0]
        hop = min(distance.get(c.source_uuid, hops + 1), distance.get(c.target_uuid, hops + 1))
        return (0 if row[1] else 1, seed_rank.get(c.uuid, len(seed_rank)), hop, -row[2], c.uuid)

    ranked = [row[0] for row in sorted(found.values(), key=fact_key)]
    kept, cut_facts = ranked[:MAX_CANDIDATE_FACTS], len(ranked) - MAX_CANDIDATE_FACTS
    degree: dict[str, int] = {}
    for c in kept:
        for end in (c.source_uuid, c.target_uuid):
            degree[end] = degree.get(end, 0) + 1
    # Seeds keep their search rank among equals; entities reached later are ordered by uuid.
    seed_order = {uuid: i for i, uuid in enumerate(distance) if distance[uuid] == 0}
    node_order = sorted(
        distance, key=lambda u: (distance[u], -degree.get(u, 0), seed_order.get(u, 0), u)
    )
    return _Found(node_order, kept, is_current, max(cut_facts, 0) + capped, distance)


def _shown(f: Fact) -> bool:
    """Withdrawn facts (retired without an end of validity) are never context."""
    return not (f.expired_at is not None and f.invalid_at is None)


class _Rows(Mapping[str, Entity]):
    """The entities and facts a packing needs, read from the store only when it writes them,
    `HYDRATE` at a time: a fact with the next ranked candidates and all their endpoints, an
    entity with the next ones of the node order. A block of ~40 facts reads ~100 rows, not
    the thousands two hops reach."""

    def __init__(
        self,
        conn: GraphReader,
        found: _Found,
        existing: set[str],
        entities: dict[str, Entity],
        facts: dict[str, Fact | None],
        shown: Callable[[dict[str, Entity]], dict[str, Entity]] = dict,
        admit: Callable[[Fact], bool] | None = None,
    ) -> None:
        self._conn = conn
        # A past-time read's rules (lcg.temporal.asof): entities as they stood then, and
        # whether a fact that starts later was known by then.
        self._shown = shown
        self._admit = admit
        self._ranked = found.facts
        self._fact_pos = {c.uuid: i for i, c in enumerate(found.facts)}
        self._nodes = [u for u in found.node_order if u in existing]
        self._node_pos = {u: i for i, u in enumerate(self._nodes)}
        self._existing = existing
        self._entities = entities
        self._facts = facts
        self.reads = 0  # store reads so far (benchmarks and tests look)

    def __contains__(self, uuid: object) -> bool:
        return uuid in self._existing

    def __getitem__(self, uuid: str) -> Entity:
        if uuid not in self._existing:
            raise KeyError(uuid)
        if uuid not in self._entities:
            at = self._node_pos.get(uuid, 0)
            self._fetch_entities([uuid, *self._nodes[at : at + HYDRATE]])
        found = self._entities.get(uuid)
        if found is None:  # gone since the expansion found it
            raise KeyError(uuid)
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self._existing)

    def __len__(self) -> int:
        return len(self._existing)

    def _fetch_entities(self, uuids: list[str]) -> None:
        wanted = [
            u for u in dict.fromkeys(uuids) if u in self._existing and u not in self._entities
        ][: 2 * HYDRATE]
        if wanted:
            self.reads += 1
            self._entities.update(self._shown(self._conn.entities_by_uuids(wanted)))

    def fact(self, ref: Candidate) -> Fact | None:
        """The stored fact of a candidate (None if it is gone or its endpoints moved)."""
        ends = (ref.source_uuid, ref.target_uuid)
        if ref.uuid not in self._facts or any(
            u in self._existing and u not in self._entities for u in ends
        ):
            at = self._fact_pos.get(ref.uuid, 0)
            window = [ref, *self._ranked[at : at + HYDRATE]]
            missing = list(dict.fromkeys(c.uuid for c in window if c.uuid not in self._facts))
            if missing:
                self.reads += 1
                rows = self._conn.facts_by_uuids(missing)
                for uuid in missing:
                    self._facts[uuid] = rows.get(uuid)  # None: gone since the expansion
            self._fetch_entities(
                [*ends, *(u for c in window for u in (c.source_uuid, c.target_uuid))]
            )
        full = self._facts.get(ref.uuid)
        if full is None or (full.source_uuid, full.target_uuid) != ends:
            return None
        if self._admit is not None and not self._admit(full):
            return None
        return full


async def get_context(
    engine: Engine,
    query: str,
    *,
    group_ids: list[str] | None,
    token_budget: int,
    hops: int,
    as_of: datetime | None,
    num_seeds: int,
) -> dict[str, Any]:
    """Search, expand and pack (module docstring); the result of `knowledge_get_context`."""
    at = as_of or now()
    visible = CURRENT if as_of is None else TimeFilter(as_of=as_of)
    entity_hits = await hybrid.search_entities(engine, query, group_ids=group_ids, limit=num_seeds)
    fact_hits = await hybrid.search_facts(
        engine, query, group_ids=group_ids, limit=num_seeds, time=visible
    )
    if as_of is not None:  # a past-time read starts from no entity only later episodes name

        def early(conn: GraphReader) -> list[Entity]:
            index = engine.parts.search
            return asof.seeds_as_of(index, conn, [e for e, _ in entity_hits], as_of)

        kept = {e.uuid for e in await engine.read(early)}
        entity_hits = [(e, s) for e, s in entity_hits if e.uuid in kept]
    seed_nodes = [e.uuid for e, _ in entity_hits]
    seed_facts = [f for f, _ in fact_hits]
    lead = seed_nodes[: (len(seed_nodes) + 1) // 2]
    passages = await anyio.to_thread.run_sync(
        find_passages, engine, query, group_ids, seed_facts, as_of
    )
    first, graph_budget = split_budget(query, passages, token_budget)

    def read() -> Packed:
        index = engine.parts.search
        views = index.views("fact", group_ids)
        with engine.reader() as conn:

            def shown(found: dict[str, Entity]) -> dict[str, Entity]:
                if as_of is None:
                    return found
                return asof.entities_as_of(index, conn, found.values(), as_of)

            def admit(fact: Fact) -> bool:
                return as_of is None or asof.known_by(index, conn, fact, as_of)

            entities = shown({e.uuid: e for e, _ in entity_hits})

            def existing(uuids: Iterable[str]) -> set[str]:
                wanted = list(uuids)
                known = engine.names.existing(wanted)
                if known is None:  # the name index is reloading: ask the store
                    entities.update(shown(conn.entities_by_uuids(wanted)))
                    known = {u for u in wanted if u in entities}
                return known

            def successor(fact: Fact) -> Fact | None:
                # Named only where the read may show it: held now (the read's `known_at`) and,
                # as a NOT YET VALID fact, known by `as_of` (no text of a later episode).
                found = successor_of(index, views, conn, fact, visible.known_at)
                return found if found is not None and admit(found) else None

            found = _expand(index, views, existing, seed_nodes, seed_facts, hops, visible, at)
            rows = _Rows(
                conn,
                found,
                existing(found.distance),
                entities,
                {f.uuid: f for f in seed_facts},
                shown,
                admit if as_of is not None else None,
            )
            return pack(
                query,
                rows,
                found.node_order,
                found.facts,
                found.is_current,
                graph_budget,
                at,
                lead=lead,
                omitted_facts=found.cut_facts,
                fact_of=rows.fact,
                cites=_citations(asof.mentions(index, conn, lead), first[1]) if first[1] else None,
                successor=successor,
            )

    packed = await anyio.to_thread.run_sync(read)
    episode_ids = add_passages(packed, passages, first, token_budget)
    tokens = estimate_tokens(packed.text)
    return {
        "context": packed.text,
        "token_estimate": tokens,
        "token_budget": token_budget,
        "truncated": bool(packed.omitted_nodes or packed.omitted_facts),
        "omitted_nodes": packed.omitted_nodes,
        "omitted_facts": packed.omitted_facts,
        "included_node_ids": packed.node_ids,
        "included_fact_ids": packed.fact_ids,
        "node_count": len(packed.node_ids),
        "fact_count": len(packed.fact_ids),
        "included_episode_ids": episode_ids,
        "omitted_passages": len(passages) - len(episode_ids),
        "as_of": to_read_format(as_of),
    }


def successor_of(
    index: SearchIndex,
    views: Sequence[tuple[str, View]],
    conn: GraphReader,
    fact: Fact,
    known_at: datetime | None,
) -> Fact | None:
    """The fact that superseded `fact`: of the same subject and predicate, starting when it
    ended, linked by lcg.temporal.timeline's rule (`successions`), and held by the graph at
    `known_at` (default now: a read that does not know the future is not shown it). Found on
    the search index's fact columns; None if there is none."""
    source, name = index.known_code(fact.source_uuid), index.known_code(fact.name)
    view = next((v for g, v in views if g == fact.group_id), None)
    if fact.invalid_at is None or source is None or name is None or view is None:
        return None
    cols = view.columns
    held = TimeFilter(known_at=known_at or now(), include_invalidated=True).mask(
        cols["valid_at"], cols["invalid_at"], cols["created_at"], cols["expired_at"]
    )
    docs = np.flatnonzero(
        view.live()
        & held
        & (cols["source"] == source)
        & (cols["name"] == name)
        & (cols["valid_at"] == micros(fact.invalid_at, 0))
    )
    uuids = [view.uuids[d] for d in docs.tolist() if view.uuids[d] != fact.uuid]
    if not uuids:
        return None
    found = conn.facts_by_uuids(uuids)
    linked = successions([fact, *found.values()]).get(fact.uuid, [])
    after = [found[u] for u in linked if u in found and found[u].source_uuid == fact.source_uuid]
    return after[0] if after else None


def _citations(
    mentions: Mapping[str, Sequence[tuple[str, str]]], quoted: Sequence[str]
) -> dict[str, list[str]]:
    """Entity uuid -> labels (P1, P2, …) of the `quoted` episodes (in label order) that mention
    it."""
    label = {u: f"P{i + 1}" for i, u in enumerate(quoted)}
    out: dict[str, list[str]] = {}
    for entity, episodes in mentions.items():
        found = sorted({label[ep] for ep, _ in episodes if ep in label}, key=lambda x: int(x[1:]))
        if found:
            out[entity] = found
    return out


def _heads(query: str) -> tuple[str, str, str]:
    """The block's first line and the headings `pack` always writes."""
    return (f"Context for: {_clip(query, _QUERY_CHARS)}\n", "Entities:\n", "Facts:\n")


def split_budget(
    query: str, passages: Sequence[Passage], token_budget: int
) -> tuple[tuple[list[str], list[str], int], int]:
    """The passages packed first (into `PASSAGE_SHARE` of the budget, never into the room of
    the headings the graph part always writes: lines, episode uuids, bytes) and the token budget
    left for the graph part."""
    limit = token_budget * 4
    heads = sum(len(h.encode()) for h in _heads(query))
    room = min(int(limit * PASSAGE_SHARE), limit - heads) - len(_PASSAGES_HEAD)
    first = pack_passages(passages, room)
    reserved = first[2] + len(_PASSAGES_HEAD) if first[0] else 0
    return first, (limit - reserved) // 4


def add_passages(
    packed: Packed,
    passages: Sequence[Passage],
    first: tuple[list[str], list[str], int],
    token_budget: int,
) -> list[str]:
    """Append the passages packed first, and as many more as the room the graph lines left
    holds, to the block; the uuids of the episodes quoted."""
    lines, uuids, used = first
    room = token_budget * 4 - len(packed.text.encode()) - used - len(_PASSAGES_HEAD)
    more = pack_passages(passages, room, len(lines) + 1, frozenset(uuids))
    lines, uuids = lines + more[0], uuids + more[1]
    if lines:
        packed.text += _PASSAGES_HEAD + "".join(lines)
    return uuids
