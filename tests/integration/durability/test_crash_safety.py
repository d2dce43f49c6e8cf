"""kill -9 a writer at random moments; every reopen must serve exactly what was acknowledged.

A child process opens the engine on one workspace and writes in a loop: entities and
relationships through the registry in two groups, and whole `commit_episode` batches (an
episode with its entities, facts and mentions). It prints one JSON line per acknowledged write.
The parent SIGKILLs it at a random moment after its first acknowledgement (so kills land inside
transactions, WAL fsyncs, Kuzu checkpoints, file rotations...), reopens the same workspace
in-process, checks it, closes it and starts the next child on the same (growing) workspace.

Checks after every kill:
(a) every acknowledged write is present with the properties it was written with;
(b) nothing is half-applied: a batch's episode, entities, facts and mentions are all there or
    none is; every fact has both RELATES_TO hops; at most the one write in flight when the
    child died is present without an acknowledgement;
(c) after startup catch-up every group's applied_seq equals its WAL max_seq;
(d) the search index agrees with the rows.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from search_support import indexed

from lcg import Settings, open_engine
from lcg.engine import Engine
from lcg.service.registry import dispatch
from lcg.telemetry import ListSink

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

KILLS = 20
SEED = int(os.environ.get("CRASH_TEST_SEED", "20240611"))  # override to explore other timings
GROUPS = ("crash_a", "crash_b")
# Tokens put into entity names only (never into summaries), to check the search index with.
# None is an English stop word and each is left unchanged by the porter stemmer.
WORDS = ("zebra", "otter", "falcon", "heron", "bison", "lemur", "panda", "koala")
SETTINGS: dict[str, Any] = {
    "kuzu_buffer_pool_mb": 128,
    "wal_max_events_per_file": 40,  # rotate WAL files often
    "checkpoint_wal_bytes": 4096,  # and checkpoint Kuzu's journal every few writes
}

CHILD = r"""
import json
import random
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path

import anyio

from lcg import Entity, Episode, EpisodeCommit, Fact, Settings, open_engine
from lcg.service.registry import dispatch

home, run, seed = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
settings_values = json.loads(sys.argv[4])
groups = json.loads(sys.argv[5])
words = json.loads(sys.argv[6])
rng = random.Random(seed)


def ack(**record):
    print(json.dumps(record), flush=True)


async def main():
    engine = open_engine(Settings.for_home(home, **settings_values))
    mine = {g: [] for g in groups}  # (uuid, name) of this run's acknowledged entities
    i = 0
    last_journal = engine._mode.journal().journal_bytes()
    while True:
        i += 1
        g = groups[i % len(groups)]
        roll = rng.random()
        if roll < 0.3 and len(mine[g]) >= 2:
            (su, sn), (tu, tn) = rng.sample(mine[g], 2)
            predicate = f"LINK_{run}_{i}"
            text = f"{sn} is linked to {tn} by write {i}"
            out = await dispatch(engine, "knowledge_assert_relationship", {
                "source_name": sn, "target_name": tn, "predicate": predicate, "fact": text,
                "group_id": g})
            ack(kind="fact", run=run, i=i, group=g, uuid=out["edge_uuid"], source=su, target=tu,
                name=predicate, fact=text)
        elif roll < 0.6:
            ep_uuid = str(uuid.uuid4())
            stamp = datetime.now(UTC)
            entities = [
                Entity(uuid=str(uuid.uuid4()), group_id=g, name=f"{run} b{i} k{k} {rng.choice(words)}",
                       summary=f"member {k} of batch {i}", attributes=json.dumps({"batch": ep_uuid}),
                       created_at=stamp)
                for k in range(rng.randint(1, 3))
            ]
            ends = [(e.uuid, e.name) for e in entities] + mine[g][-3:]
            facts = []
            for k in range(rng.randint(1, 3)):
                (su, _), (tu, _) = rng.sample(ends, 2) if len(ends) >= 2 else (ends[0], ends[0])
                facts.append(Fact(uuid=str(uuid.uuid4()), group_id=g, source_uuid=su,
                                  target_uuid=tu, name=f"BATCH_{k}", fact=f"fact {k} of batch {i}",
                                  attributes=json.dumps({"batch": ep_uuid}), episodes=(ep_uuid,),
                                  created_at=stamp))
            mentions = [e.uuid for e in entities] + [u for u, _ in mine[g][-1:]]
            manifest = {"entities": [e.uuid for e in entities], "facts": [f.uuid for f in facts],
                        "mentions": mentions}
            episode = Episode(uuid=ep_uuid, group_id=g, name=f"{run} ep{i}",
                              content=f"episode {i} of {run}", source_description="crash test",
                              source_file=json.dumps(manifest), created_at=stamp)
            await engine.commit_episode(EpisodeCommit(group_id=g, episode=episode,
                                                      entities=entities, facts=facts,
                                                      mentions=mentions))
            ack(kind="episode", run=run, i=i, group=g, uuid=ep_uuid, name=episode.name,
                content=episode.content, manifest=manifest,
                entities=[{"uuid": e.uuid, "name": e.name, "summary": e.summary} for e in entities],
                facts=[{"uuid": f.uuid, "source": f.source_uuid, "target": f.target_uuid,
                        "name": f.name, "fact": f.fact} for f in facts])
            mine[g] += [(e.uuid, e.name) for e in entities]
        else:
            name = f"{run} e{i} {rng.choice(words)}"
            summary = f"entity written by {run} at step {i}"
            out = await dispatch(engine, "knowledge_assert_entity", {
                "name": name, "summary": summary, "group_id": g,
                "attributes": {"run": run, "step": i}})
            ack(kind="entity", run=run, i=i, group=g, uuid=out["entity_uuid"], name=name,
                summary=summary, attributes={"run": run, "step": i})
            mine[g].append((out["entity_uuid"], name))
        # The engine checkpoints Kuzu's journal after commits once it is large; a shrinking
        # journal tells that one happened (so the parent knows kills can land in one).
        journal = engine._mode.journal().journal_bytes()
        if journal < last_journal or engine._maybe_checkpoint():
            ack(kind="checkpoint", run=run, i=i)
        last_journal = engine._mode.journal().journal_bytes()


