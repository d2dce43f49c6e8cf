"""Passages of long episodes: windows of an episode's text and the one that best answers a query.

A conversation turn or a changelog release is often longer than what a reader wants quoted (and
than an embedder's window); the evidence for a question is a few sentences of it. `windows`
(lcg.search.windows, the pieces the index holds a document of) cuts a text into pieces of at
most `WINDOW_CHARS` characters at paragraph, then sentence, then word boundaries; `best_window`
picks the piece holding the most of the query's idf weight
(the Porter stems of its words, stopwords dropped, as the index analyses text), the first one on
a tie, so a
passage always comes back with the offsets `[start, end)` of what it quotes.

`passage_scores` is what `knowledge_search_passages` reports as a passage's `score` when the
client passes no `min_score`: the better of its cosine similarity to the query and the share of
the query's idf weight it holds (the quantity the BM25 floor of lcg.search.floor tests), so a
passage found by its words never scores 0.0 (docs/search.md, "Passages").
"""

from __future__ import annotations

import bisect
import math
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import Stemmer

from lcg.search.index import SearchIndex
from lcg.search.partition import View
from lcg.search.scoring import bm25_idf
from lcg.search.standing import STANDING
from lcg.search.text import STOPWORDS, tokens
from lcg.search.windows import WINDOW_CHARS, windows

__all__ = [
    "WINDOW_CHARS",
    "Window",
    "best_window",
    "passage_scores",
    "query_stems",
    "query_weights",
    "standing_hits",
    "windows",
]

_LOCAL = threading.local()


@dataclass(frozen=True)
class Window:
    """A quoted piece of an episode: its offsets in the episode text and how well it matches."""

    start: int
    end: int
    score: float


def best_window(
    text: str,
    stems: Mapping[str, float],
    size: int = WINDOW_CHARS,
    pieces: Sequence[tuple[int, int]] | None = None,
) -> Window:
    """The window of `text` holding the most query weight (`stems`: the query's word stems ->
    idf, `query_stems`), each stem counted once plus a logarithmic bonus for repeats; the first
    window on a tie. A stem counts where a word of the lower-cased text starts with it (a prefix
    of its inflections: "migrat" in "migration"), a number only where it is a whole one ("7" in
    "3.7" but not in "17": the words and numbers the index splits text into, lcg.search.text)."""
    cut = list(pieces) if pieces is not None else windows(text, size)
    if not cut:
        return Window(0, 0, 0.0)
    if len(cut) == 1 or not stems:
        return Window(cut[0][0], cut[0][1], 0.0)
    lower = text.lower()
    if len(lower) == len(text):  # lower-casing kept every offset (almost always)
        scores = _scores(lower, cut, stems)
        best = max(range(len(cut)), key=lambda i: (scores[i], -i))
        return Window(cut[best][0], cut[best][1], scores[best])
    best, best_score = 0, -1.0
    for i, (lo, hi) in enumerate(cut):
        piece = text[lo:hi].lower()
        score = 0.0
        for stem, weight in stems.items():
            n = sum(1 for _ in _starts(piece, stem)) if stem else 0
            if n:
                score += weight * (1.0 + math.log(n))
        if score > best_score:
            best, best_score = i, score
    return Window(cut[best][0], cut[best][1], best_score)


def _starts(lower: str, stem: str, lo: int = 0, hi: int | None = None) -> Iterator[int]:
    """Where `stem` starts a word of `lower[lo:hi]` (a number: where it is the whole number),
    as the index splits text into words and numbers (lcg.search.text)."""
    end = len(lower) if hi is None else hi
    whole = stem.isdigit()
    pos = lower.find(stem, lo, end)
    while pos != -1:
        after = pos + len(stem)
        if (pos == 0 or not lower[pos - 1].isalnum()) and not (
            whole and after < len(lower) and lower[after].isdigit()
        ):
            yield pos
        pos = lower.find(stem, after, end)


def _scores(lower: str, cut: Sequence[tuple[int, int]], stems: Mapping[str, float]) -> list[float]:
    """Each window's score (`best_window`) from one scan of `lower` per stem: an occurrence
    falls in the window that starts before it, and counts there when it ends inside it
    (windows are split at spaces, so only a word longer than a window is cut)."""
    starts = [lo for lo, _ in cut]
    scores = [0.0] * len(cut)
    for stem, weight in stems.items():
        if not stem:
            continue
        per: dict[int, int] = {}
        for pos in _starts(lower, stem, starts[0]):
            i = bisect.bisect_right(starts, pos) - 1
            if pos + len(stem) <= cut[i][1]:
                per[i] = per.get(i, 0) + 1
        for i, n in per.items():
            scores[i] += weight * (1.0 + math.log(n))
    return scores


def query_stems(index: SearchIndex, query: str, groups: Sequence[str] | None) -> dict[str, float]:
    """The query's indexed word stems -> idf over the episodes of `groups` (`query_weights`)."""
    weights = query_weights(index, query, groups)
    out: dict[str, float] = {}
    words = [w for w in dict.fromkeys(tokens(query)) if w not in STOPWORDS]
    for word, stem in zip(words, _stemmer().stemWords(words), strict=True):
        term = index.vocab.query(word)
        if term and term[0] in weights and stem:
            out[stem] = max(out.get(stem, 0.0), weights[term[0]])
    return out


