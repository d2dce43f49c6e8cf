"""A due checkpoint runs after the commit that made it due has returned, on the engine's
checkpoint thread, for real (1.3-1.9 s at 100k entities, on whichever request was
the hundredth)."""

from __future__ import annotations

import threading
from typing import Any

import anyio
import pytest

from lcg import Engine
from lcg.engine import checkpointer
from lcg.service.registry import dispatch


def _assert(engine: Engine, name: str) -> None:
    anyio.run(dispatch, engine, "knowledge_assert_entity", {"name": name})


def test_the_commit_that_makes_a_checkpoint_due_does_not_wait_for_it(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = engine._mode.journal()
    real = store.checkpoint
    entered = threading.Event()
    release = threading.Event()
    threads: list[str] = []

    def slow_checkpoint(**kwargs: Any) -> bool:
        threads.append(threading.current_thread().name)
        entered.set()
        release.wait(30)  # a checkpoint of a large graph
        return real(**kwargs)

    monkeypatch.setattr(store, "checkpoint", slow_checkpoint)
    _assert(engine, "first")
    store.commits_since_checkpoint = checkpointer._CHECKPOINT_EVERY_COMMITS - 1
    committer = threading.Thread(target=_assert, args=(engine, "hundredth"))
    try:
        committer.start()
        committer.join(10)
        returned = not committer.is_alive()
        assert entered.wait(10), "the due checkpoint never started"
    finally:
        release.set()
        committer.join(30)
    assert returned, "the hundredth commit waited for the checkpoint"
    assert threads == ["lcg-checkpoint"]
    _assert(engine, "after")  # waits for the checkpoint's write lock, then commits
    assert store.commits_since_checkpoint == 1  # the checkpoint ran, before this commit
    assert store.checkpoints_since_open >= 1


def test_an_overdue_checkpoint_still_runs_in_the_commit(engine: Engine) -> None:
    """With a reader always active a due checkpoint cannot run; once the drain threshold is
    reached the commit itself drains the readers and checkpoints (bounded versions)."""
    store = engine._mode.journal()
    _assert(engine, "first")
    store.commits_since_checkpoint = checkpointer._CHECKPOINT_DRAIN_COMMITS - 1
    _assert(engine, "two hundredth")
    assert store.commits_since_checkpoint == 0