anyio.run(main)
"""


class Child:
    """One writer process whose acknowledgement lines are collected by a reader thread."""

    def __init__(self, script: Path, home: Path, run: str, seed: int, stderr: Path) -> None:
        self.stderr_path = stderr
        self._stderr = stderr.open("wb")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(script),
                str(home),
                run,
                str(seed),
                json.dumps(SETTINGS),
                json.dumps(GROUPS),
                json.dumps(WORDS),
            ],
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            stdin=subprocess.DEVNULL,
        )
        self.lines: list[dict[str, Any]] = []
        self.first_ack = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            self.lines.append(json.loads(raw))
            self.first_ack.set()
        self.first_ack.set()  # EOF: wake the waiter, it checks whether the child died

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        self._reader.join(timeout=30)
        assert not self._reader.is_alive(), "child's stdout did not close after SIGKILL"
        assert self.proc.stdout is not None
        self.proc.stdout.close()
        self._stderr.close()

    def stderr_text(self) -> str:
        return self.stderr_path.read_text(errors="replace")[-4000:]


def _check_workspace(
    engine: Engine, acked: list[dict[str, Any]], last_acked: dict[str, int]
) -> None:
    with engine.reader() as conn:
        entities = {e.uuid: e for e in conn.entities_in_groups(list(GROUPS))}
        facts = {
            f.uuid: f
            for f in conn.facts_by_uuids(
                [r[0] for r in conn.rows("MATCH (f:Fact) RETURN f.uuid")]
            ).values()
        }
        hops_out = {
            (r[0], r[1])
            for r in conn.rows("MATCH (a:Entity)-[:RELATES_TO]->(f:Fact) RETURN a.uuid, f.uuid")
        }
        hops_in = {
            (r[0], r[1])
            for r in conn.rows("MATCH (f:Fact)-[:RELATES_TO]->(b:Entity) RETURN f.uuid, b.uuid")
        }
        episodes = {
            r[0]: (r[1], r[2], r[3], r[4])
            for r in conn.rows(
                "MATCH (ep:Episode) RETURN ep.uuid, ep.group_id, ep.name, ep.content, ep.source_file"
            )
        }
        mentions: dict[str, set[str]] = {}
        for ep, ent in conn.rows(
            "MATCH (ep:Episode)-[:MENTIONS]->(e:Entity) RETURN ep.uuid, e.uuid"
        ):
            mentions.setdefault(ep, set()).add(ent)

    # (a) every acknowledged write is there, as written.
    for rec in acked:
        g = rec["group"]
        if rec["kind"] == "entity":
            e = entities.get(rec["uuid"])
            assert e is not None, f"acknowledged entity lost: {rec}"
            assert (e.group_id, e.name, e.summary) == (g, rec["name"], rec["summary"]), rec
            assert json.loads(e.attributes) == rec["attributes"], rec
        elif rec["kind"] == "fact":
            f = facts.get(rec["uuid"])
            assert f is not None, f"acknowledged fact lost: {rec}"
            assert (f.group_id, f.source_uuid, f.target_uuid, f.name, f.fact) == (
                g,
                rec["source"],
                rec["target"],
                rec["name"],
                rec["fact"],
            ), rec
        elif rec["kind"] == "episode":
            assert rec["uuid"] in episodes, f"acknowledged episode lost: {rec}"
            assert episodes[rec["uuid"]][:3] == (g, rec["name"], rec["content"]), rec
            for want in rec["entities"]:
                e = entities.get(want["uuid"])
                assert e is not None and (e.group_id, e.name, e.summary) == (
                    g,
                    want["name"],
                    want["summary"],
                ), (want, e)
            for want in rec["facts"]:
                f = facts.get(want["uuid"])
                assert f is not None and (
                    f.group_id,
                    f.source_uuid,
                    f.target_uuid,
                    f.name,
                    f.fact,
                    f.episodes,
                ) == (
                    g,
                    want["source"],
                    want["target"],
                    want["name"],
                    want["fact"],
                    (rec["uuid"],),
                ), (want, f)

    # (b) nothing half-applied.
    for f in facts.values():
        assert (f.source_uuid, f.uuid) in hops_out, f"fact without its source hop: {f}"
        assert (f.uuid, f.target_uuid) in hops_in, f"fact without its target hop: {f}"
    for uuid, (group, name, _, source_file) in episodes.items():
        manifest = json.loads(source_file)
        for ent in manifest["entities"]:
            assert ent in entities and entities[ent].group_id == group, (
                f"episode {name} committed without its entity {ent}"
            )
        for fact in manifest["facts"]:
            assert fact in facts, f"episode {name} committed without its fact {fact}"
        assert mentions.get(uuid, set()) == set(manifest["mentions"]), (
            f"episode {name}: mentions {mentions.get(uuid)} != {manifest['mentions']}"
        )
    for e in entities.values():
        batch = json.loads(e.attributes).get("batch")
        assert batch is None or batch in episodes, f"batch entity without its episode: {e}"
    for f in facts.values():
        assert all(ep in episodes for ep in f.episodes), f"batch fact without its episode: {f}"
    # Rows no child acknowledged come from the one write each child had in flight when killed.
    acked_ids = {rec["uuid"] for rec in acked}
    acked_ids |= {
        x["uuid"]
        for rec in acked
        if rec["kind"] == "episode"
        for x in rec["entities"] + rec["facts"]
    }
    unacked = [e.name for u, e in entities.items() if u not in acked_ids]
    unacked += [ep[1] for u, ep in episodes.items() if u not in acked_ids]
    for u, f in facts.items():
        if u not in acked_ids:  # a LINK_<run>_<i> predicate, or a batch fact
            unacked.append(
                f.name.replace("_", " ", 2)[5:]
                if f.name.startswith("LINK_")
                else episodes[f.episodes[0]][1]
            )
    for text in unacked:  # "<run> <letters><i> ..."
        run, step = text.split()[:2]
        assert int(re.sub(r"\D", "", step)) == last_acked.get(run, 0) + 1, (
            f"unacknowledged row {text!r} is not the write {run} had in flight"
        )

    # (d) the search index (lcg's text index) agrees with the rows.
    for word in WORDS:
        expected = {e.uuid for e in entities.values() if word in e.name.lower().split()}
        hits = indexed(engine, "Entity", word)
        assert hits == expected, (
            f"search index hits for {word!r}: missing {sorted(expected - hits)[:5]}, "
            f"extra {sorted(hits - expected)[:5]}"
        )


async def test_kill_nine_loses_nothing_acknowledged_and_applies_nothing_by_halves(
    tmp_path: Path,
) -> None:
    started = time.monotonic()
    rng = random.Random(SEED)
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    home = tmp_path / "home"
    settings = Settings.for_home(home, **SETTINGS)
    acked: list[dict[str, Any]] = []
    last_acked: dict[str, int] = {}
    checkpoints = replays = torn = 0
    for n in range(KILLS):
        run = f"r{n}"
        child = Child(script, home, run, rng.randrange(2**32), tmp_path / f"child{n}.err")
        try:
            child.first_ack.wait(timeout=60)
            assert child.lines and child.proc.poll() is None, (
                f"child {run} died or never acknowledged a write: {child.stderr_text()}"
            )
            await anyio.sleep(rng.uniform(0.0, 1.5))
            assert child.proc.poll() is None, f"child {run} died on its own: {child.stderr_text()}"
        finally:
            child.kill()
        writes = [rec for rec in child.lines if rec["kind"] != "checkpoint"]
        checkpoints += len(child.lines) - len(writes)
        acked += writes
        last_acked[run] = max((rec["i"] for rec in writes), default=0)

        sink = ListSink()
        engine = open_engine(settings, events=sink)
        try:
            status = await dispatch(engine, "knowledge_status", {})
            # (c) startup caught every group up with its WAL.
            assert status["wal_groups"] and set(status["wal_groups"]) <= set(GROUPS)
            for group, state in status["wal_groups"].items():
                assert state["applied_seq"] == state["max_seq"], (group, state, sink.events)
                # docs/api.md §status-wal: a stream whose max_seq is 0 is "not_applicable".
                want = "hydrated" if state["max_seq"] else "not_applicable"
                assert state["hydration_status"] == want, (group, state)
            for event in sink.of_type("wal_replay_complete"):
                assert event["failed_lines"] == 0 and event["unparseable_lines"] == 0, event
                replays += 1
            torn += len(sink.of_type("wal_torn_tail"))
            _check_workspace(engine, acked, last_acked)
        finally:
            engine.close()

    kinds = {k: sum(1 for r in acked if r["kind"] == k) for k in ("entity", "fact", "episode")}
    print(
        f"{KILLS} kills (seed {SEED}): acknowledged {kinds}; {checkpoints} checkpoints; "
        f"{replays} WAL tails replayed, {torn} torn tails cut; {time.monotonic() - started:.1f}s"
    )
    assert all(kinds.values()), kinds
    assert checkpoints > 0, "no child ever checkpointed; the test would not cover that"
