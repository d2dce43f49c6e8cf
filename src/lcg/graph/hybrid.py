"""Hybrid search over entities, facts and episodes: the query the transports and areas call.

Each search reads the partitions of the chosen groups from the engine's `SearchIndex`, builds a
BM25 candidate list and one cosine list per vector kind (each up to `candidates * limit` long,
filters applied before ranking, so a filter never empties a top-k that had matches), fuses them
with reciprocal-rank fusion, optionally reorders the fused pool (MMR, or graph distance from a
centre entity), and fetches the winning rows from the database. Scores are higher-is-better.

Episodes are searched by window (lcg.search.windows: a long episode is several documents of one
uuid): each list ranks episodes by their best window (BM25 adds `WINDOW_REST` times its other
windows' scores, and divides by `1 + WINDOW_PENALTY * ln(windows)`: the best of many windows
is a best of many tries), and a hit carries its best window's offsets. Passage search weighs its lists
(`PASSAGE_VECTOR_WEIGHT`, `PASSAGE_VECTOR_DEPTH`; the table of settings measured is in
docs/search.md, "Passages").

`group_ids=None` searches every group; `[]` searches none.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import anyio.to_thread
import numpy as np
import numpy.typing as npt

from lcg.errors import NotFoundError
from lcg.models import Entity, Episode, Fact
from lcg.search.floor import LEXICAL_COVERAGE, PASSAGE_COVERAGE, passage_floor
from lcg.search.index import SearchIndex
from lcg.search.partition import WINDOW, View
from lcg.search.rows import RowCache
from lcg.search.scoring import bm25_idf, bm25_scores, mmr, rrf, top_k
from lcg.search.strategy import HYBRID_RRF, Strategy
from lcg.storage.backend import GraphReader
from lcg.timefilter import CURRENT, TimeFilter

if TYPE_CHECKING:
    from lcg.engine import Engine

__all__ = ["Hit", "search_entities", "search_episodes", "search_facts"]

Mask = npt.NDArray[np.bool_]
Ints = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]
MaskFn = Callable[[str, View], Mask]

# An episode's BM25 score: its best window's plus this share of its other windows' (0: the best
# window alone; 1: their sum).
WINDOW_REST = 0.0
# An episode's BM25 score is also divided by `1 + WINDOW_PENALTY * ln(its window count)`: the
# best of ten windows is the best of ten tries at the query's words, so a long turn or release
# outranked a short one saying the same (a one-line standing instruction, a user's request).
# `python bench/evidence.py` (`hash`, full run; BEAM get_context budget / search_passages
# all@10): 0 0.667 / 0.347, 0.3 0.679 / 0.421, 0.5 0.689 / 0.441 (docs/search.md, "Lines and
# ranking"). Ranking only: a passage's reported score is unchanged. Not applied to the vector
# list (subtracting 0.02 or 0.05 times ln(windows) from the best cosine changed nothing measured).
WINDOW_PENALTY = 0.5
# Passage search: the vector list's weight in the fusion (BM25's is 1), and its length as a
# multiple of the results asked for (BM25's is the strategy's `candidates`, 3). One: a long
# episode has many windows, so many chances at a high cosine, and a deeper vector list fills the
# fusion with long episodes (measured with bench/evidence.py --grid, docs/search.md "Passages").
PASSAGE_VECTOR_WEIGHT = 1.0
PASSAGE_VECTOR_DEPTH = 1


@dataclass(frozen=True)
class _Doc:
    """A ranked document: where it lives and its fused score."""

    uuid: str
    group_id: str
    doc: int
    score: float


@dataclass(frozen=True)
class Hit:
    """A ranked document: where it lives, its fused score and its best vector similarity."""

    uuid: str
    group_id: str
    doc: int
    score: float
    cosine: float
    window: tuple[int, int] | None = None  # an episode's best window, `[start, end)` of its text


@dataclass(frozen=True)
class _Query:
    terms: dict[int, float]  # term id -> its weight in the query (lcg.search.text)
    unknown: float  # the weight of the query words (not stopwords) no document ever held
    vector: npt.NDArray[np.float32] | None


def _prepare(index: SearchIndex, text: str, strategy: Strategy) -> _Query:
    terms, unknown = index.vocab.query_terms(text) if strategy.lexical else ({}, 0.0)
    vector = index.embed_query(text) if strategy.vector else None
    return _Query(terms, unknown, vector)


def _lexical(
    views: list[tuple[str, View]],
    masks: list[Mask],
    terms: Mapping[int, float],
    pool: int,
    unknown: float = 0.0,
    coverage: float = LEXICAL_COVERAGE,
    rest: float = 0.0,
) -> list[tuple[str, str, int, float]]:
    """BM25 top `pool` over all views, with collection statistics summed across them; `terms`:
    term id -> the share of its idf it weighs (lcg.search.text.Vocabulary.query_terms).

    Only documents holding at least `coverage` of the query's idf weight are candidates
    (lcg.search.floor); `unknown` (the weight of the query words no document holds) counts
    with the highest idf. Windows of one uuid are one hit, at its best window, scoring that
    plus `rest` times the others."""
    if not terms:
        return []
    postings = [[v.postings(t) for t in terms] for _, v in views]
    n_docs = sum(v.live_docs for _, v in views)
    total = sum(v.live_len for _, v in views)
    if n_docs == 0 or total == 0:
        return []
    df = np.array([sum(len(p[i][0]) for p in postings) for i in range(len(terms))])
    idf = bm25_idf(n_docs, df) * np.fromiter(terms.values(), dtype=np.float64, count=len(terms))
    avgdl = total / n_docs
    weight = float(idf.sum()) + unknown * float(bm25_idf(n_docs, np.zeros(1, np.int64))[0])
    hits: list[tuple[str, str, int, float]] = []
    for (group, view), mask, plist in zip(views, masks, postings, strict=True):
        present = [(docs, tf, float(idf[i])) for i, (docs, tf) in enumerate(plist) if len(docs)]
        scores = bm25_scores(view.n, present, view.doc_len[: view.n], avgdl)
        # The idf weight of the query terms each document holds (one bincount, as BM25's).
        covered = (
            np.bincount(
                np.concatenate([p[0] for p in present]),
                weights=np.concatenate([np.full(len(p[0]), p[2]) for p in present]),
                minlength=view.n,
            )
            if present
            else np.zeros(view.n)
        )
        eligible = mask & (covered >= coverage * weight)
        if WINDOW in view.columns:
            found = np.flatnonzero(eligible & (scores > 0.0))
            docs, best = _per_uuid(view, found, scores[found], rest)
            if WINDOW_PENALTY > 0 and len(docs):
                best = best / (1.0 + WINDOW_PENALTY * np.log(_window_counts(view, docs)))
            for i in top_k(best, pool):
                hits.append((view.uuids[docs[i]], group, int(docs[i]), float(best[i])))
            continue
        for doc in top_k(scores, pool, eligible, floor=0.0):
            hits.append((view.uuids[doc], group, int(doc), float(scores[doc])))
    hits.sort(key=lambda h: (-h[3], h[0]))
    return hits[:pool]


def _per_uuid(view: View, docs: Ints, scores: Floats, rest: float) -> tuple[Ints, Floats]:
    """Windows (`docs`, with `scores`) grouped by uuid: each uuid's best window (ties: the
    first) and its score plus `rest` times its other windows' scores."""
    if not len(docs):
        return docs, scores
    first = docs - view.columns[WINDOW][docs]
    order = np.lexsort((docs, -scores, first))
    first, docs, scores = first[order], docs[order], scores[order]
    starts = np.flatnonzero(np.concatenate([[True], first[1:] != first[:-1]]))
    best = scores[starts]
    if rest:
        best = best + rest * (np.add.reduceat(scores, starts) - best)
    return docs[starts], best