def _stemmer() -> Stemmer.Stemmer:
    """This thread's Porter stemmer (the one lcg.search.text uses; not thread-safe)."""
    found: Stemmer.Stemmer | None = getattr(_LOCAL, "stemmer", None)
    if found is None:
        found = _LOCAL.stemmer = Stemmer.Stemmer("porter")
    return found


def query_weights(index: SearchIndex, query: str, groups: Sequence[str] | None) -> dict[int, float]:
    """Term id -> idf over the episodes of `groups` times the term's weight in the query
    (lcg.search.text.Vocabulary.query_terms), for the query's indexed terms."""
    terms = index.vocab.query_terms(query)[0]
    if not terms:
        return {}
    views = index.views("episode", groups)
    n_docs = max(1, sum(v.live_docs for _, v in views))
    df = np.array([sum(len(v.postings(t)[0]) for _, v in views) for t in terms], dtype=np.int64)
    idf = bm25_idf(n_docs, df)
    return {t: float(x) * terms[t] for t, x in zip(terms, idf.tolist(), strict=True)}


def _query_total(
    index: SearchIndex, query: str, weights: Mapping[int, float], views: Sequence[tuple[str, View]]
) -> float:
    """The query's whole idf weight over the episodes of `views`: its indexed terms' `weights`
    plus, for each query word no episode holds, the highest idf (as the floor counts it)."""
    n_docs = max(1, sum(v.live_docs for _, v in views))
    unknown = index.vocab.query_terms(query)[1]
    return sum(weights.values()) + unknown * float(bm25_idf(n_docs, np.zeros(1, np.int64))[0])


def passage_scores(
    index: SearchIndex,
    query: str,
    groups: Sequence[str] | None,
    hits: Sequence[tuple[str, int, float]],
) -> list[float]:
    """For hits given as (group, doc, cosine): max(cosine, share of the query's idf weight the
    document's episode holds, in any of its windows). A query word no episode holds counts with the highest idf (as the floor
    does), so a partial match scores below 1."""
    weights = query_weights(index, query, groups)
    views = dict(index.views("episode", sorted({g for g, _, _ in hits})))
    total = _query_total(index, query, weights, index.views("episode", groups))
    out: list[float] = []
    # Per group and term, which documents hold it: read once, not once per hit (get_context
    # scores its 40 hits; a postings read scans the partition's delta, `np.isin` per hit
    # and term was most of the cost).
    posted: dict[tuple[str, int], npt.NDArray[np.bool_]] = {}
    for group, doc, cosine in hits:
        view = views.get(group)
        held = 0.0
        if view is not None and total > 0:
            docs = view.windows_of(doc)  # the episode's windows: what it holds, in any of them
            for term, w in weights.items():
                holds = posted.get((group, term))
                if holds is None:
                    found = view.postings(term)[0]
                    holds = np.zeros(max(view.n, int(found.max(initial=-1)) + 1), dtype=bool)
                    holds[found] = True
                    posted[(group, term)] = holds
                if bool(holds[docs[docs < len(holds)]].any()):
                    held += w
        out.append(max(cosine, held / total if total > 0 else 0.0))
    return out


def standing_hits(
    index: SearchIndex,
    query: str,
    groups: Sequence[str] | None,
    vector: npt.NDArray[np.float32] | None,
) -> list[tuple[str, tuple[int, int], float, int]]:
    """The episodes of `groups` with a window that holds a standing instruction or preference
    (lcg.search.standing), as (uuid, the window's offsets, score, the window's marks), best
    first, each at its best marked window. `score` is the better of the window's cosine to
    `vector` (the query's; None for none) and the share of the query's idf weight the window
    holds (as `passage_scores`, but of the window alone: one array pass per term, however
    many windows are marked)."""
    weights = query_weights(index, query, groups)
    views = index.views("episode", groups)
    total = _query_total(index, query, weights, views)
    best: dict[str, tuple[str, tuple[int, int], float, int]] = {}
    for _, view in views:
        marks = view.columns.get(STANDING)
        if marks is None or view.n == 0:
            continue
        docs = np.flatnonzero((marks[: view.n] != 0) & view.live())
        if not len(docs):
            continue
        held = np.zeros(len(docs), dtype=np.float64)
        for term, w in weights.items():
            held += w * np.isin(docs, view.postings(term)[0])
        scores = held / total if total > 0 else held
        has = view.has_vector.get("episode")
        if vector is not None and has is not None and has[docs].any():
            cosines = np.zeros(len(docs), dtype=np.float64)
            with_vector = has[docs]
            cosines[with_vector] = view.vectors_of("episode", docs[with_vector]) @ vector
            scores = np.maximum(scores, cosines)
        for doc, score in zip(docs.tolist(), scores.tolist(), strict=True):
            uuid = view.uuids[doc]
            if uuid not in best or score > best[uuid][2]:
                span = (int(view.columns["start"][doc]), int(view.columns["end"][doc]))
                best[uuid] = (uuid, span, score, int(marks[doc]))
    return sorted(best.values(), key=lambda h: (-h[2], h[0]))
