"""Search strategies as named data: which candidate lists are fused, and how results are reordered.

A `Strategy` is a frozen value; the four named ones are what `search_strategy` accepts on the
wire. With the default `hash` embedder the vector list is itself lexical (hashed character
trigrams and words), so every strategy is lexical there; with a real model the vector list adds
semantic matches.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["HYBRID_MMR", "HYBRID_RRF", "LEXICAL_ONLY", "STRATEGIES", "VECTOR_ONLY", "Strategy"]


@dataclass(frozen=True)
class Strategy:
    """How one search ranks.

    - `lexical` / `vector`: which candidate lists (BM25, cosine) are produced and fused;
    - `candidates`: each list holds up to `candidates * limit` hits (3, as in the reference);
    - `rrf_k`: the reciprocal-rank-fusion constant (60, as in the reference);
    - `mmr_lambda`: if set, the fused pool is reordered by maximal marginal relevance with this
      relevance weight (1.0 = pure relevance);
    - `max_hops`: with a `center_node_uuid`, hits are reordered by graph distance from it
      (breadth-first over facts of the group, at most this many hops; farther counts as
      unreachable).
    """

    name: str
    lexical: bool = True
    vector: bool = True
    candidates: int = 3
    rrf_k: int = 60
    mmr_lambda: float | None = None
    max_hops: int = 3


HYBRID_RRF = Strategy("hybrid_rrf")
HYBRID_MMR = Strategy("hybrid_mmr", mmr_lambda=0.5)
LEXICAL_ONLY = Strategy("lexical", vector=False)
VECTOR_ONLY = Strategy("vector", lexical=False)

STRATEGIES: dict[str, Strategy] = {
    s.name: s for s in (HYBRID_RRF, HYBRID_MMR, LEXICAL_ONLY, VECTOR_ONLY)
}