def _window_counts(view: View, docs: Ints) -> Ints:
    """How many windows the episode of each of `docs` (documents of a windowed view) has."""
    col = view.columns[WINDOW][: view.n]
    firsts = np.flatnonzero(col == 0)
    first = docs - col[docs]
    at = np.searchsorted(firsts, first, side="right")
    after = np.where(at < len(firsts), firsts[np.minimum(at, len(firsts) - 1)], view.n)
    counts: Ints = np.maximum(after - first, 1)
    return counts


def _top_windows(
    view: View, kind: str, vector: npt.NDArray[np.float32], pool: int, mask: Mask, floor: float
) -> tuple[Ints, Floats]:
    """The `pool` uuids of a windowed view with the best cosine of one of their windows above
    `floor`, at that window: more windows are read until `pool` distinct uuids are found."""
    k = pool
    while True:
        docs, sims = view.vectors[kind].top(vector, k, mask, floor)
        best_docs, best = _per_uuid(view, docs, np.asarray(sims, dtype=np.float64), 0.0)
        if len(best_docs) >= pool or len(docs) < k:
            order = np.lexsort((best_docs, -best))[:pool]
            return best_docs[order], best[order]
        k *= 2


def _cosine(
    views: list[tuple[str, View]],
    masks: list[Mask],
    kinds: Sequence[str],
    vector: npt.NDArray[np.float32],
    pool: int,
    floor: float,
) -> list[tuple[str, str, int, float]]:
    """Cosine top `pool` over all views; a document scores its best vector of `kinds`, and only
    documents scoring above `floor` (lcg.search.floor) are candidates. Each kind's top `pool`
    (lcg.search.vectors: exact on the stored rows, int8 in large partitions) is merged by best
    cosine: their union holds the top `pool` of the per-document best."""
    hits: list[tuple[str, str, int, float]] = []
    for (group, view), mask in zip(views, masks, strict=True):
        if not view.n:
            continue
        best: dict[int, float] = {}
        for kind in kinds:
            eligible = mask & view.has_vector[kind]
            if WINDOW in view.columns:
                docs, sims = _top_windows(view, kind, vector, pool, eligible, floor)
            else:
                docs, sims = view.vectors[kind].top(vector, pool, eligible, floor)
            for doc, sim in zip(docs.tolist(), sims.tolist(), strict=True):
                if sim > best.get(doc, -np.inf):
                    best[doc] = sim
        ranked = sorted(best.items(), key=lambda d: (-d[1], d[0]))[:pool]
        hits += [(view.uuids[doc], group, doc, sim) for doc, sim in ranked]
    hits.sort(key=lambda h: (-h[3], h[0]))
    return hits[:pool]


