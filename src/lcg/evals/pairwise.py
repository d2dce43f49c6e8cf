"""Blind pairwise judging: which slot each backend takes, and what the verdicts add up to.

Every pair of backends is judged on every article in both slot orders. Which order is asked
first is derived from a hash of (article, pair) — never random — so a re-run asks the same
questions in the same order and hits the judge cache. A verdict that flips with the slot order
is *inconsistent* and counts as a tie. Two warnings guard the judge itself: a pair whose
first-slot preference falls outside 45-55% (position bias: the judge is not calibrated), and an
order-inconsistency rate above 20%.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["PairTally", "Verdict", "first_order"]

Verdict = Literal["A", "B", "tie"]
CALIBRATION_BAND = (0.45, 0.55)
MAX_INCONSISTENCY = 0.20


def first_order(article: str, left: str, right: str) -> tuple[str, str]:
    """The slot order asked first for this article and pair (the other order follows)."""
    a, b = sorted((left, right))
    digest = hashlib.sha256(f"{article}\0{a}\0{b}".encode()).digest()
    return (a, b) if digest[0] % 2 == 0 else (b, a)


@dataclass
class PairTally:
    """Wins, losses and ties of `left` against `right` over the articles judged."""

    left: str
    right: str
    wins: int = 0
    losses: int = 0
    ties: int = 0
    inconsistent: int = 0
    first_slot_preferred: int = 0  # verdicts (of both orders) that picked slot A
    decisive_verdicts: int = 0  # verdicts that picked a slot at all
    warnings: list[str] = field(default_factory=list)

    def add(self, left_in_a: Verdict, left_in_b: Verdict) -> None:
        """Record the two verdicts for one article: with `left` in slot A, then in slot B."""
        for verdict in (left_in_a, left_in_b):
            if verdict != "tie":
                self.decisive_verdicts += 1
                self.first_slot_preferred += verdict == "A"
        left_won_a = {"A": 1, "B": -1, "tie": 0}[left_in_a]
        left_won_b = {"A": -1, "B": 1, "tie": 0}[left_in_b]
        if left_won_a * left_won_b < 0:
            self.inconsistent += 1
            self.ties += 1
        elif left_won_a + left_won_b > 0:
            self.wins += 1
        elif left_won_a + left_won_b < 0:
            self.losses += 1
        else:
            self.ties += 1

    @property
    def articles(self) -> int:
        return self.wins + self.losses + self.ties

    @property
    def inconsistency_rate(self) -> float:
        return self.inconsistent / self.articles if self.articles else 0.0

    @property
    def first_slot_rate(self) -> float | None:
        if not self.decisive_verdicts:
            return None
        return self.first_slot_preferred / self.decisive_verdicts

    def check(self) -> list[str]:
        """The judge-quality warnings for this pair (also kept in `warnings`)."""
        self.warnings = []
        rate = self.first_slot_rate
        low, high = CALIBRATION_BAND
        if rate is not None and not low <= rate <= high:
            self.warnings.append(
                f"{self.left} vs {self.right}: the judge preferred slot A in {rate:.0%} of "
                f"decisive verdicts (outside {low:.0%}-{high:.0%}: position bias)"
            )
        if self.inconsistency_rate > MAX_INCONSISTENCY:
            self.warnings.append(
                f"{self.left} vs {self.right}: {self.inconsistency_rate:.0%} of verdicts flip "
                f"with the slot order (over {MAX_INCONSISTENCY:.0%})"
            )
        return self.warnings

    def to_dict(self) -> dict[str, object]:
        return {
            "left": self.left,
            "right": self.right,
            "wins": self.wins,
            "losses": self.losses,
            "ties": self.ties,
            "inconsistent": self.inconsistent,
            "inconsistency_rate": round(self.inconsistency_rate, 4),
            "first_slot_rate": None
            if self.first_slot_rate is None
            else round(self.first_slot_rate, 4),
            "warnings": list(self.warnings),
        }
