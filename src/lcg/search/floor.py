"""The evidence floor of hybrid search: when a vector similarity counts as a match.

Reciprocal-rank fusion ranks whatever its lists hold, so a vector list that ranks every
document (similarity > 0) pads each result with unrelated items. A candidate therefore enters
a list only on its own evidence:
- the BM25 list holds documents that match the query: they hold query terms carrying at least
  `LEXICAL_COVERAGE` of the query's idf weight (a query word no document holds counts with the
  highest idf), so one common word of a long query ("crash" in "stock market crash of 1929")
  is not a match;
- the vector list holds documents whose cosine similarity to the query is above the floor of
  the embedder in use.
A query matching nothing returns nothing.

Floors were calibrated with `python bench/relevance.py --calibrate` on the Apollo corpus: for
each embedder, the cosine similarities of every judged (query, relevant entity) pair against
those of (query, other entity) pairs and the best similarity of each no-answer query. A floor
sits above nearly all of the unrelated pairs (their 99.9th percentile) and below most relevant
ones; the numbers are in the README ("Search") and docs/search.md.

`LCG_SEARCH_VECTOR_FLOOR` overrides the floor (for a model measured here or not); embedders not
listed here get `DEFAULT_FLOOR`.
"""

from __future__ import annotations

from lcg.embedding.base import EmbedderIdentity

__all__ = [
    "DEFAULT_FLOOR",
    "LEXICAL_COVERAGE",
    "LEXICAL_FLOOR",
    "MINILM_FLOOR",
    "MODEL_FLOORS",
    "PASSAGE_COVERAGE",
    "PASSAGE_FLOOR_RAISE",
    "passage_floor",
    "vector_floor",
]

# The share of a query's idf weight a document must hold to be a BM25 match: a third, so a
# three-word query needs about one rare word or two common ones.
LEXICAL_COVERAGE = 1 / 3
# Passages (episode text): a long question shares only a few words with the turn or release
# that answers it, and a passage's text is long enough that a word it holds is evidence. The
# entity and fact floor (a third of the query's weight) cost a fifth of passage recall on the
# BEAM chats of bench/evidence.py (docs/search.md, "Passages"); passages need one query word.
PASSAGE_COVERAGE = 0.0
# Passages: what passage search (without a client's `min_score`) adds to the embedder's floor
# for its vector list, unless the floor is set (`LCG_SEARCH_VECTOR_FLOOR`): 0.1 (MiniLM 0.55, `hash` 0.7), so that a window is a vector match only
# when it is close; below, on release notes many releases cleared the floor and pulled the
# fused ranking under BM25's (docs/search.md, "Passages", has the settings measured).
PASSAGE_FLOOR_RAISE = 0.1
# Lexical-only embedders (`hash`): unrelated texts still share trigrams, so only a near-spelling
# match counts (a misspelt name), and word overlap is left to BM25.
LEXICAL_FLOOR = 0.6
# Models, by identity name. all-MiniLM-L6-v2 (and its int8 variant, whose similarities it
# matches): 0.45, chosen with `bench/relevance.py --floors` on half the judged queries (even
# positions: the highest floor before their recall@10 drops) and checked on the other half;
# it sits near the 97th percentile of unrelated pairs (p90 0.36, p99 0.54) and below the 5th
# percentile of relevant ones (0.47). docs/search.md, "Calibration".
MINILM_FLOOR = 0.45
MODEL_FLOORS: dict[str, float] = {
    "all-MiniLM-L6-v2": MINILM_FLOOR,
    "all-MiniLM-L6-v2-int8": MINILM_FLOOR,
    "sentence-transformers/all-MiniLM-L6-v2": MINILM_FLOOR,
}
# Any other semantic model: sentence-embedding models put unrelated short texts at 0.0-0.3.
DEFAULT_FLOOR = 0.3


def vector_floor(identity: EmbedderIdentity, override: float | None = None) -> float:
    """The minimum cosine similarity for a vector match with this embedder."""
    if override is not None:
        return override
    if identity.lexical_only:
        return LEXICAL_FLOOR
    return MODEL_FLOORS.get(identity.model, DEFAULT_FLOOR)


def passage_floor(floor: float, override: float | None) -> float:
    """The vector floor of passage search without a client's `min_score`: a set floor
    (`override`, the setting `floor` came from) as it is, else `floor` + `PASSAGE_FLOOR_RAISE`."""
    return floor if override is not None else floor + PASSAGE_FLOOR_RAISE