def _rank(
    index: SearchIndex,
    family: str,
    kinds: Sequence[str],
    groups: list[str] | None,
    text: str,
    limit: int,
    strategy: Strategy,
    mask_fn: MaskFn | None = None,
    floor: float | None = None,
    coverage: float = LEXICAL_COVERAGE,
    vector_weight: float = 1.0,
    vector_depth: int | None = None,
) -> tuple[list[_Doc], dict[str, View], Callable[[_Doc], float]]:
    """Fused hits (best first, at most `candidates * limit`), the views they came from, and
    the best vector similarity of a hit to the query (0.0 without a query vector; a windowed
    hit's best window), computed only for the hits a caller asks it of.

    `floor`: the minimum cosine similarity of a vector match (default: the embedder's,
    `SearchIndex.vector_floor`). `vector_weight`: the vector list's weight in the fusion (the
    BM25 list's is 1); `vector_depth`: its length as a multiple of `limit` (default: the
    strategy's `candidates`)."""
    for _ in range(3):
        generation = index.generation
        views = index.views(family, groups)
        # After loading the views: a partition loaded just now may have added the query's words.
        query = _prepare(index, text, strategy)
        if index.generation == generation:  # no embedder swap between views and query vector
            break
    masks = [v.live() & mask_fn(g, v) if mask_fn else v.live() for g, v in views]
    pool = max(limit, strategy.candidates * limit)
    lists = (
        [_lexical(views, masks, query.terms, pool, query.unknown, coverage, WINDOW_REST)]
        if strategy.lexical
        else []
    )
    weights = [1.0] * len(lists)
    if query.vector is not None:
        minimum = index.vector_floor if floor is None else floor
        depth = pool if vector_depth is None else max(limit, vector_depth * limit)
        lists.append(_cosine(views, masks, kinds, query.vector, depth, minimum))
        weights.append(vector_weight if strategy.lexical else 1.0)
    where: dict[str, tuple[str, int]] = {}
    for ranked in lists:  # a windowed hit keeps the window of the first list that has it
        for uuid, group, doc, _ in ranked:
            where.setdefault(uuid, (group, doc))
    fused = rrf([[h[0] for h in ranked] for ranked in lists], strategy.rrf_k, weights)[:pool]
    by_group = dict(views)

    def cosine(hit: _Doc) -> float:
        if query.vector is None:
            return 0.0
        view = by_group[hit.group_id]
        sims = [
            float(view.vectors_of(k, np.array([doc], dtype=np.int64))[0] @ query.vector)
            for doc in view.windows_of(hit.doc).tolist()
            for k in kinds
            if view.has_vector[k][doc]
        ]
        return max(sims, default=0.0)

    hits = [_Doc(u, *where[u], s) for u, s in fused]
    return hits, by_group, cosine


