"""A read at a past instant never shows text from a later episode (lcg.temporal.asof,
docs/temporal.md §4): a property over random histories.

Each history is a run of dated episodes written through `knowledge_add_facts` (no model). Every
episode carries a word of its own (`w<k>x`) in each entity summary and fact sentence it writes,
so any text of episode k in an answer shows that word. Entities are shared between episodes
(their summaries merge), and single-valued relations (LIVES_IN, WORKS_AT) supersede one
another. A read at an instant T, for T between and around the episodes' dates, must contain no
word of an episode dated after T.
"""

from __future__ import annotations

import re
from datetime import date, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from lcg import Settings, open_engine
from lcg.service.registry import dispatch

pytestmark = pytest.mark.anyio

PEOPLE = ["Ana", "Bo", "Cy"]
PLACES = ["Lisbon", "Porto", "Braga"]
RELATIONS = ["LIVES_IN", "WORKS_AT", "VISITED"]
START = date(2021, 1, 1)
WORD = re.compile(r"\bw(\d+)x\b")

fact_st = st.tuples(st.sampled_from(PEOPLE), st.sampled_from(RELATIONS), st.sampled_from(PLACES))
episode_st = st.tuples(
    st.integers(min_value=1, max_value=400),  # days after the previous episode
    st.lists(fact_st, min_size=1, max_size=3),
    st.lists(st.sampled_from(PEOPLE + PLACES), max_size=2),  # entities re-described
)
history_st = st.lists(episode_st, min_size=2, max_size=5)


def _episodes(history: list[Any]) -> list[tuple[date, dict[str, Any]]]:
    """The `knowledge_add_facts` calls of a history, with their dates."""
    out = []
    day = START
    for k, (gap, facts, described) in enumerate(history):
        day += timedelta(days=gap)
        word = f"w{k}x"
        names = {n for s, _, t in facts for n in (s, t)} | set(described)
        params = {
            "reference_time": day.isoformat(),
            "name": f"note {k}",
            "body": f"note {word}",
            "source_description": f"notes {word}",
            "entities": [{"name": n, "summary": f"{n} seen in {word}."} for n in sorted(names)],
            "facts": [
                {"source": s, "relation_type": r, "target": t, "fact": f"{s} {r} {t} per {word}."}
                for s, r, t in facts
            ],
        }
        out.append((day, params))
    return out


def _later_words(text: str, dates: list[date], at: date) -> set[str]:
    return {m.group(0) for m in WORD.finditer(text) if dates[int(m.group(1))] > at}


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(history=history_st, offsets=st.lists(st.integers(-5, 5), min_size=1, max_size=3))
# Ana moves, and her summary merges the later episode's sentence: the case the issue met.
@example(
    history=[(1, [("Ana", "LIVES_IN", "Lisbon")], []), (100, [("Ana", "LIVES_IN", "Porto")], [])],
    offsets=[0],
)
def test_a_past_read_never_shows_text_of_a_later_episode(
    tmp_path_factory: pytest.TempPathFactory, history: list[Any], offsets: list[int]
) -> None:
    import anyio

    home = tmp_path_factory.mktemp("past") / ".lcg"
    config = Settings.for_home(home, kuzu_buffer_pool_mb=128, embedder="hash")

    async def run() -> None:
        engine = open_engine(config)
        try:
            calls = _episodes(history)
            for _, params in calls:
                await dispatch(engine, "knowledge_add_facts", params)
            dates = [day for day, _ in calls]
            # Instants at, between and around the episodes: the day before each, each day, and
            # a few days off.
            instants = sorted(
                {d + timedelta(days=o) for d in dates for o in (-1, 0, *offsets)} - {dates[-1]}
            )
            shown = 0
            for at in instants:
                stamp = f"{at.isoformat()}T12:00:00Z"
                for query in (*PEOPLE, *PLACES):
                    context = await dispatch(
                        engine,
                        "knowledge_get_context",
                        {"query": query, "as_of": stamp, "token_budget": 4000, "hops": 2},
                    )
                    block = context["context"]
                    assert not _later_words(block, dates, at), (at, block)
                    shown += context["node_count"]
                    found = await dispatch(
                        engine, "knowledge_find_relationships", {"query": query, "as_of": stamp}
                    )
                    assert not _later_words(repr(found["facts"]), dates, at), (query, at)
                for method, key in (
                    ("knowledge_get_edges_by_group", "edges"),
                    ("knowledge_list_relationships", "facts"),
                ):
                    found = await dispatch(engine, method, {"as_of": stamp})
                    assert not _later_words(repr(found[key]), dates, at), (method, at)
            assert shown  # the blocks were not all empty
        finally:
            engine.close()

    anyio.run(run)
