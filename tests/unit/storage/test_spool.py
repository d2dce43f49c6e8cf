"""`spool.forget_scans` leans on a private attribute of the LadybugDB binding (its implicit
prepared-statement cache): a binding that lacks it or changed it must never fail a COPY; lcg
says so once and every later COPY reads a Parquet file instead (`holds_scans` is False)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from lcg.storage import spool


@pytest.fixture(autouse=True)
def _usable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spool, "_CACHE_USABLE", [True])


class _Raw:
    def __init__(self, cache: Any) -> None:
        if cache is not None:
            setattr(self, spool._CACHE, cache)


class _Exploding(dict[Any, Any]):
    def __iter__(self) -> Any:
        raise RuntimeError("changed binding")


def test_the_copy_statements_are_dropped_and_the_others_kept() -> None:
    cache = {("COPY T FROM $x", ()): object(), ("MATCH (n) RETURN n", ()): object()}
    raw = _Raw(cache)
    assert spool.holds_scans(raw)
    assert spool.forget_scans(raw)
    assert list(cache) == [("MATCH (n) RETURN n", ())]
    assert spool.holds_scans(raw)


@pytest.mark.parametrize(
    "cache",
    [None, ["not", "a", "dict"], {"COPY T FROM $x": object()}, _Exploding()],
    ids=["missing", "not-a-dict", "other-keys", "raises"],
)
def test_a_binding_whose_cache_differs_falls_back_to_the_file_and_says_so(
    cache: Any, caplog: pytest.LogCaptureFixture
) -> None:
    raw = _Raw(cache)
    with caplog.at_level(logging.WARNING, logger=spool.__name__):
        assert not spool.forget_scans(raw)  # never raises
        assert not spool.holds_scans(raw)
        spool.forget_scans(raw)
    warned = [r for r in caplog.records if "Parquet" in r.getMessage()]
    assert len(warned) == 1  # once per process
    assert not spool.holds_scans(_Raw({}))  # and every later COPY spools