def _mmr(hits: list[_Doc], views: dict[str, View], kind: str, lam: float) -> list[_Doc]:
    if len(hits) < 2:
        return hits
    vecs = np.stack(
        [views[h.group_id].vectors_of(kind, np.array([h.doc], dtype=np.int64))[0] for h in hits]
    )
    order = mmr(np.array([h.score for h in hits]), vecs, len(hits), lam)
    return [_Doc(hits[i].uuid, hits[i].group_id, hits[i].doc, s) for i, s in order]


def _distances(index: SearchIndex, center: Entity, max_hops: int) -> dict[int, int]:
    """Hop counts (by entity code) from `center`, over the current facts of its group."""
    view = index.views("fact", [center.group_id])[0][1]
    live = view.live() & _time_mask(view, CURRENT)
    src = view.columns["source"][live]
    tgt = view.columns["target"][live]
    start = index.known_code(center.uuid)
    if start is None:  # the centre is the end of no fact: only itself is near
        return {}
    dist = {start: 0}
    frontier = np.array([start], dtype=np.int64)
    for hop in range(1, max_hops + 1):
        if not len(frontier):
            break
        reached = np.unique(
            np.concatenate([tgt[np.isin(src, frontier)], src[np.isin(tgt, frontier)]])
        )
        fresh = [int(x) for x in reached if int(x) not in dist]
        for x in fresh:
            dist[x] = hop
        frontier = np.array(fresh, dtype=np.int64)
    return dist


def _by_distance(hits: list[_Doc], hops: Callable[[_Doc], int], max_hops: int) -> list[_Doc]:
    """Closer first, then by fused score; score = (max_hops + 1 - hops) + fused score."""
    out = [
        _Doc(h.uuid, h.group_id, h.doc, (max_hops + 1 - min(hops(h), max_hops + 1)) + h.score)
        for h in hits
    ]
    out.sort(key=lambda h: (-h.score, h.uuid))
    return out


def _time_mask(view: View, time: TimeFilter) -> Mask:
    """`TimeFilter.admits` over a fact partition's time columns (`TimeFilter.mask`)."""
    c = view.columns
    return time.mask(c["valid_at"], c["invalid_at"], c["created_at"], c["expired_at"])


def _center(engine: Engine, uuid: str) -> Entity:
    with engine.reader() as conn:
        found = conn.entities_by_uuids([uuid]).get(uuid)
    if found is None:
        raise NotFoundError("entity", uuid, f"center_node_uuid '{uuid}' does not exist")
    return found


R = TypeVar("R", Entity, Fact, Episode)


# Rows a page of a whole-group read (`_hydrate`).
_PAGE = 5000


def _hydrate(
    engine: Engine,
    hits: Sequence[_Doc | Hit],
    family: str,
    views: Mapping[str, View],
    read: Callable[[GraphReader, list[str], list[str]], dict[str, R]],
    pages: Callable[[GraphReader, str], Iterator[list[R]]],
) -> dict[str, R]:
    """The rows of `hits` by uuid (missing ones absent): from the index's row cache
    (`SearchIndex.rows`, lcg.search.rows) where it holds them, the rest from the database:
    a group the cache can hold whole is read whole (`pages`: every row of a group, paged;
    `views`: the partitions the hits came from, an upper bound on their rows), the others in
    one `read` (groups, uuids: `GraphReader.entities_of_hits`)."""
    index = engine.parts.search
    groups = list(dict.fromkeys(h.group_id for h in hits))
    uuids = [h.uuid for h in hits]
    if not uuids:
        return {}
    caches = index.rows
    if caches is None:
        with engine.reader() as conn:
            return read(conn, groups, uuids)
    cache: RowCache[R] = caches[family]
    found = cache.get(uuids)
    if len(found) == len(uuids):
        return found
    missing = [h for h in hits if h.uuid not in found]
    # At most one whole group a search (~20-40 ms of CPU per thousand rows, measured at 10k):
    # the first searches after an open share the cost.
    whole = next(
        (g for g in dict.fromkeys(h.group_id for h in missing) if cache.wants_whole(g, views[g].n)),
        None,
    )
    version = cache.version  # before the reads: a commit landing meanwhile is not cached
    need = {h.uuid for h in missing}
    with engine.reader() as conn:
        if whole is not None:
            rows = [(row.uuid, row) for page in pages(conn, whole) for row in page]
            cache.put(version, rows, whole=whole)
            found.update(item for item in rows if item[0] in need)
        rest = [h.uuid for h in missing if h.uuid not in found]
        if rest:
            fresh = read(conn, list(dict.fromkeys(h.group_id for h in missing)), rest)
            cache.put(version, fresh.items())
            found.update(fresh)
    return {u: found[u] for u in uuids if u in found}


