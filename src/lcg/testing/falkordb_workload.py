"""Writers that race on one group of a FalkorDB server, as lcg processes do (issue 19 item 4).

`ResolvingWriter` is the engine's commit loop reduced to what optimistic concurrency needs: it
resolves each episode's entity names and facts against what it knows of the group (names to
uuids, fact triples to uuids), commits the batch at the group position it believes, and when
another writer got there first (`GroupMovedError`, nothing applied) it catches up from the
group's WAL stream (the lines it missed, learning their entities and facts), re-resolves and
retries. A name the other writer created is then reused, never created twice.

`summary` reads a group back at the level of names (entities, fact triples, episodes and their
mentions), so two groups built from the same episodes in different orders can be compared, and
duplicates counted. `writer_process` runs one writer in a child process (tests and
bench/server_mode.py start several against one server).

Used by tests and benchmarks only; it talks to the store through `FalkorBackend` alone.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Sequence
from typing import Any

from lcg.storage.backend import Commit, GroupMovedError
from lcg.storage.falkordb.backend import FalkorBackend
from lcg.timeutil import now, to_wal
from lcg.wal.records import Op

__all__ = [
    "EpisodeSpec",
    "ResolvingWriter",
    "duplicates",
    "episodes_for",
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

    def __init__(self, backend: FalkorBackend, group: str) -> None:
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


def summary(backend: FalkorBackend, group: str) -> dict[str, list[Any]]:
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
