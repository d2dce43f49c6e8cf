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

Expansion is bounded: at most `MAX_FRONTIER` entities (the nearest, seeds first) are expanded
per hop and at most `MAX_CANDIDATE_FACTS` facts are ranked; facts cut by that bound count as
omitted.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from lcg.models import Entity, Fact
from lcg.search import hybrid
from lcg.temporal.filter import CURRENT, TimeFilter
from lcg.temporal.timeline import fact_status
from lcg.timeutil import now, to_read_format

if TYPE_CHECKING:
    from lcg.engine import Engine
    from lcg.storage.backend import GraphReader

__all__ = [
    "MAX_CANDIDATE_FACTS",
    "MAX_FRONTIER",
    "Packed",
    "estimate_tokens",
    "get_context",
    "pack",
]

MAX_FRONTIER = 64
MAX_CANDIDATE_FACTS = 600
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


def _entity_line(label: str, e: Entity) -> str:
    kinds = [x for x in e.labels if x != "Entity"]
    kind = f" ({', '.join(kinds)})" if kinds else ""
    summary = f" — {_clip(e.summary, _SUMMARY_CHARS)}" if e.summary.strip() else ""
    return f"[{label}] {_clip(e.name, 200)}{kind}{summary} (entity {e.uuid})\n"


def _window(f: Fact) -> str:
    start = to_read_format(f.valid_at) or "?"
    end = to_read_format(f.invalid_at) or "now"
    return f"{start} → {end}"


def _fact_line(label: str, f: Fact, ends: tuple[str, str], current: bool, at: datetime) -> str:
    if current:
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
    entities: dict[str, Entity],
    node_order: Sequence[str],
    facts: Sequence[Fact],
    is_current: dict[str, bool],
    token_budget: int,
    at: datetime,
    *,
    lead: Sequence[str] = (),
    omitted_facts: int = 0,
) -> Packed:
    """Pack ranked entities and facts into a block of at most `token_budget` estimated tokens.

    `node_order` ranks entities, `facts` ranks facts; a fact is written only with both endpoints
    (added with it when not yet written). The `lead` entities get the first lines, then facts in
    rank order, then the remaining entities while they fit. `omitted_facts` counts facts cut
    before packing. `at` is the instant validity is judged at (for the NOT YET VALID mark).
    """
    limit = token_budget * 4
    head = f"Context for: {_clip(query, _QUERY_CHARS)}\n"
    heads = (head, "Entities:\n", "Facts:\n")
    used = sum(len(h.encode()) for h in heads)
    labels: dict[str, str] = {}
    node_lines: list[str] = []
    fact_lines: list[str] = []
    out = Packed(text="")

    def add_nodes(uuids: list[str], extra: int) -> bool:
        nonlocal used
        fresh = [u for u in dict.fromkeys(uuids) if u not in labels]
        lines = [_entity_line(f"E{len(labels) + i + 1}", entities[u]) for i, u in enumerate(fresh)]
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
    for f in facts:
        ends = [f.source_uuid, f.target_uuid]
        if any(u not in entities for u in ends):
            out.omitted_facts += 1
            continue
        fresh = [u for u in dict.fromkeys(ends) if u not in labels]
        floor = _FACT_LINE_MIN + len(f.uuid) + sum(_ENTITY_LINE_MIN + len(u) for u in fresh)
        if used + floor > limit:  # cannot fit, whatever its text: skip formatting it
            out.omitted_facts += 1
            continue
        names = [labels.get(u) or f"E{len(labels) + fresh.index(u) + 1}" for u in ends]
        line = _fact_line(
            f"F{len(fact_lines) + 1}", f, (names[0], names[1]), is_current.get(f.uuid, False), at
        )
        size = len(line.encode())
        if add_nodes(ends, size):
            fact_lines.append(line)
            out.fact_ids.append(f.uuid)
            used += size
        else:
            out.omitted_facts += 1
    for uuid in node_order:
        if uuid in entities and uuid not in labels and used + _ENTITY_LINE_MIN + len(uuid) <= limit:
            add_nodes([uuid], 0)
    out.omitted_nodes = sum(1 for u in node_order if u in entities and u not in labels)
    out.omitted_facts += omitted_facts
    out.text = heads[0] + heads[1] + "".join(node_lines) + heads[2] + "".join(fact_lines)
    return out