def _entities(
    engine: Engine,
    query: str,
    groups: list[str] | None,
    limit: int,
    labels: Sequence[str] | None,
    center_node_uuid: str | None,
    strategy: Strategy,
) -> list[tuple[Entity, float]]:
    index = engine.parts.search
    center = _center(engine, center_node_uuid) if center_node_uuid else None
    wanted = frozenset(labels) if labels else None

    def mask(group: str, view: View) -> Mask:
        assert wanted is not None
        return np.fromiter(
            (not wanted.isdisjoint(t) for t in view.tags[: view.n]), dtype=bool, count=view.n
        )

    hits, views, _ = _rank(
        index,
        "entity",
        ("entity_name", "entity_summary"),
        groups,
        query,
        limit,
        strategy,
        mask if wanted else None,
    )
    if strategy.mmr_lambda is not None:
        hits = _mmr(hits, views, "entity_name", strategy.mmr_lambda)
    if center is not None:
        dist = _distances(index, center, strategy.max_hops)
        far = strategy.max_hops + 1

        def hops(h: _Doc) -> int:
            if h.uuid == center.uuid:
                return 0
            code = index.known_code(h.uuid)  # None: the entity is the end of no fact
            return far if code is None else dist.get(code, far)

        hits = _by_distance(hits, hops, strategy.max_hops)
    hits = hits[:limit]
    rows = _hydrate(
        engine,
        hits,
        "entity",
        views,
        lambda conn, g, u: conn.entities_of_hits(g, u),
        lambda conn, g: conn.entity_pages(g, _PAGE),
    )
    return [(rows[h.uuid], h.score) for h in hits if h.uuid in rows]


def _facts(
    engine: Engine,
    query: str,
    groups: list[str] | None,
    limit: int,
    time: TimeFilter,
    relation_types: Sequence[str] | None,
    predicates: Sequence[str] | None,
    center_node_uuid: str | None,
    strategy: Strategy,
) -> list[tuple[Fact, float]]:
    index = engine.parts.search
    center = _center(engine, center_node_uuid) if center_node_uuid else None
    rtypes = [index.known_code(t) for t in relation_types or ()]
    names = [index.known_code(t) for t in predicates or ()]

    def mask(group: str, view: View) -> Mask:
        keep = _time_mask(view, time)
        if relation_types is not None:
            keep &= np.isin(view.columns["relation_type"], [c for c in rtypes if c is not None])
        if predicates is not None:
            keep &= np.isin(view.columns["name"], [c for c in names if c is not None])
        return keep

    hits, views, _ = _rank(index, "fact", ("fact",), groups, query, limit, strategy, mask)
    if strategy.mmr_lambda is not None:
        hits = _mmr(hits, views, "fact", strategy.mmr_lambda)
    if center is not None:
        dist = _distances(index, center, strategy.max_hops)
        far = strategy.max_hops + 1

        def hops(h: _Doc) -> int:
            cols = views[h.group_id].columns
            return min(
                dist.get(int(cols["source"][h.doc]), far), dist.get(int(cols["target"][h.doc]), far)
            )

        hits = _by_distance(hits, hops, strategy.max_hops)
    out: list[tuple[Fact, float]] = []
    # Fetch in slices of `limit`: the index already applied every filter, so the first slice
    # nearly always suffices; the rows' own check below is the authoritative one.
    for start in range(0, len(hits), limit):
        batch = hits[start : start + limit]
        rows = _hydrate(
            engine,
            batch,
            "fact",
            views,
            lambda conn, g, u: conn.facts_of_hits(g, u),
            lambda conn, g: conn.fact_pages(g, _PAGE),
        )
        for h in batch:
            fact = rows.get(h.uuid)
            if fact is None or not time.admits(fact):
                continue
            if relation_types is not None and (fact.relation_type or "") not in relation_types:
                continue
            if predicates is not None and fact.name not in predicates:
                continue
            out.append((fact, h.score))
            if len(out) == limit:
                return out
    return out


