"""`no_gc()`: cyclic garbage collection paused while a load builds many objects at once.

Loading a saved index (lcg.engine.names, lcg.search.snapshot) creates millions of tuples and
lists, none of them garbage; each allocation burst meanwhile triggers collections that walk every
young container again, and older generations as they grow: parsing a partition's per-row label
lists (500k rows) took 1.3 s with collections and 0.2 s without. Reference counting still frees
everything that is not in a cycle; the collections resume at the end of the block.

A block that built many objects ends with one full collection: left to the collector, the
objects it built all sit in the youngest generation, and the next collections walk them again,
generation by generation, during whatever request comes next (at 1M facts a first episode after
open spent ~80 ms in one such collection). One pass at the end of the load, while it is still the
open, moves them to the oldest generation, which is walked again only once it grows by a quarter.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["no_gc"]

# Net new containers in a block from which it ends with a full collection (a collection of the
# young generation walks ~700 at a time; a saved 1M index's load creates millions).
COLLECT_AFTER = 200_000


@contextlib.contextmanager
def no_gc() -> Iterator[None]:
    """No cyclic garbage collection in the block (unless it was already off)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
            if gc.get_count()[0] >= COLLECT_AFTER:
                gc.collect()
