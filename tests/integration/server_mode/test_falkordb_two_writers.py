"""Two processes writing one group of a real FalkorDB at once (backend level).

Each process runs a `ResolvingWriter` (lcg.testing.falkordb_workload): it resolves an
episode's entity names and fact against what it knows of the group, commits at the position
it believes, and on `GroupMovedError` catches up from the group's stream, re-resolves and
retries. The episodes of both share one vocabulary of names, so the writers keep creating the
same entities and facts. The end state must equal one writer committing all episodes in
sequence: every episode once, no entity name or fact triple twice.
"""

from __future__ import annotations

import multiprocessing
from typing import Any

from lcg.storage.backend import Commit, GroupMovedError
from lcg.wal.records import Op


def test_two_processes_racing_on_one_group_end_as_one_writer_in_sequence(
    falkordb_url: str,
) -> None:
    from lcg.storage.falkordb.backend import FalkorBackend
    from lcg.testing.falkordb_workload import (
        ResolvingWriter,
        duplicates,
        episodes_for,
        summary,
        writer_process,
    )

    specs = {w: episodes_for(w, 200) for w in ("alpha", "beta")}
    b = FalkorBackend(falkordb_url)
    b.client.flushall()
    ctx = multiprocessing.get_context("spawn")
    start, out = ctx.Barrier(2), ctx.Queue()
    procs = [
        ctx.Process(target=writer_process, args=(falkordb_url, "race", s, start, out))
        for s in specs.values()
    ]
    try:
        for p in procs:
            p.start()
        results: list[dict[str, Any]] = [out.get(timeout=300) for _ in procs]
        for p in procs:
            p.join(60)
            assert p.exitcode == 0
        assert sum(r["commits"] for r in results) == 400
        assert sum(r["retries"] for r in results) > 0  # they did race

        raced = summary(b, "race")
        for part in ("entities", "facts", "episodes", "mentions"):
            assert duplicates(raced[part]) == [], part
        assert raced["episodes"] == sorted(x[0] for s in specs.values() for x in s)

        one = ResolvingWriter(b, "sequential")
        for s in specs.values():
            for spec in s:
                one.write(spec)
        assert one.retries == 0
        assert raced == summary(b, "sequential")
        # The stream is the WAL of what happened: every line once, seqs without a gap.
        seqs = [r.seq for r in b.stream_records("race")]
        assert seqs == list(range(len(seqs)))
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
        b.close()


def test_a_writer_that_skips_the_catch_up_would_duplicate(falkordb_url: str) -> None:
    """The check above can fail: a second writer that resolves a name without catching up
    creates the entity again (here by hand), and `duplicates` sees it."""
    from lcg.storage.falkordb.backend import FalkorBackend
    from lcg.testing.falkordb_workload import ResolvingWriter, duplicates, summary

    b = FalkorBackend(falkordb_url)
    b.client.flushall()
    try:
        first, second = ResolvingWriter(b, "g"), ResolvingWriter(b, "g")
        first.write(("one", "Ada", "Bob"))
        blind = second.resolve(("two", "Ada", "Cy"))  # resolved before knowing of "one"
        try:
            b.commit([Commit("g", blind, 0, len(blind) - 1)])
        except GroupMovedError:
            at = first.position  # committing blind lines at the true position duplicates
            b.commit([Commit("g", blind, at, at + len(blind) - 1)])
        assert duplicates(summary(b, "g")["entities"]) == ["Ada"]
        # The resolving writer's own retry path instead reuses the existing entity.
        b.client.flushall()
        first, second = ResolvingWriter(b, "h"), ResolvingWriter(b, "h")
        first.write(("one", "Ada", "Bob"))
        second.write(("two", "Ada", "Cy"))
        assert second.retries == 1
        assert duplicates(summary(b, "h")["entities"]) == []
        assert summary(b, "h")["entities"] == ["Ada", "Bob", "Cy"]
    finally:
        b.close()


def test_a_follower_sees_another_processs_commit_through_the_stream(falkordb_url: str) -> None:
    """`follow` blocks on the group's stream until the next commit after a position (how a
    process keeps its caches fresh without polling), and returns [] when none came."""
    import threading

    from lcg.storage.falkordb.backend import FalkorBackend

    writer, follower = FalkorBackend(falkordb_url), FalkorBackend(falkordb_url)
    writer.client.flushall()
    try:
        writer.commit([Commit("f", [Op("entity.upsert", {"uuid": "a", "name": "A"})], 0, 0)])
        assert [r.seq for r in follower.follow("f", 0, block_ms=10)] == [0]
        assert follower.follow("f", 1, block_ms=50) == []  # nothing after seq 0: times out
        seen: list[int] = []
        waiting = threading.Thread(
            target=lambda: seen.extend(r.seq for r in follower.follow("f", 1, 10_000))
        )
        waiting.start()
        ops = [Op("entity.upsert", {"uuid": u, "name": u}) for u in ("b", "c")]
        writer.commit([Commit("f", ops, 1, 2)])
        waiting.join(15)
        assert seen == [1, 2]
    finally:
        writer.close()
        follower.close()


def test_follow_many_waits_on_several_groups_at_once(falkordb_url: str) -> None:
    """`follow_many` returns the new lines of whichever groups had any, by group, blocking on
    all their streams in one wait; {} when none came."""
    import threading
    import time

    from lcg.storage.falkordb.backend import FalkorBackend

    writer, follower = FalkorBackend(falkordb_url), FalkorBackend(falkordb_url)
    writer.client.flushall()
    try:
        for g in ("m1", "m2"):
            writer.commit([Commit(g, [Op("entity.upsert", {"uuid": g, "name": g})], 0, 0)])
        got = follower.follow_many({"m1": 0, "m2": 1}, block_ms=10)
        assert {g: [r.seq for r in rs] for g, rs in got.items()} == {"m1": [0]}
        assert follower.follow_many({"m1": 1, "m2": 1}, block_ms=50) == {}
        seen: dict[str, list[int]] = {}
        waiting = threading.Thread(
            target=lambda: seen.update(
                {
                    g: [r.seq for r in rs]
                    for g, rs in follower.follow_many({"m1": 1, "m2": 1}, 10_000).items()
                }
            )
        )
        t0 = time.monotonic()
        waiting.start()
        writer.commit([Commit("m2", [Op("entity.upsert", {"uuid": "x", "name": "x"})], 1, 1)])
        waiting.join(15)
        assert seen == {"m2": [1]}
        assert time.monotonic() - t0 < 5  # woken by the commit, not by the timeout
    finally:
        writer.close()
        follower.close()
