"""SIGKILL an lcg process that commits episodes of every write size, and judge each restart.

A child process (`python -m lcg.testing.episode_kills <home> <seed> <settings> <sizes> <point>`) opens
the engine on a workspace and commits episodes in a loop through `Engine.commit_episode`, each
with a number of new facts drawn from `sizes` (its new entities and mentions scale with it);
it prints one JSON line per acknowledged episode (its uuid and the seqs its batch took). `kill`
starts one and SIGKILLs it at a random moment after its first acknowledgement (or lets it die at
a named write point); `judge` compares the workspace, reopened by the caller, with the group's
WAL records:

- `acknowledged_lost`: an acknowledged episode absent from the graph, or from the WAL;
- `partial_episodes`: an episode in the graph without every fact (and both its hops), entity
  and mention its WAL batch wrote; or a WAL batch the restart left unapplied;
- `seq_reused`: an acknowledged episode's seqs that now hold another batch, or WAL seqs that
  are not strictly increasing.

Used by tests (tests/integration/durability/test_episode_kills.py) and bench/episode_kills.py only.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import anyio

from lcg import Engine, Entity, Episode, EpisodeCommit, Fact, Settings, open_engine
from lcg.wal.reader import iter_records
from lcg.wal.records import WalRecord

__all__ = ["GROUP", "SIZES", "Child", "Verdict", "episode_commit", "judge", "kill"]

GROUP = "kills"
# New facts per episode: below, at and above the sizes where the write path changes.
SIZES = (1, 10, 63, 64, 300, 1000)


def episode_commit(size: int, rng: random.Random) -> EpisodeCommit:
    """An `EpisodeCommit` of `size` new facts between `size // 2 + 2` new entities, each of
    them mentioned; every uuid minted (`new`), as the ingest pipeline does."""
    stamp = datetime.now(UTC)
    ep = str(uuid.uuid4())
    entities = [
        Entity(uuid=str(uuid.uuid4()), group_id=GROUP, name=f"{ep[:8]} n{k}", created_at=stamp)
        for k in range(size // 2 + 2)
    ]
    facts = []
    for k in range(size):
        a, b = rng.sample(entities, 2)
        facts.append(
            Fact(
                uuid=str(uuid.uuid4()),
                group_id=GROUP,
                source_uuid=a.uuid,
                target_uuid=b.uuid,
                name=f"REL_{k % 7}",
                fact=f"{a.name} relates to {b.name} ({k})",
                episodes=(ep,),
                created_at=stamp,
            )
        )
    episode = Episode(
        uuid=ep,
        group_id=GROUP,
        name=f"episode of {size}",
        content=f"{size} facts",
        source_description="kill test",
        created_at=stamp,
    )
    minted = frozenset([ep, *(e.uuid for e in entities), *(f.uuid for f in facts)])
    return EpisodeCommit(
        group_id=GROUP,
        episode=episode,
        entities=entities,
        facts=facts,
        mentions=[e.uuid for e in entities],
        new=minted,
    )


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _arm_after_append(stream: Any) -> None:
    """The stream's next append writes and fsyncs its lines, then the process dies."""
    append = stream.append

    def append_then_die(ops: Any, mark: Any = None) -> Any:
        append(ops, mark)
        _die()

    stream.append = append_then_die


async def _child(
    home: Path, seed: int, settings: dict[str, Any], sizes: list[int], point: str
) -> None:
    """Commit episodes for ever; or, at a named `point`, one acknowledged episode and then
    a second that dies there: `after-append` (its WAL lines durable, its transaction open) or
    `after-commit` (committed, never acknowledged)."""
    rng = random.Random(seed)
    engine = open_engine(Settings.for_home(home, **settings))
    for n in itertools.count():
        size = rng.choice(sizes)
        commit = episode_commit(size, rng)
        if point == "after-append" and n == 1:
            _arm_after_append(engine.parts.wal.stream(GROUP))
        [(first, last)] = await engine.commit_episode(commit)
        if point == "after-commit" and n == 1:
            _die()
        print(json.dumps({"uuid": commit.episode.uuid, "size": size, "seqs": [first, last]}))
        sys.stdout.flush()


@dataclass
class Child:
    """One writer process whose acknowledgements a reader thread collects."""

    proc: subprocess.Popen[bytes]
    acks: list[dict[str, Any]] = field(default_factory=list)
    first: threading.Event = field(default_factory=threading.Event)

    def read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            self.acks.append(json.loads(raw))
            self.first.set()
        self.first.set()  # EOF: the waiter sees the child is gone


