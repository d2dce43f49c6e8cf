"""lcg.engine.follow: the retry of a write that lost the race to another process, and the
follower's view of positions (server mode; inert on the embedded store)."""

from __future__ import annotations

import pytest

from lcg.config import Settings
from lcg.engine import follow
from lcg.engine.follow import ATTEMPTS, _batches, lost_race, retrying
from lcg.engine.kernel import open_engine
from lcg.errors import ConflictError
from lcg.storage.backend import GroupMovedError
from lcg.wal.records import WalRecord


def test_a_lost_race_waits_a_bounded_jittered_backoff_then_gives_up() -> None:
    exc = GroupMovedError("g", 3, 5)
    waits = [lost_race(exc, n) for n in range(1, ATTEMPTS)]
    assert all(0.0 <= w <= follow.BACKOFF_MAX_S for w in waits)
    assert len(set(waits)) > 1  # jittered
    with pytest.raises(ConflictError, match="'g' kept moving") as raised:
        lost_race(exc, ATTEMPTS)
    assert raised.value.__cause__ is exc


def test_retrying_runs_the_attempt_again_until_it_lands(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(follow, "BACKOFF_BASE_S", 0.0)
    calls: list[int] = []

    def attempt() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise GroupMovedError("g", len(calls), len(calls) + 1)
        return "done"

    assert retrying(attempt) == "done"
    assert len(calls) == 3


def test_retrying_gives_up_after_the_last_attempt(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(follow, "BACKOFF_BASE_S", 0.0)
    calls: list[int] = []

    def attempt() -> None:
        calls.append(1)
        raise GroupMovedError("g", 0, 1)

    with pytest.raises(ConflictError):
        retrying(attempt)
    assert len(calls) == ATTEMPTS


def test_records_split_into_their_commits() -> None:
    def rec(seq: int, at: int | None) -> WalRecord:
        return WalRecord(seq, "", "episode.delete", {"uuid": str(seq)}, at=at)

    records = [rec(0, 0), rec(1, 1), rec(2, 0), rec(3, None), rec(4, 0), rec(5, 1), rec(6, 2)]
    assert [[r.seq for r in b] for b in _batches(records)] == [[0, 1], [2], [3], [4, 5, 6]]


def test_the_follower_is_inert_on_the_embedded_store(settings: Settings) -> None:
    engine = open_engine(settings)
    try:
        follower = engine._follow
        assert follower.status() == {**follower.status(), "running": False, "groups": {}}
        assert follower.sync("g") == 0
        assert follower.at("g") == 0
    finally:
        engine.close()
