"""Writers that race on one group of a FalkorDB server, as lcg processes do.

`ResolvingWriter` is the engine's commit loop reduced to what optimistic concurrency needs: it
resolves each episode's entity names and facts against what it knows of the group (names to
uuids, fact triples to uuids), commits the batch at the group position it believes, and when
another writer got there first (`GroupMovedError`, nothing applied) it catches up from the
group's WAL stream (the lines it missed, learning their entities and facts), re-resolves and
retries. A name the other writer created is then reused, never created twice.

`summary` reads a group back at the level of names (entities, fact triples, episodes and their
mentions), so two groups built from the same episodes in different orders can be compared, and
duplicates counted. `writer_process` runs one writer in a child process (tests and
bench/server_mode.py start several against one server). `failover_run` kills a cluster primary
under commits that wait for a replica and counts acknowledged against present.

Used by tests and benchmarks only; it talks to the store through `FalkorBackend` alone.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from lcg.errors import StorageError
from lcg.storage.backend import Commit, GraphBackend, GroupMovedError, NotDurableError
from lcg.storage.falkordb.backend import FalkorBackend
from lcg.storage.falkordb.keys import graph_key
from lcg.timeutil import now, to_wal
from lcg.wal.records import Op

if TYPE_CHECKING:
    from lcg.testing.falkordb_cluster import FalkorCluster

__all__ = [
    "EpisodeSpec",
    "ResolvingWriter",
    "duplicates",
    "episodes_for",
    "failover_run",
    "summary",
    "writer_process",
]

# (body, the two entity names it mentions, related by one fact)
EpisodeSpec = tuple[str, str, str]
_NS = uuid.UUID("4d1c0a52-6c8e-4d8e-9a0e-6c6367190019")


def episodes_for(writer: str, count: int, vocabulary: int = 40) -> list[EpisodeSpec]:
    """`count` small episodes whose names come from a vocabulary shared by every writer (so
    writers keep meeting the same names and fact triples)."""
    out = []
    for i in range(count):
        a, b = (i * 7 + len(writer)) % vocabulary, (i * 11 + 3) % vocabulary
        if a == b:
            b = (b + 1) % vocabulary
        out.append((f"{writer} episode {i}", f"Name {a}", f"Name {b}"))
    return out


class ResolvingWriter:
    """One writer of one group: resolve, commit at the believed position, catch up on a lost
    race, retry."""

    def __init__(self, backend: GraphBackend, group: str) -> None:
        self.backend = backend
        self.group = group
        self.names: dict[str, str] = {}  # entity name -> uuid
        self.facts: dict[tuple[str, str, str], str] = {}  # (source, predicate, target) -> uuid
        self.episodes: set[str] = set()
        self.position = 0
        self.retries = 0
        self.caught_up_lines = 0

    def catch_up(self) -> int:
        """Learn the group's stream lines from `position` on; how many there were."""
        if not isinstance(self.backend, FalkorBackend):
            raise StorageError("only a backend that keeps the WAL (FalkorDB) can be caught up")
        records = self.backend.stream_records(self.group, self.position)
        for r in records:
            self._learn(r.op, r.data)
            self.position = r.seq + 1
        self.caught_up_lines += len(records)
        return len(records)

    def _learn(self, op: str, data: dict[str, Any]) -> None:
        if op == "entity.upsert":
            self.names[data["name"]] = data["uuid"]
        elif op == "fact.upsert":
            self.facts[(data["source"], data["name"], data["target"])] = data["uuid"]
        elif op == "episode.add":
            self.episodes.add(data["uuid"])

    def resolve(self, spec: EpisodeSpec) -> list[Op]:
        """The batch for one episode against what this writer knows now: new entities and
        the new fact only, the episode, its mentions."""
        body, first, second = spec
        ops: list[Op] = []
        ids = []
        for name in (first, second):
            known = self.names.get(name)
            if known is None:
                known = str(uuid.uuid4())
                ops.append(Op("entity.upsert", {"uuid": known, "name": name}))
                self.names[name] = known  # provisional; forgotten if the commit loses
            ids.append(known)
        triple = (ids[0], "RELATES_TO", ids[1])
        if triple not in self.facts:
            ops.append(
                Op(
                    "fact.upsert",
                    {
                        "uuid": str(uuid.uuid4()),
                        "source": ids[0],
                        "target": ids[1],
                        "name": "RELATES_TO",
                        "fact": f"{first} relates to {second}",
                    },
                )
            )
        episode = str(uuid.uuid5(_NS, f"{self.group}\n{body}"))  # a retry: the same node
        ops.append(
            Op(
                "episode.add",
                {"uuid": episode, "name": body, "content": body, "created_at": to_wal(now())},
            )
        )
        ops.append(Op("mentions.add", {"episode": episode, "entities": ids}))
        return ops

    def write(self, spec: EpisodeSpec) -> float:
        """Commit one episode, catching up and re-resolving until it lands; the seconds from
        the first attempt to the acknowledgement."""
        t0 = time.perf_counter()
        while True:
            names, facts = dict(self.names), dict(self.facts)
            ops = self.resolve(spec)
            try:
                self.backend.commit(
                    [Commit(self.group, ops, self.position, self.position + len(ops) - 1)]
                )
            except GroupMovedError:
                self.names, self.facts = names, facts  # forget the provisional uuids
                self.retries += 1
                self.catch_up()
                continue
            for op in ops:
                self._learn(op.name, op.data)
            self.position += len(ops)
            return time.perf_counter() - t0


