"""Eval scoring: keys, strict and aligned F1, percentiles, pairwise tallies, backend specs,
and the judge cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from lcg.errors import InvalidRequestError
from lcg.evals.backends import parse_backend
from lcg.evals.judgecache import JudgeCache, judge_key
from lcg.evals.metrics import (
    Score,
    aligned_score,
    entity_key,
    fact_key,
    percentile,
    strict_score,
)
from lcg.evals.pairwise import PairTally, first_order


def test_keys_ignore_case_punctuation_and_spacing() -> None:
    assert entity_key("  N.A.S.A ") == entity_key("n a s a")
    assert fact_key("Jim Lovell", "commanded", "Apollo 13") == fact_key(
        "jim  lovell", "COMMANDED", "Apollo-13"
    )
    assert fact_key("A", "works at", "B") == fact_key("a", "works_at", "b")
    assert entity_key("Apollo 1") != entity_key("Apollo 11")


def test_strict_score_counts_multiset_matches() -> None:
    s = strict_score(["a", "a", "b", "c"], ["a", "b", "b", "d"])
    assert (s.matched, s.predicted, s.reference) == (2, 4, 4)
    assert s.precision == s.recall == s.f1 == 0.5
    same = strict_score(["x", "y"], ["y", "x"])
    assert same.f1 == 1.0
    assert strict_score([], []).f1 == 1.0
    assert strict_score(["x"], []).f1 == 0.0


def test_scores_add_up_over_articles() -> None:
    total = Score(1, 2, 2) + Score(3, 3, 5)
    assert (total.matched, total.predicted, total.reference) == (4, 5, 7)
    assert total.f1 == pytest.approx(2 * (4 / 5) * (4 / 7) / (4 / 5 + 4 / 7))


def test_aligned_score_uses_each_item_once_and_ignores_bad_indexes() -> None:
    s = aligned_score([(0, 1), (0, 2), (1, 1), (2, 0), (9, 0), (-1, 0)], 3, 3)
    assert s.matched == 2  # (0,1) and (2,0); (0,2) reuses 0, (1,1) reuses 1
    assert s.f1 == pytest.approx(2 / 3)


def test_percentile_by_nearest_rank() -> None:
    values = [5.0, 1.0, 3.0, 2.0, 4.0]
    assert percentile(values, 50) == 3.0
    assert percentile(values, 95) == 5.0
    assert percentile(values, 0) == 1.0
    assert percentile([], 50) is None


def test_slot_order_is_a_stable_function_of_article_and_pair() -> None:
    orders = {first_order(f"art{i}", "local", "hosted") for i in range(40)}
    assert orders == {("local", "hosted"), ("hosted", "local")}  # both orders occur
    for i in range(40):
        assert first_order(f"art{i}", "local", "hosted") == first_order(
            f"art{i}", "hosted", "local"
        )


def test_pair_tally_counts_wins_ties_and_order_flips() -> None:
    t = PairTally("x", "y")
    t.add("A", "B")  # x wins in both orders
    t.add("B", "A")  # y wins in both orders
    t.add("A", "A")  # slot A wins both times: a flip, counted as a tie
    t.add("tie", "B")  # x wins once, ties once: x
    assert (t.wins, t.losses, t.ties, t.inconsistent) == (2, 1, 1, 1)
    assert t.inconsistency_rate == 0.25
    warnings = t.check()
    assert any("flip" in w for w in warnings)


def test_a_position_biased_judge_is_flagged() -> None:
    t = PairTally("x", "y")
    for _ in range(10):
        t.add("A", "A")
    assert t.first_slot_rate == 1.0
    assert any("position bias" in w for w in t.check())
    fair = PairTally("x", "y")
    for _ in range(5):
        fair.add("A", "B")
        fair.add("B", "A")
    assert fair.check() == []


@pytest.mark.parametrize(
    ("text", "kind", "options"),
    [
        ("h=anthropic", "anthropic", {}),
        ("h=anthropic:model=claude-x", "anthropic", {"model": "claude-x"}),
        (
            "l=oai-http:url=http://127.0.0.1:8080/v1,model=qwen",
            "oai-http",
            {"url": "http://127.0.0.1:8080/v1", "model": "qwen"},
        ),
        ("u=oai-uds:path=/tmp/s.sock", "oai-uds", {"path": "/tmp/s.sock"}),
        ("c=cassette:path=a.jsonl", "cassette", {"path": "a.jsonl"}),
    ],
)
def test_backend_specs_parse(text: str, kind: str, options: dict[str, str]) -> None:
    spec = parse_backend(text)
    assert (spec.kind, spec.options) == (kind, options)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("noequals", "NAME=SPEC"),
        ("x=gpt:foo=1", "unknown backend kind"),
        ("x=oai-http", "needs url"),
        ("x=cassette:url=u", "bad option"),
        ("x=oai-http:url", "bad option"),
    ],
)
def test_bad_backend_specs_are_rejected(text: str, message: str) -> None:
    with pytest.raises(InvalidRequestError, match=message):
        parse_backend(text)


def test_the_judge_cache_survives_a_reload_and_counts_hits(tmp_path: Path) -> None:
    cache = JudgeCache(tmp_path / "judge.jsonl")
    key = judge_key("judge-m", "v1", "align", {"a": [1], "b": [2]})
    assert key == judge_key("judge-m", "v1", "align", {"b": [2], "a": [1]})
    assert key != judge_key("judge-m", "v2", "align", {"a": [1], "b": [2]})
    assert cache.get(key) is None
    cache.put(key, {"pairs": [[0, 0]]})
    again = JudgeCache(tmp_path / "judge.jsonl")
    assert again.get(key) == {"pairs": [[0, 0]]}
    assert (again.hits, again.misses) == (1, 0)
