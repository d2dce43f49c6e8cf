"""Shared steps of the WAL fault tests: a small group written through the engine, its lines on
disk, and what `knowledge_status` reports of them."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from lcg import Engine, Entity, Episode, EpisodeCommit, Fact, Settings
from lcg.service.registry import dispatch
from lcg.timeutil import now
from lcg.wal.layout import group_dir, ordered_files
from lcg.wal.reader import parse_line

GROUP = "faults"


def uid(n: int) -> str:
    return str(uuid.UUID(int=n, version=4))


def lines(settings: Settings) -> list[tuple[Path, int, bytes]]:
    """(file, index, raw line) of every non-blank line of the group's stream, in order."""
    out = []
    for path in ordered_files(group_dir(settings.wal_dir, GROUP)):
        for index, raw in enumerate(path.read_bytes().split(b"\n")):
            if raw.strip():
                out.append((path, index, raw))
    return out


def seqs(settings: Settings) -> list[int]:
    records = (parse_line(raw) for _, _, raw in lines(settings))
    return [r.seq for r in records if r is not None]


async def status(engine: Engine) -> dict[str, Any]:
    result: dict[str, Any] = await dispatch(engine, "knowledge_status", {})
    return result


async def problems(engine: Engine) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = (await status(engine))["wal_problems"]
    return found


async def commit_episode(engine: Engine, n: int, people: list[int]) -> None:
    """One batch: episode `n`, the entities `people` (uuids by number), a fact from each to
    the next, the mentions."""
    stamp = now()
    ids = [uid(p) for p in people]
    await engine.commit_episode(
        EpisodeCommit(
            group_id=GROUP,
            episode=Episode(
                uid(10_000 + n), GROUP, f"chunk-{n}", f"Episode {n}.", created_at=stamp
            ),
            entities=[
                Entity(u, GROUP, f"Person {p}", created_at=stamp)
                for u, p in zip(ids, people, strict=True)
            ],
            facts=[
                Fact(
                    uid(20_000 + n * 10 + i),
                    GROUP,
                    ids[i],
                    ids[(i + 1) % len(ids)],
                    "KNOWS",
                    f"Person {people[i]} knows Person {people[(i + 1) % len(ids)]}",
                    episodes=(uid(10_000 + n),),
                    created_at=stamp,
                )
                for i in range(len(ids))
            ],
            mentions=ids,
        )
    )


async def relate(engine: Engine, source: int, target: int, n: int) -> None:
    """One batch holding only a fact between two entities written earlier."""
    stamp = now()
    await engine.commit_episode(
        EpisodeCommit(
            group_id=GROUP,
            episode=Episode(
                uid(10_000 + n), GROUP, f"chunk-{n}", f"Episode {n}.", created_at=stamp
            ),
            entities=[],
            facts=[
                Fact(
                    uid(30_000 + n),
                    GROUP,
                    uid(source),
                    uid(target),
                    "KNOWS",
                    f"Person {source} knows Person {target}",
                    episodes=(uid(10_000 + n),),
                    created_at=stamp,
                )
            ],
            mentions=[],
        )
    )
