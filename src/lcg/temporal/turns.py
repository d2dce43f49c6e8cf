"""The turns next to a passage hit in a conversation: the one that asked it and the one that
answered it.

A chat ingested one turn per episode answers a broad question ("summarise my budget tracker
project") with many turns that share only the chat's topic with it; the turn just before or
after one the search found is often among them (docs/search.md, "Ranking for broad
questions": 31 of the 84 evidence turns `bench/evidence.py --quick --losses` found lost). An
episode's neighbours are the live episodes indexed just before and after it in its group's
passage partition (documents are appended in commit order, lcg.search.partition; a partition
built from the store holds them in the store's scan order). A hit is a
**turn** of a dialogue only if another source wrote each of its neighbours (their source
descriptions differ from its own: the speakers take turns), and then a neighbour is its
**reply** if dated within `REPLY_GAP` of it (the same session). Releases of one changelog,
notes of one writer keep one source description: they are no turns, and their neighbours are
never lent a score; nor is a chunk of a file (an episode with a `source_file` or `chunk_id`,
knowledge_process_chunk), a document whatever its neighbours are.

`with_replies` lends each reply of the first `REPLY_SEEDS` hits `REPLY_SHARE` of its hit's
fused score; an episode ranks by the better of its own score and what it is lent.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from lcg.models import Episode

if TYPE_CHECKING:
    from lcg.engine import Engine
    from lcg.graph.hybrid import Hit

__all__ = ["REPLY_GAP", "REPLY_SEEDS", "REPLY_SHARE", "with_replies"]

# The share of a hit's fused score its replies are lent (0: none). `python bench/evidence.py
# --quick --grid` (BEAM get_context budget share, `hash` / MiniLM int8; the changelogs 1.0 in
# every row): 0 0.672 / 0.698; 0.5 0.672; 0.7 0.679; 0.75 0.695 / 0.770; 0.8 0.709 / 0.772;
# 0.85 0.700 / 0.747; 0.9 0.710 / 0.759; 1.0 0.711 / 0.757; the full run (`hash`) 0 0.600, 0.8
# 0.617 (docs/search.md, "Replies"). Fused scores are reciprocal ranks: below ~0.6 a reply
# ranks past what is quoted.
REPLY_SHARE = 0.8
# The hits, best first, whose replies are looked up (at share 0.8, `--quick` `hash` / MiniLM:
# 5 — / 0.750, 7 0.709 / 0.774, 10 0.709 / 0.772, 15 0.709 / 0.772; the full run 3 0.613, 5
# 0.614, 10 0.617).
REPLY_SEEDS = 10
# The most a reply's date may differ from its hit's.
REPLY_GAP = timedelta(days=1)
# Dead documents (replaced or deleted episodes) skipped looking for a live neighbour.
_DEAD_STEPS = 64


def _when(ep: Episode) -> datetime | None:
    return ep.valid_at or ep.created_at


def _adjacent(engine: Engine, hits: Sequence[Hit]) -> dict[str, list[str]]:
    """The uuids of the live episodes indexed just before and after each hit's episode."""
    views = dict(engine.parts.search.views("episode", sorted({h.group_id for h in hits})))
    out: dict[str, list[str]] = {}
    for h in hits:
        view = views.get(h.group_id)
        if view is None or h.doc >= view.n:
            continue
        docs = view.windows_of(h.doc)
        live = view.live()
        found: list[str] = []
        for doc, step in ((int(docs[0]) - 1, -1), (int(docs[-1]) + 1, 1)):
            for _ in range(_DEAD_STEPS):
                if not 0 <= doc < view.n or live[doc]:
                    break
                doc += step
            if 0 <= doc < view.n and live[doc] and view.uuids[doc] != h.uuid:
                found.append(view.uuids[doc])
        out[h.uuid] = found
    return out


def _chunk(ep: Episode) -> bool:
    return bool(ep.source_file or ep.chunk_id)


def _replies(hit: Episode, near: Sequence[Episode]) -> list[Episode]:
    """The neighbours of a dialogue turn dated within `REPLY_GAP` of it (module docstring)."""
    if _chunk(hit) or any(n.source_description == hit.source_description for n in near):
        return []  # a file's chunk, or one source's text on either side: no dialogue
    near = [n for n in near if not _chunk(n)]
    a = _when(hit)
    return [n for n in near if a is not None and (b := _when(n)) and abs(a - b) <= REPLY_GAP]


def with_replies(engine: Engine, hits: Sequence[tuple[Episode, Hit]]) -> list[Episode]:
    """The hits' episodes and the replies of the first `REPLY_SEEDS`, best first (module
    docstring); the hits' own order when `REPLY_SHARE` is 0."""
    score = {ep.uuid: hit.score for ep, hit in hits}
    episodes = {ep.uuid: ep for ep, _ in hits}
    if REPLY_SHARE <= 0 or not hits:
        return list(episodes.values())
    seeds = list(hits[:REPLY_SEEDS])
    near = _adjacent(engine, [hit for _, hit in seeds])
    wanted = [u for us in near.values() for u in us if u not in episodes]
    fetched: dict[str, Episode] = {}
    if wanted:
        with engine.reader() as conn:
            groups = sorted({ep.group_id for ep, _ in seeds})
            fetched = conn.episodes_of_hits(groups, list(dict.fromkeys(wanted)))
    order = list(episodes)
    for ep, hit in seeds:
        found = [episodes.get(u) or fetched.get(u) for u in near.get(ep.uuid, [])]
        for other in _replies(ep, [n for n in found if n is not None]):
            uuid = other.uuid
            if uuid not in episodes:
                episodes[uuid] = other
                order.append(uuid)
            score[uuid] = max(score.get(uuid, 0.0), REPLY_SHARE * hit.score)
    rank = {u: i for i, u in enumerate(order)}
    return [episodes[u] for u in sorted(order, key=lambda u: (-score[u], rank[u]))]