def summary(backend: GraphBackend, group: str) -> dict[str, list[Any]]:
    """The group at the level of names: sorted entity names, fact triples (by names), episode
    bodies and (body, name) mentions. Duplicates stay (a list, not a set)."""
    with backend.read() as r:
        entities = r.entities_in_groups([group])
        facts = r.facts_with_hops([group])
        episodes = r.episodes_recent(group, 1_000_000)
        mentions = r.episode_mentions([e.uuid for e in episodes])
    name = {e.uuid: e.name for e in entities}
    body = {e.uuid: e.content for e in episodes}
    return {
        "entities": sorted(e.name for e in entities),
        "facts": sorted((name[f.source_uuid], f.name, name[f.target_uuid]) for f in facts),
        "episodes": sorted(e.content for e in episodes),
        "mentions": sorted((body[ep], name[ent]) for ep, ents in mentions.items() for ent in ents),
    }


def duplicates(items: Sequence[Any]) -> list[Any]:
    """The items that occur more than once."""
    return sorted(k for k, n in Counter(items).items() if n > 1)


def writer_process(
    url: str, group: str, specs: list[EpisodeSpec], start: Any, out: Any, replicas: int = 0
) -> None:
    """Child-process body: connect, wait on `start` (a multiprocessing Event or Barrier, so
    the writers race from the first commit), write every episode, put the results on `out`."""
    backend = FalkorBackend(url, replicas=replicas)
    try:
        if hasattr(start, "wait"):
            start.wait()
        t0 = time.perf_counter()
        writer = ResolvingWriter(backend, group)
        latencies = [writer.write(spec) for spec in specs]
        out.put(
            {
                "commits": len(specs),
                "retries": writer.retries,
                "caught_up_lines": writer.caught_up_lines,
                "seconds": time.perf_counter() - t0,
                "latencies": latencies,
            }
        )
    finally:
        backend.close()


