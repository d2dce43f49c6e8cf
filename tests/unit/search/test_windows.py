"""Episodes as windows (lcg.search.windows, lcg.search.partition `WINDOW`): what the index holds
of an episode's text, how a partition keeps the windows of one uuid together through
replacements, removals, compactions and a save/load, and how window hits map back to episodes
(best window, its score plus a share of the others, weighted fusion)."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from lcg.graph.hybrid import _per_uuid
from lcg.search.floor import PASSAGE_FLOOR_RAISE, passage_floor
from lcg.search.partition import WINDOW, Partition
from lcg.search.scoring import rrf
from lcg.search.text import Vocabulary
from lcg.search.windows import WINDOW_CHARS, episode_windows

COLUMNS = (WINDOW, "start", "end")


def test_an_episode_that_fits_is_one_window_of_its_whole_text() -> None:
    assert episode_windows("  short turn \n") == [(0, 14)]
    assert episode_windows("") == [(0, 0)]
    assert episode_windows("x" * WINDOW_CHARS) == [(0, WINDOW_CHARS)]


@settings(max_examples=20, deadline=None)
@given(st.lists(st.sampled_from(["alpha", "beta.", "gamma\n\n", "delta"]), min_size=300))
def test_a_long_episode_is_windows_in_order_that_fit(words: list[str]) -> None:
    text = " ".join(words)
    cut = episode_windows(text, 200)
    assert len(cut) > 1
    assert all(0 <= a < b <= len(text) and b - a <= 200 for a, b in cut)
    assert all(prev[1] <= nxt[0] for prev, nxt in itertools.pairwise(cut))
    # Every word is in exactly one window; what lies between windows is whitespace.
    assert [w for a, b in cut for w in text[a:b].split()] == text.split()
    gaps = [text[b:a] for (_, b), (a, _) in itertools.pairwise(cut)]
    assert all(not g.strip() for g in gaps)


def _add(part: Partition, uuid: str, windows: list[str]) -> None:
    m = len(windows)
    starts = np.arange(m, dtype=np.int64) * 100
    part.add(
        [uuid] * m,
        windows,
        {"episode": (np.ones((m, 4), dtype=np.float32) / 2, np.ones(m, dtype=bool))},
        {WINDOW: np.arange(m, dtype=np.int64), "start": starts, "end": starts + 50},
    )


def _live(part: Partition) -> dict[str, list[int]]:
    """uuid -> the window numbers of its live documents, in document order."""
    view = part.view()
    out: dict[str, list[int]] = {}
    for doc in np.flatnonzero(view.live()).tolist():
        out.setdefault(view.uuids[doc], []).append(int(view.columns[WINDOW][doc]))
    return out


def test_windows_of_a_uuid_are_replaced_removed_and_compacted_together(tmp_path: Path) -> None:
    part = Partition(Vocabulary(), ("episode",), 4, COLUMNS)
    _add(part, "a", ["apollo one", "saturn two", "lunar three"])
    _add(part, "b", ["crew"])
    assert _live(part) == {"a": [0, 1, 2], "b": [0]}
    view = part.view()
    assert view.windows_of(1).tolist() == [0, 1, 2] == view.windows_of(2).tolist()
    assert view.windows_of(3).tolist() == [3]
    assert len(part) == 4
    _add(part, "a", ["orbit", "moon"])  # a replacement: every old window of "a" dies
    assert _live(part) == {"b": [0], "a": [0, 1]}
    assert len(part) == 3
    part.compact()
    view = part.view()
    assert view.n == 3 and view.uuids == ["b", "a", "a"]
    assert part.doc("a") == 1 and view.windows_of(2).tolist() == [1, 2]
    part.remove(["a"])
    assert _live(part) == {"b": [0]}
    _add(part, "c", ["rocket", "module"])
    saved = tmp_path / "part"
    saved.mkdir()
    part.save(saved)
    loaded = Partition(Vocabulary(), ("episode",), 4, COLUMNS)
    loaded.load(saved)
    assert _live(loaded) == {"b": [0], "c": [0, 1]}
    loaded.remove(["c"])  # the loaded partition knows both windows are "c"'s
    assert _live(loaded) == {"b": [0]}


def test_hits_on_windows_are_one_per_uuid_at_its_best_window() -> None:
    part = Partition(Vocabulary(), ("episode",), 4, COLUMNS)
    _add(part, "a", ["one", "two", "three"])  # documents 0, 1, 2
    _add(part, "b", ["four", "five"])  # documents 3, 4
    view = part.view()
    docs = np.array([0, 1, 2, 3, 4], dtype=np.int64)
    scores = np.array([1.0, 3.0, 2.0, 2.5, 0.5])
    best_docs, best = _per_uuid(view, docs, scores, 0.0)
    assert best_docs.tolist() == [1, 3] and best.tolist() == [3.0, 2.5]
    # A share of the other windows' scores: "a" 3 + 0.5 * 3, "b" 2.5 + 0.5 * 0.5.
    _, summed = _per_uuid(view, docs, scores, 0.5)
    assert summed.tolist() == [4.5, 2.75]
    # A tie between windows goes to the first.
    tied, _ = _per_uuid(view, docs[:3], np.array([2.0, 2.0, 1.0]), 0.0)
    assert tied.tolist() == [0]


def test_weighted_fusion_scales_each_list() -> None:
    lists = [["x", "y"], ["y", "z"]]
    assert rrf(lists, 60) == rrf(lists, 60, [1.0, 1.0])
    fused = dict(rrf(lists, 60, [1.0, 0.5]))
    assert fused["x"] == 1 / 60
    assert fused["y"] == 1 / 61 + 0.5 / 60
    assert fused["z"] == 0.5 / 61


def test_passage_search_raises_the_default_floor_and_keeps_a_set_one() -> None:
    assert passage_floor(0.45, None) == 0.45 + PASSAGE_FLOOR_RAISE
    assert passage_floor(0.05, 0.05) == 0.05
