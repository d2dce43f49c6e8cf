"""The search index's string codes (endpoints, predicates) decode back to their strings."""

from __future__ import annotations

from typing import Any

from lcg.embedding.hashing import HashEmbedder
from lcg.search.index import SearchIndex


def _no_reads(fn: Any) -> Any:
    raise AssertionError("no store read expected")


def test_decode_inverts_code_as_codes_are_added() -> None:
    index = SearchIndex(_no_reads, HashEmbedder())
    first = index.codes(["e-1", "e-2", None, "e-1"])
    assert index.decode(first.tolist()) == ["e-1", "e-2", "", "e-1"]
    later = [index.code("LEADS"), index.code("e-3"), index.code("e-2")]
    assert index.decode(later) == ["LEADS", "e-3", "e-2"]
    assert index.decode([]) == []
