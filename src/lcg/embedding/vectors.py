"""Which texts of a row are embedded, and turning that plan into vectors.

Each entity has a name vector and, when it has a summary, a summary vector; each fact a vector of
its sentence; each episode a vector of its content. A vector row records the hash of
(model, text), so unchanged text is never embedded again and a changed text or model always is.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from lcg.embedding.base import Embedder
from lcg.embedding.cache import CachedEmbedder, text_hash
from lcg.models import EmbeddingRow, Entity, Episode, Fact
from lcg.wal.changes import (
    Change,
    CypherExec,
    EntityUpsert,
    EpisodeAdd,
    EpisodeDelete,
    FactInvalidate,
    FactUpsert,
    GroupPurge,
    MentionsAdd,
)

__all__ = [
    "EmbeddingPlan",
    "embed_for_bulk",
    "embed_plan",
    "plan_for_changes",
    "plan_for_rows",
    "text_hash",
]

# Texts embedded per call by `embed_for_bulk`: bounds the vectors held at once (a 1M-fact
# replay embedded 1.6M texts in one call: ~2.4 GB per copy of the matrix, several copies).
BULK_CHUNK = 16384


@dataclass
class EmbeddingPlan:
    """Texts to embed as (kind, owner, group_id, text), and vector keys that must go."""

    wanted: list[tuple[str, str, str, str]] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)

    def keys(self) -> list[str]:
        return [f"{kind}:{owner}" for kind, owner, _, _ in self.wanted]


def _entity(plan: EmbeddingPlan, e: Entity) -> None:
    plan.wanted.append(("entity_name", e.uuid, e.group_id, e.name))
    if e.summary:
        plan.wanted.append(("entity_summary", e.uuid, e.group_id, e.summary))
    else:
        plan.stale.append(f"entity_summary:{e.uuid}")


def _fact(plan: EmbeddingPlan, f: Fact) -> None:
    plan.wanted.append(("fact", f.uuid, f.group_id, f.fact or f.name))


def _episode(plan: EmbeddingPlan, ep: Episode) -> None:
    if ep.content:
        plan.wanted.append(("episode", ep.uuid, ep.group_id, ep.content))
    else:
        plan.stale.append(f"episode:{ep.uuid}")


def plan_for_rows(
    entities: Iterable[Entity] = (), facts: Iterable[Fact] = (), episodes: Iterable[Episode] = ()
) -> EmbeddingPlan:
    plan = EmbeddingPlan()
    for e in entities:
        _entity(plan, e)
    for f in facts:
        _fact(plan, f)
    for ep in episodes:
        _episode(plan, ep)
    return plan


def plan_for_changes(changes: Iterable[Change]) -> EmbeddingPlan:
    """The vectors a batch of changes needs (last write of a key wins)."""
    plan = EmbeddingPlan()
    for change in changes:
        match change:
            case EntityUpsert(entity):
                _entity(plan, entity)
            case FactUpsert(fact):
                _fact(plan, fact)
            case EpisodeAdd(episode):
                _episode(plan, episode)
            case FactInvalidate() | EpisodeDelete() | MentionsAdd() | GroupPurge() | CypherExec():
                pass
    last: dict[str, tuple[str, str, str, str]] = {}
    for item in plan.wanted:
        last[f"{item[0]}:{item[1]}"] = item
    plan.wanted = list(last.values())
    wanted_keys = set(last)
    plan.stale = [k for k in dict.fromkeys(plan.stale) if k not in wanted_keys]
    return plan


def embed_plan(
    plan: EmbeddingPlan,
    embedder: Embedder,
    stored: Mapping[str, str] | None = None,
    *,
    cache_only: bool = False,
) -> list[EmbeddingRow]:
    """Embed the planned texts whose (model, text) hash differs from `stored`, in one batch.

    With `cache_only` (for callers holding the write lock), only texts already in the embedding
    cache get a row; the others are left for `knowledge_backfill_summary_embeddings` or a rebuild
    (the search index embeds them itself when it reloads, outside the lock).
    """
    model = embedder.identity.model
    todo = []
    for kind, owner, group_id, text in plan.wanted:
        digest = text_hash(model, text)
        if stored is not None and stored.get(f"{kind}:{owner}") == digest:
            continue
        todo.append((kind, owner, group_id, digest, text))
    if not todo:
        return []
    if cache_only:
        if not isinstance(embedder, CachedEmbedder):
            return []
        found = embedder.cached([t[4] for t in todo])
        return [
            EmbeddingRow(kind=k, owner=o, group_id=g, text_hash=h, vec=vec)
            for (k, o, g, h, _), vec in zip(todo, found, strict=True)
            if vec is not None
        ]
    vectors = embedder.embed([t[4] for t in todo])
    return [
        EmbeddingRow(kind=k, owner=o, group_id=g, text_hash=h, vec=vectors[i])
        for i, (k, o, g, h, _) in enumerate(todo)
    ]


def embed_for_bulk(
    plan: EmbeddingPlan, embedder: Embedder, chunk: int = BULK_CHUNK
) -> list[EmbeddingRow]:
    """The vector rows of a bulk load: every planned text embedded, `chunk` texts a call.

    The rows carry no vector (`vec` is None): the graph stores only the text hash, and the
    vectors stay in the embedding cache (a `CachedEmbedder`) for the search index to load, so
    no more than one chunk's vectors are held at a time. Texts the cache already holds are
    neither embedded nor read (a rebuild of a deleted database reuses every vector: at 100k
    facts, asking the cache for 183k vectors only to drop them cost ~60% of this step).
    """
    model = embedder.identity.model
    wanted = plan.wanted
    hashes = [text_hash(model, t) for _, _, _, t in wanted]
    rows = [EmbeddingRow(k, o, g, h, None) for (k, o, g, _), h in zip(wanted, hashes, strict=True)]
    if isinstance(embedder, CachedEmbedder):
        todo = [wanted[i][3] for i in np.flatnonzero(~embedder.holds(hashes)).tolist()]
    else:
        todo = [t for _, _, _, t in wanted]
    for start in range(0, len(todo), chunk):
        embedder.embed(todo[start : start + chunk])
    return rows
