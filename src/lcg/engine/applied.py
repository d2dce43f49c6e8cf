"""The check at open that the store holds what its applied positions claim, and its repair.

A group's applied position says the store holds every WAL batch up to that seq, but a crash can
leave a store whose position moved while rows of the batch did not (Kuzu's journal replay kept
a transaction's position and none of the facts it had loaded by `COPY`). At an open that found
Kuzu's journal holding commits (the last process did not close the database: a crash), before
the catch-up, `check` folds the group's last `WINDOW` batches at or below its position (those of
the WAL file that holds it: a batch never spans two files) into the rows they leave behind:
entities, facts and episodes by uuid, and each episode's mentions of stored entities (a later
`episode.delete` or `group.purge` takes rows back out; a `cypher.exec` leaves nothing
checkable before it). It asks the store for those rows by uuid. When some are missing it
replays, in place (every operation is idempotent), the batches from the oldest incomplete one
up to the position, or the whole stream up to it when the window's oldest batch is incomplete
(the loss may reach further back), and records the repair in `knowledge_status.wal_problems`
(kind `store_missing_applied_rows`) and as the event `store_missing_applied_rows`.

The store is the engine's embedded one, whose WAL is the workspace's files; a server store
keeps its WAL itself and commits each batch with its lines.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lcg.engine.catchup import CatchUp
from lcg.engine.replay import ReplayReport, applied_position
from lcg.engine.walproblems import WalProblems
from lcg.storage.backend import GraphBackend, GraphReader
from lcg.telemetry import EventSink
from lcg.wal.layout import first_seq, ordered_files
from lcg.wal.reader import parse_line
from lcg.wal.records import WalRecord
from lcg.wal.writer import Wal

__all__ = ["WINDOW", "Shortfall", "check", "shortfall"]

logger = logging.getLogger(__name__)

# Batches checked per group: more than a group commits between two of the engine's
# checkpoints (at most 200 commits), which is where a crash can lose what Kuzu's journal held.
WINDOW = 256


@dataclass
class Shortfall:
    """What the store lacks of the batches checked, and from which seq to replay."""

    from_seq: int
    to_seq: int
    missing: dict[str, int] = field(default_factory=dict)


@dataclass
class _Expected:
    """The rows a run of batches leaves, each with the index of the batch that wrote it last."""

    rows: dict[str, dict[str, int]] = field(
        default_factory=lambda: {"entities": {}, "facts": {}, "episodes": {}}
    )
    mentions: dict[str, dict[str, int]] = field(default_factory=dict)

    def fold(self, index: int, batch: Sequence[WalRecord]) -> None:
        for rec in batch:
            uuid = rec.data.get("uuid")
            if rec.op in ("group.purge", "cypher.exec"):
                self.rows = _Expected().rows
                self.mentions = {}
            elif rec.op == "entity.upsert" and isinstance(uuid, str):
                self.rows["entities"][uuid] = index
            elif rec.op == "fact.upsert" and isinstance(uuid, str):
                self.rows["facts"][uuid] = index
            elif rec.op == "episode.add" and isinstance(uuid, str):
                self.rows["episodes"][uuid] = index
            elif rec.op == "episode.delete" and isinstance(uuid, str):
                self.rows["episodes"].pop(uuid, None)
                self.mentions.pop(uuid, None)
            elif rec.op == "mentions.add":
                episode, entities = rec.data.get("episode"), rec.data.get("entities")
                if isinstance(episode, str) and isinstance(entities, list):
                    wanted = self.mentions.setdefault(episode, {})
                    wanted.update({u: index for u in entities if isinstance(u, str)})


def _last_batches(directory: Path, through: int) -> tuple[list[list[WalRecord]], bool]:
    """The last `WINDOW` whole batches ending at or before seq `through`, from the file that
    holds it, and whether older batches precede them. ([], False) when a line there does not
    parse: the catch-up and its replay report such lines."""
    firsts = [(first_seq(p), p) for p in ordered_files(directory)]
    files = [p for first, p in firsts if first is not None and first <= through]
    if not files:
        return [], False
    batches: list[list[WalRecord]] = []
    for raw in files[-1].read_bytes().splitlines():
        if not raw.strip():
            continue
        rec = parse_line(raw)
        if rec is None:
            return [], False
        if rec.seq > through:
            break
        if not batches or batches[-1][-1].more == 0:
            batches.append([])
        batches[-1].append(rec)
    if not batches or batches[-1][-1].more != 0:
        return [], False  # no whole batch ends at the position: nothing to check by halves
    return batches[-WINDOW:], batches[-WINDOW:][0][0].seq > 0


def shortfall(conn: GraphReader, directory: Path, through: int) -> Shortfall | None:
    """What the store lacks of the batches up to seq `through` (see the module docstring);
    None when it holds them all."""
    batches, older = _last_batches(directory, through)
    if not batches:
        return None
    expected = _Expected()
    for index, batch in enumerate(batches):
        expected.fold(index, batch)
    rows = expected.rows
    mentioned = {u for wanted in expected.mentions.values() for u in wanted}
    stored = {
        "entities": set(conn.entities_by_uuids([*rows["entities"], *mentioned])),
        "facts": set(conn.facts_by_uuids(rows["facts"])),
        "episodes": set(conn.episodes_by_uuids(rows["episodes"])),
    }
    missing: dict[str, int] = {}
    oldest: int | None = None
    for table, wanted in rows.items():
        for uuid, index in wanted.items():
            if uuid not in stored[table]:
                missing[table] = missing.get(table, 0) + 1
                oldest = index if oldest is None else min(oldest, index)
    edges = conn.episode_mentions([e for e in expected.mentions if e in stored["episodes"]])
    for episode, wanted in expected.mentions.items():
        have = set(edges.get(episode, ()))
        for uuid, index in wanted.items():
            if uuid in stored["entities"] and uuid not in have:
                missing["mentions"] = missing.get("mentions", 0) + 1
                oldest = index if oldest is None else min(oldest, index)
    if oldest is None:
        return None
    start = 0 if oldest == 0 and older else batches[oldest][0].seq
    return Shortfall(start, through, missing)


def check(
    catchup: CatchUp,
    store: GraphBackend,
    wal: Wal,
    problems: WalProblems,
    events: EventSink,
    groups: Sequence[str] | None = None,
) -> list[ReplayReport]:
    """(Write lock held, at open.) Check each group's last applied batches against the store
    and replay what it lacks; returns the reports of those replays."""
    repaired: list[ReplayReport] = []
    for group_id in wal.groups() if groups is None else groups:
        directory = wal.directory(group_id)
        with store.read_for_write() as conn:
            position = applied_position(conn, group_id)
            if position is None or position[0] is None or position[1] != wal.generation(group_id):
                continue  # never applied, or another generation: the catch-up's to handle
            found = shortfall(conn, directory, position[0])
        if found is None:
            continue
        logger.error(
            "group %r: the database's position says WAL seq %d is applied, but it lacks rows "
            "of its last batches (%s); replaying seqs %d..%d",
            group_id,
            found.to_seq,
            ", ".join(f"{n} {table}" for table, n in sorted(found.missing.items())),
            found.from_seq,
            found.to_seq,
        )
        report = catchup.replay_range(group_id, position[1], found.from_seq, found.to_seq)
        problems.record_shortfall(group_id, _entry(found, report.failed_lines == 0))
        events.emit("store_missing_applied_rows", group_id=group_id, **_entry(found))
        repaired.append(report)
    return repaired


def _entry(found: Shortfall, repaired: bool | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "first_seq": found.from_seq,
        "last_seq": found.to_seq,
        "missing": dict(sorted(found.missing.items())),
    }
    if repaired is not None:
        entry["repaired"] = repaired
    return entry