def failover_run(
    cluster: FalkorCluster,
    *,
    groups: int = 12,
    writers: int = 2,
    kill_after_s: float = 1.5,
    acks_before_kill: int = 120,
    acks_after_kill: int = 20,
    timeout_s: float = 60.0,
) -> dict[str, Any]:
    """Commits (each waiting for one replica: `replicas=1`) round-robin over `groups` groups
    from `writers` threads; the primary holding the first group is SIGKILLed once the run has
    lasted `kill_after_s` and `acks_before_kill` commits were acknowledged (a count, not a
    time: a loaded machine acknowledges fewer per second); once the cluster promoted its
    replica, the killed node is restarted without its append-only file (it rejoins as the new
    primary's replica and copies its data: without it the promoted shard cannot acknowledge
    with replicas=1; `FalkorCluster.restart` says why not on its own file); the run ends when the killed shard has acknowledged `acks_after_kill`
    commits again. Then every group is read back: what was acknowledged and what is present.

    Each commit is one entity whose uuid names it; a writer reads the group's position from
    the graph before each commit, so a commit whose outcome was unknown is never re-sent
    blindly.

    However slow the machine, one write is in flight when the primary dies: before the kill,
    the victim's replica is paused (SIGSTOP), a held commit to a group of its own on the victim
    is sent, and the kill waits until the victim reports that commit's `WAIT` for the replica
    as blocked (`CLIENT LIST`): applied on the primary, not acknowledged. The replica resumes
    right after the kill. Returns the counts; `acknowledged_lost` must be 0 and
    `held_write_outcome` a failure (the held commit was never acknowledged)."""
    names = [f"fo-{i}" for i in range(groups)]
    setup = FalkorBackend(cluster.url)
    for g in names:
        setup.ensure_group(g)
    victim = cluster.primary_of(graph_key(names[0]))
    victim_groups = {g for g in names if cluster.primary_of(graph_key(g)) is victim}
    held_group = next(
        g
        for g in (f"fo-held-{i}" for i in range(10_000))
        if cluster.primary_of(graph_key(g)) is victim
    )
    setup.ensure_group(held_group)
    held_outcome: list[str] = []
    acked: dict[str, set[str]] = {g: set() for g in names}
    failures: Counter[str] = Counter()
    after_kill: list[float] = []
    killed_at: list[float] = []
    stop = threading.Event()

    def write(w: int) -> None:
        b = FalkorBackend(cluster.url, replicas=1, wait_timeout_ms=1000)
        mine = names[w::writers]
        n = 0
        try:
            while not stop.is_set():
                g = mine[n % len(mine)]
                n += 1
                uuid_ = f"{g}-w{w}-{n}"
                try:
                    with b.read() as r:
                        pos = r.position(g)
                    b.commit(
                        [Commit(g, [Op("entity.upsert", {"uuid": uuid_, "name": uuid_})], pos, pos)]
                    )
                except StorageError as exc:  # GroupMovedError and NotDurableError included
                    failures[_kind(exc)] += 1
                    time.sleep(0.02)
                    continue
                acked[g].add(uuid_)
                if killed_at and g in victim_groups:
                    after_kill.append(time.monotonic() - killed_at[0])
        finally:
            b.close()

    def held_write() -> None:
        """One commit that waits (up to `timeout_s`) for the paused replica: in flight."""
        b = FalkorBackend(cluster.url, replicas=1, wait_timeout_ms=int(timeout_s * 1000))
        try:
            op = Op("entity.upsert", {"uuid": f"{held_group}-1", "name": "held"})
            b.commit([Commit(held_group, [op], 0, 0)])
            held_outcome.append("acknowledged")
        except StorageError as exc:
            held_outcome.append(_kind(exc))
            failures[_kind(exc)] += 1
        finally:
            b.close()

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    held = threading.Thread(target=held_write)
    promoted_s: float | None = None
    replica = cluster.replica_of(victim)
    try:
        time.sleep(kill_after_s)
        deadline = time.monotonic() + timeout_s
        while sum(len(v) for v in acked.values()) < acks_before_kill:
            if time.monotonic() > deadline:
                raise RuntimeError(f"fewer than {acks_before_kill} acknowledged: {dict(failures)}")
            time.sleep(0.05)
        cluster.pause(replica)
        held.start()
        deadline = time.monotonic() + timeout_s
        while "wait" not in cluster.admin.blocked_commands(victim.port):
            if time.monotonic() > deadline or not held.is_alive():
                raise RuntimeError(f"the held commit never waited for its replica: {held_outcome}")
            time.sleep(0.01)
        cluster.kill(victim)
        killed_at.append(time.monotonic())
        cluster.resume(replica)
        held.join(timeout_s)
        deadline = time.monotonic() + timeout_s
        while cluster.primary_of(graph_key(names[0])) is victim:
            if time.monotonic() > deadline:
                raise RuntimeError("no replica took over")
            time.sleep(0.05)
        promoted_s = time.monotonic() - killed_at[0]
        cluster.restart(victim, keep_data=False)  # its slots moved: it rejoins as a replica
        while len(after_kill) < acks_after_kill:
            if time.monotonic() > deadline:
                raise RuntimeError(f"writes never resumed: {dict(failures)}")
            time.sleep(0.1)
    finally:
        cluster.resume(replica)
        stop.set()
        for t in [*threads, held]:
            if t.ident is not None:
                t.join(60)
    cluster.wait_healthy()
    lost: list[str] = []
    agree = True
    for g in [*names, held_group]:
        with setup.read() as r:
            in_graph = {e.uuid for e in r.entities_in_groups([g])}
        in_stream = {x.data["uuid"] for x in setup.stream_records(g)}
        agree = agree and in_graph == in_stream
        lost += sorted(acked.get(g, set()) - (in_graph & in_stream))
        setup.drop_group(g)
    setup.close()
    total = sum(len(v) for v in acked.values())
    return {
        "groups": groups,
        "writers": writers,
        "groups_on_killed_primary": len(victim_groups),
        "acknowledged": total,
        "acknowledged_present_after_failover": total - len(lost),
        "acknowledged_lost": len(lost),
        "lost_examples": lost[:5],
        "not_acknowledged_by_kind": dict(failures),
        "held_write_outcome": held_outcome[0] if held_outcome else None,
        "stream_and_graph_agree_every_group": agree,
        "replica_promoted_after_s": None if promoted_s is None else round(promoted_s, 2),
        "killed_shard_first_ack_after_kill_s": round(after_kill[0], 2) if after_kill else None,
        "killed_node_role_after_restart": cluster.role(victim),
    }


def _kind(exc: Exception) -> str:
    if isinstance(exc, GroupMovedError):
        return "group_moved"
    if isinstance(exc, NotDurableError):
        return "not_durable"
    return "storage_error"