@dataclass
class _Found:
    entities: dict[str, Entity]
    node_order: list[str]
    facts: list[Fact]
    is_current: dict[str, bool]
    cut_facts: int


def _expand(
    conn: GraphReader,
    seed_nodes: list[str],
    seed_facts: list[Fact],
    groups: list[str] | None,
    hops: int,
    visible: TimeFilter,
    at: datetime,
) -> _Found:
    """Seeds plus `hops` steps through facts; facts ranked current first, then by distance."""
    distance: dict[str, int] = {}
    for uuid in seed_nodes:
        distance.setdefault(uuid, 0)
    for f in seed_facts:
        distance.setdefault(f.source_uuid, 0)
        distance.setdefault(f.target_uuid, 0)
    found: dict[str, Fact] = {f.uuid: f for f in seed_facts if _shown(f)}
    frontier = list(distance)
    for hop in range(1, hops + 1):
        nxt: list[str] = []
        for f in conn.facts_around(frontier[:MAX_FRONTIER], groups):
            if not _shown(f):
                continue
            found.setdefault(f.uuid, f)
            for end in (f.source_uuid, f.target_uuid):
                if end not in distance:
                    distance[end] = hop
                    nxt.append(end)
        frontier = nxt
    if hops == 0:
        inside = set(distance)
        for f in conn.facts_around(list(distance), groups):
            if _shown(f) and f.source_uuid in inside and f.target_uuid in inside:
                found.setdefault(f.uuid, f)
    entities = conn.entities_by_uuids(distance)
    is_current = {uuid: visible.admits(f) for uuid, f in found.items()}
    seed_rank = {f.uuid: i for i, f in enumerate(seed_facts)}

    def fact_key(f: Fact) -> tuple[int, int, int, float, str]:
        hop = min(distance.get(f.source_uuid, hops + 1), distance.get(f.target_uuid, hops + 1))
        start = (f.valid_at or f.created_at or at).timestamp()
        return (
            0 if is_current[f.uuid] else 1,
            seed_rank.get(f.uuid, len(seed_rank)),
            hop,
            -start,
            f.uuid,
        )

    ranked = sorted(found.values(), key=fact_key)
    kept, cut = ranked[:MAX_CANDIDATE_FACTS], ranked[MAX_CANDIDATE_FACTS:]
    degree: dict[str, int] = {}
    for f in kept:
        for end in (f.source_uuid, f.target_uuid):
            degree[end] = degree.get(end, 0) + 1
    seed_order = {uuid: i for i, uuid in enumerate(distance)}
    node_order = sorted(distance, key=lambda u: (distance[u], -degree.get(u, 0), seed_order[u], u))
    return _Found(entities, node_order, kept, is_current, len(cut))


def _shown(f: Fact) -> bool:
    """Withdrawn facts (retired without an end of validity) are never context."""
    return not (f.expired_at is not None and f.invalid_at is None)


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
    seed_nodes = [e.uuid for e, _ in entity_hits]
    seed_facts = [f for f, _ in fact_hits]

    def read(conn: GraphReader) -> _Found:
        return _expand(conn, seed_nodes, seed_facts, group_ids, hops, visible, at)

    found = await engine.read(read)
    packed = pack(
        query,
        found.entities,
        found.node_order,
        found.facts,
        found.is_current,
        token_budget,
        at,
        lead=seed_nodes[: (len(seed_nodes) + 1) // 2],
        omitted_facts=found.cut_facts,
    )
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
        "as_of": to_read_format(as_of),
    }
