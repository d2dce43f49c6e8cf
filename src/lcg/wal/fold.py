"""Folding a group's stream into its final rows, so a full replay is one bulk load.

`fold` gives the same end state as applying the operations one by one with
`lcg.storage.graph.apply_ops` to an empty group (the rebuild-equivalence property test holds
the two to that). A stream containing `cypher.exec` cannot be folded (its effect is only known
to the database) and is reported as such, so the caller replays it operation by operation.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from lcg.models import Entity, Episode, Fact
from lcg.timeutil import from_wal
from lcg.wal.records import WalRecord, data_to_entity, data_to_episode, data_to_fact

__all__ = ["FoldFailure", "FoldedGroup", "fold"]


@dataclass(frozen=True)
class FoldFailure:
    seq: int
    op: str
    error: str


@dataclass
class FoldedGroup:
    """The final rows of one group after a whole stream."""

    group_id: str
    episodes: dict[str, Episode] = field(default_factory=dict)
    entities: dict[str, Entity] = field(default_factory=dict)
    facts: dict[str, Fact] = field(default_factory=dict)
    mentions: dict[str, list[str]] = field(default_factory=dict)  # episode -> entities, ordered
    applied: int = 0
    unrecognised: int = 0
    noops: int = 0
    failures: list[FoldFailure] = field(default_factory=list)
    last_seq: int | None = None
    needs_statement_replay: bool = False

    def hops(self) -> list[Fact]:
        """Facts whose endpoints both exist: the ones that get structural hops."""
        return [
            f
            for f in self.facts.values()
            if f.source_uuid in self.entities and f.target_uuid in self.entities
        ]

    def mention_pairs(self) -> list[tuple[str, str]]:
        return [
            (ep, ent)
            for ep, ents in self.mentions.items()
            if ep in self.episodes
            for ent in ents
            if ent in self.entities
        ]


def fold(group_id: str, records: Iterable[WalRecord]) -> FoldedGroup:
    """Fold records (in seq order) into final rows. Malformed records are counted, not raised."""
    out = FoldedGroup(group_id)
    for rec in records:
        out.last_seq = rec.seq
        try:
            _fold_one(out, rec)
        except (ValueError, TypeError, KeyError) as exc:
            out.failures.append(FoldFailure(rec.seq, rec.op, str(exc)))
    return out


def _fold_one(out: FoldedGroup, rec: WalRecord) -> None:
    data, gid = rec.data, out.group_id
    if rec.op == "entity.upsert":
        e = data_to_entity(data, gid)
        out.entities[e.uuid] = e
    elif rec.op == "fact.upsert":
        f = data_to_fact(data, gid)
        out.facts[f.uuid] = f
    elif rec.op == "episode.add":
        ep = data_to_episode(data, gid)
        out.episodes[ep.uuid] = ep
    elif rec.op == "fact.invalidate":
        uuid = data["uuid"]
        current = out.facts.get(uuid)
        if current is None:
            out.noops += 1
        else:
            out.facts[uuid] = replace(
                current,
                invalid_at=from_wal(data.get("invalid_at")),
                expired_at=from_wal(data.get("expired_at")),
            )
    elif rec.op == "episode.delete":
        uuid = data["uuid"]
        if out.episodes.pop(uuid, None) is None:
            out.noops += 1
        out.mentions.pop(uuid, None)
    elif rec.op == "mentions.add":
        ep = data["episode"]
        ents = data["entities"]
        if not isinstance(ents, list) or not all(isinstance(u, str) for u in ents):
            raise ValueError("mentions.add: entities must be a list of strings")
        if ep in out.episodes:
            linked = out.mentions.setdefault(ep, [])
            linked.extend(u for u in ents if u in out.entities and u not in linked)
        else:
            out.noops += 1
    elif rec.op == "group.purge":
        out.episodes.clear()
        out.entities.clear()
        out.facts.clear()
        out.mentions.clear()
    elif rec.op == "cypher.exec":
        out.needs_statement_replay = True
    else:
        out.unrecognised += 1
        return
    out.applied += 1