def episode_hits(
    engine: Engine,
    query: str,
    groups: list[str] | None,
    limit: int,
    strategy: Strategy,
    floor: float | None = None,
) -> list[tuple[Episode, Hit]]:
    """Ranked episodes with their hits (fused score, cosine similarity of the best window,
    the offsets of the best window), reordered by maximal marginal relevance over the best
    windows' vectors when the strategy asks (`hybrid_mmr`, as entities and facts); `floor` as
    in `_rank` (knowledge_search_passages passes its `min_score`; without one,
    lcg.search.floor's `passage_floor`)."""
    index = engine.parts.search
    ranked, views, cosine = _rank(
        index,
        "episode",
        ("episode",),
        groups,
        query,
        limit,
        strategy,
        floor=passage_floor(index.vector_floor, engine.settings.search_vector_floor)
        if floor is None
        else floor,
        coverage=PASSAGE_COVERAGE,
        vector_weight=PASSAGE_VECTOR_WEIGHT,
        vector_depth=PASSAGE_VECTOR_DEPTH,
    )
    if strategy.mmr_lambda is not None:  # over the best windows' vectors
        ranked = _mmr(ranked, views, "episode", strategy.mmr_lambda)
    hits = [
        Hit(h.uuid, h.group_id, h.doc, h.score, cosine(h), _window(views[h.group_id], h.doc))
        for h in ranked[:limit]
    ]
    rows = _hydrate(
        engine,
        hits,
        "episode",
        views,
        lambda conn, g, u: conn.episodes_of_hits(g, u),
        lambda conn, g: conn.episode_pages(g, _PAGE),
    )
    return [(rows[h.uuid], h) for h in hits if h.uuid in rows]


def _window(view: View, doc: int) -> tuple[int, int] | None:
    """The offsets of an episode document's window in the episode's text."""
    if WINDOW not in view.columns:
        return None
    return int(view.columns["start"][doc]), int(view.columns["end"][doc])


async def search_entities(
    engine: Engine,
    query: str,
    *,
    group_ids: list[str] | None,
    limit: int = 10,
    labels: Sequence[str] | None = None,
    center_node_uuid: str | None = None,
    strategy: Strategy = HYBRID_RRF,
) -> list[tuple[Entity, float]]:
    """Entities matching `query` (name + summary), best first.

    `labels`: only entities carrying at least one of them. `center_node_uuid`: entities closer
    to it in the graph first.

    Raises:
        NotFoundError: `center_node_uuid` is not an entity.
    """
    if group_ids == [] or limit <= 0 or not query.strip():
        return []
    return await anyio.to_thread.run_sync(
        functools.partial(
            _entities, engine, query, group_ids, limit, labels, center_node_uuid, strategy
        )
    )


async def search_facts(
    engine: Engine,
    query: str,
    *,
    group_ids: list[str] | None,
    limit: int = 10,
    time: TimeFilter = CURRENT,
    relation_types: Sequence[str] | None = None,
    center_node_uuid: str | None = None,
    strategy: Strategy = HYBRID_RRF,
    predicates: Sequence[str] | None = None,
) -> list[tuple[Fact, float]]:
    """Facts matching `query` (predicate + sentence) visible under `time`, best first.

    `relation_types` / `predicates`: only facts with one of these relation types / names.

    Raises:
        NotFoundError: `center_node_uuid` is not an entity.
    """
    if group_ids == [] or limit <= 0 or not query.strip():
        return []
    return await anyio.to_thread.run_sync(
        functools.partial(
            _facts,
            engine,
            query,
            group_ids,
            limit,
            time,
            relation_types,
            predicates,
            center_node_uuid,
            strategy,
        )
    )


async def search_episodes(
    engine: Engine,
    query: str,
    *,
    group_ids: list[str] | None,
    limit: int = 10,
    strategy: Strategy = HYBRID_RRF,
) -> list[tuple[Episode, float]]:
    """Episodes whose content matches `query`, best first (fused score)."""
    if group_ids == [] or limit <= 0 or not query.strip():
        return []
    found = await anyio.to_thread.run_sync(
        functools.partial(episode_hits, engine, query, group_ids, limit, strategy)
    )
    return [(ep, hit.score) for ep, hit in found]
