"""Folding a group's stream into its final rows, so a full replay is one bulk load.

`fold` gives the same end state as applying the operations one by one with
`lcg.storage.graph.apply_ops` to an empty group (the rebuild-equivalence property test holds
the two to that). A stream containing `cypher.exec` cannot be folded (its effect is only known
to the database) and is reported as such, so the caller replays it operation by operation.

It dispatches on operation names, not on the typed changes of `lcg.wal.changes`: this is the
hot path of a full rebuild, and a fold through `decode` (a change object per line, then a
`match`) measured 1.79 s of CPU against 1.35 s for this one on the same 200,000 operations
(20,000 episodes of bench/wal_store.py's WAL, median of 5, same final rows), 33% slower,
about 5% of a whole rebuild (~25,000 operations/s).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

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
    failed_batches: list[tuple[int, int, str]] = field(default_factory=list)  # first, last, why
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
    """Fold records (in seq order) into final rows. Malformed records are counted, not raised;
    a WAL batch with a malformed record is left out whole (every line counts as failed)."""
    out = FoldedGroup(group_id)
    batch: list[WalRecord] = []
    for rec in records:
        out.last_seq = rec.seq
        batch.append(rec)
        if rec.more == 0:
            _fold_batch(out, batch)
            batch = []
    if batch:
        _fold_batch(out, batch)
    return out


# The row-replacing operations: their record's data converted whole (`_parse` for the others).
_ROWS = {
    "entity.upsert": data_to_entity,
    "fact.upsert": data_to_fact,
    "episode.add": data_to_episode,
}


def _fold_batch(out: FoldedGroup, batch: list[WalRecord]) -> None:
    """Parse every line of the batch first, so none of it is folded if one line is malformed."""
    parsed: list[Any] = []
    gid = out.group_id
    for rec in batch:
        try:
            convert = _ROWS.get(rec.op)
            parsed.append(convert(rec.data, gid) if convert is not None else _parse(rec, gid))
        except (ValueError, TypeError, KeyError) as exc:
            for other in batch:
                error = (
                    str(exc) if other is rec else f"its batch has a malformed line (seq {rec.seq})"
                )
                out.failures.append(FoldFailure(other.seq, other.op, error))
            out.failed_batches.append((batch[0].seq, batch[-1].seq, str(exc)))
            return
    rows: dict[str, dict[str, Any]] = {
        "entity.upsert": out.entities,
        "fact.upsert": out.facts,
        "episode.add": out.episodes,
    }
    for rec, value in zip(batch, parsed, strict=True):
        into = rows.get(rec.op)
        if into is None:
            _fold_one(out, rec, value)
        else:  # what `_fold_one` does with an upsert, inline: most of a stream's records
            into[value.uuid] = value
            out.applied += 1


def _parse(rec: WalRecord, gid: str) -> object:
    """What `_fold_one` needs of a record not in `_ROWS`; raises ValueError, TypeError or
    KeyError."""
    data = rec.data
    if rec.op == "fact.invalidate":
        return (data["uuid"], from_wal(data.get("invalid_at")), from_wal(data.get("expired_at")))
    if rec.op == "episode.delete":
        return data["uuid"]
    if rec.op == "mentions.add":
        ep, ents = data["episode"], data["entities"]
        if not isinstance(ents, list) or not all(isinstance(u, str) for u in ents):
            raise ValueError("mentions.add: entities must be a list of strings")
        return (ep, ents)
    return None


def _fold_one(out: FoldedGroup, rec: WalRecord, value: Any) -> None:
    """A record not in `_ROWS` (`_fold_batch` stores those itself)."""
    if rec.op == "fact.invalidate":
        uuid, invalid_at, expired_at = value
        current = out.facts.get(uuid)
        if current is None:
            out.noops += 1
        else:
            out.facts[uuid] = replace(current, invalid_at=invalid_at, expired_at=expired_at)
    elif rec.op == "episode.delete":
        if out.episodes.pop(value, None) is None:
            out.noops += 1
        out.mentions.pop(value, None)
    elif rec.op == "mentions.add":
        ep, ents = value
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
