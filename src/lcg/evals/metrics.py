"""Scores between two extractions of the same article: strict-string and judge-aligned F1.

An extraction is reduced to comparable keys: an entity is its normalised name; a fact is its
normalised (source, relation, target) triple. Strict F1 counts exact key matches (as multisets);
judged F1 counts the one-to-one pairs a judge aligned by meaning.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["Score", "aligned_score", "entity_key", "fact_key", "percentile", "strict_score"]

_SPACE = re.compile(r"\s+")
_PUNCT = re.compile(r"[^\w\s]")


def _norm(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold()
    return _SPACE.sub(" ", _PUNCT.sub(" ", text)).strip()


def entity_key(name: str) -> str:
    return _norm(name)


def fact_key(source: str, relation: str, target: str) -> str:
    return f"{_norm(source)} | {_norm(relation).replace(' ', '_')} | {_norm(target)}"


@dataclass(frozen=True)
class Score:
    """Counts behind precision, recall and F1 (summable over articles)."""

    matched: int
    predicted: int
    reference: int

    def __add__(self, other: Score) -> Score:
        return Score(
            self.matched + other.matched,
            self.predicted + other.predicted,
            self.reference + other.reference,
        )

    @property
    def precision(self) -> float:
        return self.matched / self.predicted if self.predicted else 1.0

    @property
    def recall(self) -> float:
        return self.matched / self.reference if self.reference else 1.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0


def strict_score(predicted: Iterable[str], reference: Iterable[str]) -> Score:
    """Exact matches between two multisets of keys."""
    pred, ref = Counter(predicted), Counter(reference)
    matched = sum((pred & ref).values())
    return Score(matched, sum(pred.values()), sum(ref.values()))


def aligned_score(pairs: Iterable[tuple[int, int]], predicted: int, reference: int) -> Score:
    """Score from a judge's alignment: pairs (predicted index, reference index), each index
    used at most once (later duplicates and out-of-range indexes are ignored)."""
    used_p: set[int] = set()
    used_r: set[int] = set()
    for p, r in pairs:
        if 0 <= p < predicted and 0 <= r < reference and p not in used_p and r not in used_r:
            used_p.add(p)
            used_r.add(r)
    return Score(len(used_p), predicted, reference)


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0-100) by nearest rank, or None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]
