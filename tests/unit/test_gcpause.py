"""lcg.gcpause: collections paused in a load, and one full pass after a large one."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from lcg.gcpause import COLLECT_AFTER, no_gc


@contextmanager
def _full_passes() -> Iterator[list[int]]:
    """The full (oldest-generation) collections that start in the block."""
    seen: list[int] = []

    def note(phase: str, info: dict[str, Any]) -> None:
        if phase == "start" and info["generation"] == 2:
            seen.append(2)

    gc.callbacks.append(note)
    try:
        yield seen
    finally:
        gc.callbacks.remove(note)


def test_a_large_load_ends_with_a_full_collection() -> None:
    """The containers a large block built are not left in the youngest generation for the
    next request's collections to walk: the block ends with a full pass."""
    gc.collect()
    with _full_passes() as passes:
        with no_gc():
            assert not gc.isenabled()
            kept = [[i] for i in range(COLLECT_AFTER + 1000)]
            assert gc.get_count()[0] >= COLLECT_AFTER  # nothing collected in the block
        assert gc.isenabled()
    assert passes == [2]
    assert len(kept) == COLLECT_AFTER + 1000


def test_a_small_load_leaves_collection_to_the_collector() -> None:
    gc.collect()
    with _full_passes() as passes:
        with no_gc():
            kept = [[i] for i in range(5000)]
        assert gc.isenabled()
    assert passes == []
    assert len(kept) == 5000


def test_a_block_inside_a_paused_collector_leaves_it_paused() -> None:
    gc.collect()
    gc.disable()
    try:
        with _full_passes() as passes:
            with no_gc():
                kept = [[i] for i in range(COLLECT_AFTER + 1000)]
            assert not gc.isenabled()  # the outer pause decides
        assert passes == []
        assert len(kept) == COLLECT_AFTER + 1000
    finally:
        gc.enable()
