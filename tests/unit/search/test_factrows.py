"""The sorted byte keys the temporal rows are found by (lcg.search.factrows): a key is found
only when its bytes are held exactly; anything else is not found, so it is read from the store."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lcg.search.factrows import _keys, _lookup


def test_keys_are_found_only_when_held_exactly() -> None:
    values = ["b-2", "a-1", "ü-3", "c", "", "a-1\x00"]
    keys, odd = _keys(pa.chunked_array([values]))
    assert odd == [4, 5]  # empty, and a trailing NUL numpy would drop
    ordered = np.sort(keys)
    lo, hi = _lookup(ordered, ["a-1", "ü-3", "c", "missing", "a-1-longer-than-any-key", ""])
    found = [int(b - a) for a, b in zip(lo.tolist(), hi.tolist(), strict=True)]
    # "a-1" matches its own key and the NUL-terminated one (which is never served: `odd`).
    assert found == [2, 1, 1, 0, 0, 0]
    assert _lookup(ordered, [])[0].size == 0


def test_keys_of_an_empty_column() -> None:
    keys, odd = _keys(pa.chunked_array([[]], type=pa.string()))
    assert keys.size == 0 and odd == []
    lo, hi = _lookup(keys, ["x"])
    assert (hi - lo).tolist() == [0]