def kill(
    home: Path,
    seed: int,
    settings: dict[str, Any],
    sizes: Sequence[int] = SIZES,
    within: float = 2.0,
    stderr: Path | None = None,
    point: str = "random",
) -> list[dict[str, Any]]:
    """Start a writer on `home`, SIGKILL it `uniform(0, within)` seconds after its first
    acknowledgement (or let it die at its named `point`), and return its acknowledgements.

    Raises:
        RuntimeError: the child died on its own or never acknowledged a write.
    """
    err: IO[bytes] | int = stderr.open("wb") if stderr is not None else subprocess.DEVNULL
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            __name__,
            str(home),
            str(seed),
            json.dumps(settings),
            json.dumps(list(sizes)),
            point,
        ],
        stdout=subprocess.PIPE,
        stderr=err,
        stdin=subprocess.DEVNULL,
    )
    child = Child(proc)
    reader = threading.Thread(target=child.read, daemon=True)
    reader.start()
    try:
        if point != "random":
            proc.wait(timeout=300)
            reader.join(timeout=60)
            alive = proc.returncode == -signal.SIGKILL and bool(child.acks)
        else:
            child.first.wait(timeout=300)
            alive = proc.poll() is None and bool(child.acks)
            if alive:
                time.sleep(random.Random(seed).uniform(0.0, within))
                alive = proc.poll() is None
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        reader.join(timeout=60)
        if proc.stdout is not None:
            proc.stdout.close()
        if not isinstance(err, int):
            err.close()
    if not alive:
        raise RuntimeError(f"the writer did not die as planned (exit {proc.returncode})")
    return child.acks


@dataclass
class Verdict:
    """What one restart found (see the module docstring)."""

    acknowledged_lost: list[str] = field(default_factory=list)
    partial_episodes: list[str] = field(default_factory=list)
    seq_reused: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not (self.acknowledged_lost or self.partial_episodes or self.seq_reused)


def _batches(records: Iterable[WalRecord]) -> tuple[list[list[WalRecord]], list[str]]:
    """The WAL's whole batches in order, and the seqs that break strict increase."""
    batches: list[list[WalRecord]] = []
    broken: list[str] = []
    previous = -1
    for rec in records:
        if rec.seq <= previous:
            broken.append(f"seq {rec.seq} after {previous}")
        previous = rec.seq
        if not batches or batches[-1][-1].more == 0:
            batches.append([])
        batches[-1].append(rec)
    return batches, broken


def judge(
    engine: Engine, acked: list[dict[str, Any]], records: Iterable[WalRecord] | None = None
) -> Verdict:
    """Judge a workspace just opened (its startup catch-up done) against its WAL (the
    workspace's files; or `records`, a server store's stream) and every acknowledgement so
    far."""
    verdict = Verdict()
    if records is None:
        records = iter_records(engine.parts.wal.directory(GROUP))
    batches, broken = _batches(records)
    verdict.seq_reused += broken
    with engine.reader() as conn:
        episodes = {r[0] for r in conn.rows("MATCH (ep:Episode) RETURN ep.uuid")}
        entities = {r[0] for r in conn.rows("MATCH (e:Entity) RETURN e.uuid")}
        facts = {r[0] for r in conn.rows("MATCH (f:Fact) RETURN f.uuid")}
        hops = {
            r[0]
            for r in conn.rows(
                "MATCH (:Entity)-[:RELATES_TO]->(f:Fact)-[:RELATES_TO]->(:Entity) RETURN f.uuid"
            )
        }
        mentions: dict[str, set[str]] = {}
        for ep, ent in conn.rows(
            "MATCH (ep:Episode)-[:MENTIONS]->(e:Entity) RETURN ep.uuid, e.uuid"
        ):
            mentions.setdefault(ep, set()).add(ent)
    at: dict[str, tuple[int, int]] = {}
    for batch in batches:
        ops: dict[str, list[dict[str, Any]]] = {}
        for rec in batch:
            ops.setdefault(rec.op, []).append(rec.data)
        ep = ops["episode.add"][0]["uuid"]
        at[ep] = (batch[0].seq, batch[-1].seq)
        want_facts = {d["uuid"] for d in ops.get("fact.upsert", [])}
        want_entities = {d["uuid"] for d in ops.get("entity.upsert", [])}
        want_mentions = {u for d in ops.get("mentions.add", []) for u in d["entities"]}
        if ep not in episodes:
            verdict.partial_episodes.append(f"WAL batch {at[ep]} of episode {ep} not applied")
            continue
        missing = len(want_facts - facts) + len(want_entities - entities)
        unhooked = len(want_facts - hops)
        if missing or unhooked or mentions.get(ep, set()) != want_mentions:
            verdict.partial_episodes.append(
                f"episode {ep} ({len(want_facts)} facts): {missing} rows missing, "
                f"{unhooked} facts without hops, mentions "
                f"{len(mentions.get(ep, set()))}/{len(want_mentions)}"
            )
    for ack in acked:
        if ack["uuid"] not in episodes or ack["uuid"] not in at:
            verdict.acknowledged_lost.append(f"episode {ack['uuid']} ({ack['size']} facts)")
        elif list(at[ack["uuid"]]) != ack["seqs"]:
            verdict.seq_reused.append(f"episode {ack['uuid']} at {at[ack['uuid']]}, {ack['seqs']}")
    return verdict


if __name__ == "__main__":
    anyio.run(
        _child,
        Path(sys.argv[1]),
        int(sys.argv[2]),
        json.loads(sys.argv[3]),
        json.loads(sys.argv[4]),
        sys.argv[5],
    )
