"""Benchmark the temporal reads and context packing; prints one JSON object.

    python bench/temporal.py [--subjects 500] [--moves 3] [--calls 20]

Builds a history in a fresh workspace: `--subjects` projects, each hosted somewhere and moved
`--moves` times (every move one `Engine.commit_episode` that supersedes the previous host and
adds a maintainer fact), so the graph holds subjects * (2 * moves + 1) facts, most of them
superseded; each fact names its episode (its provenance). Then times (median and p95 over
`--calls` calls, through the method registry): `knowledge_list_relationships` unfiltered / current / `as_of` / `known_at`,
`knowledge_get_changes` over a one-day window, `knowledge_get_entity_timeline`, and
`knowledge_get_context` at budgets 512 and 4000 with hops 1 and 2 (reporting the block sizes).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio

from lcg import Settings, open_engine
from lcg.engine import Engine, EpisodeCommit, Invalidation
from lcg.models import Entity, Episode, Fact
from lcg.service.registry import dispatch

G = "liminis"
START = datetime(2020, 1, 1, tzinfo=UTC)
LEARNED = datetime(2026, 1, 1, tzinfo=UTC)


async def build(engine: Engine, subjects: int, moves: int) -> int:
    facts = 0
    hosts = [Entity(uuid=f"host-{i}", group_id=G, name=f"Forge {i}") for i in range(50)]
    people = [Entity(uuid=f"person-{i}", group_id=G, name=f"Person {i}") for i in range(50)]
    for s in range(subjects):
        project = Entity(uuid=f"p-{s}", group_id=G, name=f"Project {s}", summary="a project")
        first = Fact(
            uuid=f"p-{s}-h0",
            group_id=G,
            source_uuid=project.uuid,
            target_uuid=hosts[s % 50].uuid,
            name="HOSTED_AT",
            fact=f"Project {s} is hosted at Forge {s % 50}",
            episodes=(f"ep-{s}-0",),
            valid_at=START,
            created_at=LEARNED,
        )
        ents = [project, *(hosts + people if s == 0 else [])]
        ep = Episode(uuid=f"ep-{s}-0", group_id=G, name="n", content=first.fact)
        await engine.commit_episode(EpisodeCommit(G, ep, ents, [first]))
        facts += 1
        for m in range(1, moves + 1):
            when, learned = START + timedelta(days=100 * m), LEARNED + timedelta(days=m)
            host = hosts[(s + m) % 50]
            moved = Fact(
                uuid=f"p-{s}-h{m}",
                group_id=G,
                source_uuid=project.uuid,
                target_uuid=host.uuid,
                name="HOSTED_AT",
                fact=f"Project {s} is hosted at {host.name}",
                episodes=(f"ep-{s}-{m}",),
                valid_at=when,
                created_at=learned,
            )
            maintainer = Fact(
                uuid=f"p-{s}-m{m}",
                group_id=G,
                source_uuid=project.uuid,
                target_uuid=people[(s * m) % 50].uuid,
                name="MAINTAINED_BY",
                fact=f"Project {s} is maintained by Person {(s * m) % 50}",
                episodes=(f"ep-{s}-{m}",),
                valid_at=when,
                created_at=learned,
            )
            ep = Episode(uuid=f"ep-{s}-{m}", group_id=G, name="n", content=moved.fact)
            await engine.commit_episode(
                EpisodeCommit(
                    G,
                    ep,
                    [],
                    [moved, maintainer],
                    [Invalidation(f"p-{s}-h{m - 1}", when, learned)],
                )
            )
            facts += 2
    return facts


async def timed(calls: int, fn: Callable[[], Awaitable[Any]]) -> tuple[dict[str, float], Any]:
    samples, last = [], None
    for _ in range(calls):
        t0 = time.perf_counter()
        last = await fn()
        samples.append((time.perf_counter() - t0) * 1000)
    samples.sort()
    p95 = samples[min(len(samples) - 1, int(len(samples) * 0.95))]
    return {"p50_ms": round(statistics.median(samples), 2), "p95_ms": round(p95, 2)}, last


async def main(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        engine = open_engine(Settings.for_home(Path(tmp) / ".lcg"))
        try:
            t0 = time.perf_counter()
            facts = await build(engine, args.subjects, args.moves)
            build_s = time.perf_counter() - t0
            out: dict[str, Any] = {
                "subjects": args.subjects,
                "facts": facts,
                "build_seconds": round(build_s, 1),
            }

            def call(method: str, params: dict[str, Any]) -> Callable[[], Awaitable[Any]]:
                return lambda: dispatch(engine, method, params)

            lr = "knowledge_list_relationships"
            cases: dict[str, tuple[str, dict[str, Any]]] = {
                "list_unfiltered": (lr, {"num_results": 100_000}),
                "list_current": (lr, {"num_results": 100_000, "include_invalidated": False}),
                "list_as_of": (lr, {"num_results": 100_000, "as_of": "2020-06-01T00:00:00Z"}),
                "list_known_at": (lr, {"num_results": 100_000, "known_at": "2026-01-02 12:00:00"}),
                "changes_one_day": (
                    "knowledge_get_changes",
                    {"since": "2026-01-02T00:00:00Z", "until": "2026-01-03T00:00:00Z"},
                ),
                "timeline": ("knowledge_get_entity_timeline", {"entity_uuid": "p-7"}),
            }
            for name, (method, params) in cases.items():
                stats, result = await timed(args.calls, call(method, params))
                count = result.get("count") if isinstance(result, dict) else None
                out[name] = {**stats, "count": count}
            for budget in (512, 4000):
                for hops in (1, 2):
                    params = {"query": "Project 7 hosted at forge", "token_budget": budget}
                    stats, result = await timed(
                        args.calls, call("knowledge_get_context", {**params, "hops": hops})
                    )
                    out[f"context_b{budget}_h{hops}"] = {
                        **stats,
                        "token_estimate": result["token_estimate"],
                        "facts": result["fact_count"],
                        "omitted_facts": result["omitted_facts"],
                    }
            return out
        finally:
            engine.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--subjects", type=int, default=500)
    parser.add_argument("--moves", type=int, default=3)
    parser.add_argument("--calls", type=int, default=20)
    print(json.dumps(anyio.run(main, parser.parse_args())))
