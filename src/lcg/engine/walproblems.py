"""The WAL problems kept for `knowledge_status` (`wal_problems`, an lcg extension), by group:
batches a replay could not apply (unreadable, failing their checksum, or failing to apply),
seqs no WAL line holds (a file missing), seqs the database applied that its WAL no longer holds
(and the floor that keeps them from being handed out again), torn tails cut at startup, WAL
mark files that did not parse (rebuilt from what still names their content) and facts a replay
left out because it could not restore their endpoints, and applied batches whose rows the
store turned out to lack at open (replayed: lcg.engine.applied).

The record lives beside the WAL (`lcg.wal.layout.PROBLEMS_FILE`, one per group), not in the
database: deleting the database must not erase what only the database remembered (seqs applied
beyond the WAL), nor earlier damage. A record an older lcg kept in the database (Meta
`wal_loss:<group>`) is read until the first write moves it beside the WAL. Every method that
writes expects the write lock held.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lcg.engine.replay import ReplayReport, applied_position, loss_key
from lcg.errors import LcgError
from lcg.fsmodes import private_dir
from lcg.storage.backend import GraphBackend, GraphReader
from lcg.telemetry import EventSink
from lcg.wal import marks
from lcg.wal.layout import (
    GENERATION_FILE,
    file_gaps,
    generation_damaged,
    read_problems,
    restore_generation,
    start_gap,
    write_problems,
)
from lcg.wal.reader import LostBatch
from lcg.wal.writer import TornTail, Wal

__all__ = [
    "AHEAD",
    "DAMAGED",
    "DANGLING",
    "FAILED",
    "GAP",
    "LOST",
    "MARK",
    "SHORT",
    "START",
    "TORN",
    "WalProblems",
]

logger = logging.getLogger(__name__)

# The kinds of `wal_problems` entries in knowledge_status.
LOST = "batch_not_applied"  # a batch with an unreadable line, passed over by a replay
AHEAD = "database_ahead_of_wal"  # seqs the database applied that the WAL no longer holds
TORN = "torn_tail"  # unacknowledged lines a crash left at a stream's end, cut at startup
MARK = "mark_file_corrupt"  # a WAL mark file (checkpoint record, generation) that did not parse
GAP = "seq_gap"  # seqs no line of the stream holds: a WAL file missing, lines cut out
START = "wal_start_missing"  # the stream's first seqs are gone: its first file deleted, or cut
FAILED = "batch_failed"  # a readable batch that could not be applied (a bad timestamp, ...)
SHORT = "store_missing_applied_rows"  # applied batches whose rows the store lacked (replayed)
DANGLING = "fact_without_endpoints"  # facts a replay left out: their endpoints were not restored
DAMAGED = "wal_line_damaged"  # an applied batch's line fails its checksum (lcg.engine.walscan)
# What a replay of the whole stream finds again (and so replaces); the others it cannot.
_REDERIVED = (LOST, GAP, FAILED, DANGLING, DAMAGED)
_SAMPLE = 20  # fact uuids named in a DANGLING entry


def _floored(known: list[dict[str, Any]], first: int, last: int) -> bool:
    """Whether seqs `first..last` are ones only the database held (an `AHEAD` entry): the
    stream skipped them on purpose, no line ever held them."""
    return any(
        x.get("kind") == AHEAD and x["first_seq"] <= first and last <= x["last_seq"] for x in known
    )


class WalProblems:
    """One engine's record of its WAL's problems (in the store's Meta rows)."""

    def __init__(self, store: Callable[[], GraphBackend], wal: Wal, events: EventSink) -> None:
        self._store = store
        self._wal = wal
        self.events = events

    def position(self, conn: GraphReader, group_id: str) -> tuple[int | None, str | None] | None:
        return applied_position(conn, group_id)

    def database_ahead(self, conn: GraphReader, group_id: str) -> tuple[int, int | None] | None:
        """(applied_seq, max_seq) when the database has applied seqs its WAL stream no longer
        holds (same generation): a fidelity problem, as a rebuild would lose them."""
        position = self.position(conn, group_id)
        if position is None or position[0] is None:
            return None
        if position[1] != self._wal.generation(group_id):
            return None
        max_seq = self._wal.bounds(group_id).max_seq
        if max_seq is not None and position[0] <= max_seq:
            return None
        return position[0], max_seq

    def check_database_ahead(self, groups: Sequence[str] | None = None) -> None:
        """(Write lock held.) Report every group whose database is ahead of its WAL, record it
        for `knowledge_status`, and move the group's stream past every seq ever applied, so no
        seq is handed out twice."""
        for group_id in self._wal.groups() if groups is None else groups:
            with self._store().read_for_write() as conn:
                ahead = self.database_ahead(conn, group_id)
                known = self.losses(conn, group_id)
            floor = max((x["last_seq"] for x in known if x.get("kind") == AHEAD), default=None)
            if ahead is not None:
                applied, max_seq = ahead
                first = 0 if max_seq is None else max_seq + 1
                logger.error(
                    "group %r: the database has applied WAL seq %d but the WAL ends at %s; "
                    "seqs %d..%d exist only in the database and a rebuild from the WAL would "
                    "lose them; new writes continue at seq %d",
                    group_id,
                    applied,
                    max_seq,
                    first,
                    applied,
                    applied + 1,
                )
                self.events.emit(
                    "wal_behind_database",
                    group_id=group_id,
                    applied_seq=applied,
                    max_seq=max_seq,
                    next_seq=applied + 1,
                )
                entry = {"kind": AHEAD, "file": None, "first_seq": first, "last_seq": applied}
                if entry not in known:
                    self._keep(group_id, [*known, entry])
                floor = applied if floor is None else max(floor, applied)
            if floor is not None:
                self._wal.stream(group_id).skip_to(floor + 1)

    def losses(self, conn: GraphReader, group_id: str) -> list[dict[str, Any]]:
        """The group's record: beside its WAL, else (an older lcg's) in the database."""
        kept = read_problems(self._wal.directory(group_id))
        if kept is not None:
            return kept
        raw = conn.get_meta(loss_key(group_id))
        value = json.loads(raw) if raw else []
        return [x for x in value if isinstance(x, dict)] if isinstance(value, list) else []

    def _keep(self, group_id: str, entries: list[dict[str, Any]]) -> None:
        """Replace the group's record (beside its WAL; an older lcg's copy in the database is
        cleared, so it is never read again)."""
        directory = private_dir(self._wal.directory(group_id))
        write_problems(directory, entries)
        with self._store().read_for_write() as conn:
            legacy = conn.get_meta(loss_key(group_id))
        if legacy is not None:
            with self._store().transaction() as tx:
                tx.set_meta(loss_key(group_id), None)

    def record_losses(self, report: ReplayReport, *, full: bool) -> None:
        """Keep the batches a replay could not apply (write lock held), for `knowledge_status`.

        A replay of the whole stream replaces the group's record of them; a tail replay adds
        to it. Seqs the database held beyond its WAL stay recorded (they bound the next seq).
        """
        for loss in report.lost:
            logger.error(
                "group %r: WAL batch seq %s..%s in %s has an unreadable line and was not "
                "applied (%d readable lines dropped)",
                report.group_id,
                loss.first_seq,
                loss.last_seq,
                loss.file,
                loss.lines_dropped,
            )
            self.events.emit("wal_batch_lost", group_id=report.group_id, **loss.to_wire())
        for first, last, error in report.failed_batches:
            logger.error(
                "group %r: WAL batch seq %d..%d could not be applied: %s",
                report.group_id,
                first,
                last,
                error,
            )
        for file, first, last in report.gaps:
            logger.error(
                "group %r: no WAL line holds seqs %d..%d (before %s): a WAL file is missing or "
                "was cut; what they held is lost",
                report.group_id,
                first,
                last,
                file,
            )
        if report.dangling:
            logger.error(
                "group %r: %d facts left out: their endpoints were not restored (%s...)",
                report.group_id,
                len(report.dangling),
                ", ".join(report.dangling[:3]),
            )
        with self._store().read_for_write() as conn:
            before = self.losses(conn, report.group_id)
        fresh = [{"kind": LOST, **loss.to_wire()} for loss in report.lost]
        fresh += [
            {"kind": GAP, "file": file, "first_seq": first, "last_seq": last}
            for file, first, last in report.gaps
            if not _floored(before, first, last)
        ]
        fresh += [
            {"kind": FAILED, "file": None, "first_seq": a, "last_seq": b, "error": e[:300]}
            for a, b, e in report.failed_batches
        ]
        if report.dangling:
            fresh.append(
                {
                    "kind": DANGLING,
                    "file": None,
                    "first_seq": None,
                    "last_seq": None,
                    "count": len(report.dangling),
                    "facts": sorted(report.dangling)[:_SAMPLE],
                }
            )
        if not fresh and not full:
            return
        # A whole replay re-derives these; what the WAL itself lost stays recorded.
        known = [x for x in before if x.get("kind") not in _REDERIVED] if full else before
        merged = known + [x for x in fresh if x not in known]
        if merged != before:
            self._keep(report.group_id, merged)

    def check_gaps(self) -> None:
        """(Write lock held, at startup.) Record each stream's files whose seqs do not follow
        on from the file before (one deleted, or cut short), and a stream that no longer
        begins at the seq its start record holds (its first file deleted: `START`) — found
        without reading the WAL through, so before any rebuild would lose what they held.
        Seqs the database held beyond its WAL (an `AHEAD` entry) are not a gap: no line ever
        held them."""
        for group_id in self._wal.groups():
            directory = self._wal.directory(group_id)
            try:
                gaps = [(GAP, gap) for gap in file_gaps(directory)]
                head = start_gap(directory)
            except OSError as exc:
                logger.error("group %r: WAL files could not be checked: %s", group_id, exc)
                continue
            if head is not None:
                gaps.insert(0, (START, head))
            if not gaps:
                continue
            with self._store().read_for_write() as conn:
                known = self.losses(conn, group_id)
            fresh = [
                {"kind": kind, "file": file, "first_seq": first, "last_seq": last}
                for kind, (file, first, last) in gaps
                if not _floored(known, first, last)
            ]
            fresh = [x for x in fresh if x not in known]
            for entry in fresh:
                logger.error(
                    "group %r: no WAL line holds seqs %s..%s (before %s): %s; a rebuild "
                    "cannot restore what they held",
                    group_id,
                    entry["first_seq"],
                    entry["last_seq"],
                    entry["file"],
                    "the stream's first WAL file is missing or was cut"
                    if entry["kind"] == START
                    else "a WAL file is missing or was cut",
                )
                self.events.emit("wal_seq_gap", group_id=group_id, **entry)
            if fresh:
                self._keep(group_id, [*known, *fresh])

    def record_damaged(self, group_id: str, lost: Sequence[LostBatch]) -> None:
        """(Write lock held.) Keep the batches the background checksum pass found with an
        unreadable line (`lcg.engine.walscan`) that no replay has reported already: the
        database holds them, a rebuild from the WAL would not (`DAMAGED`)."""
        with self._store().read_for_write() as conn:
            known = self.losses(conn, group_id)
        seen = {
            (x.get("first_seq"), x.get("last_seq"))
            for x in known
            if x.get("kind") in (LOST, DAMAGED)
        }
        fresh = [
            {"kind": DAMAGED, **loss.to_wire()}
            for loss in lost
            if (loss.first_seq, loss.last_seq) not in seen
        ]
        for entry in fresh:
            logger.error(
                "group %r: WAL batch seq %s..%s in %s has a line that fails its checksum; the "
                "database holds the batch, a rebuild from the WAL would not",
                group_id,
                entry["first_seq"],
                entry["last_seq"],
                entry["file"],
            )
            self.events.emit("wal_line_damaged", group_id=group_id, **entry)
        if fresh:
            self._keep(group_id, [*known, *fresh])

    def record_torn(self, torn: TornTail) -> None:
        """(Write lock held.) Keep a torn tail cut at startup for `knowledge_status`."""
        entry = {"kind": TORN, **torn.to_wire()}
        with self._store().read_for_write() as conn:
            known = self.losses(conn, torn.group_id)
        self._keep(torn.group_id, [*known, entry])

    def record_shortfall(self, group_id: str, entry: dict[str, Any]) -> None:
        """(Write lock held, at open.) Keep a repair of applied batches whose rows the store
        lacked (`lcg.engine.applied`: `first_seq`, `last_seq`, `missing`, `repaired`)."""
        with self._store().read_for_write() as conn:
            known = self.losses(conn, group_id)
        self._keep(group_id, [*known, {"kind": SHORT, **entry}])

    def check_mark_files(self) -> None:
        """(Write lock held, at startup.) Find the group's WAL mark files that no longer parse,
        rebuild them from what still names their content, and record each for
        `knowledge_status` (`wal_problems`, kind `mark_file_corrupt`); never fail the startup.

        - a checkpoint's create record: rebuilt from the WAL (`lcg.wal.marks.rebuild_mark`);
        - `.wal-generation.json`: restored from the generation the database's applied position
          records, else from the newest mark that names one; with neither it stays unknown
          (the group is then not caught up until a rebuild, as for a missing file).
        """
        for group_id in self._wal.groups():
            directory = self._wal.directory(group_id)
            entries: list[dict[str, Any]] = []
            try:
                if generation_damaged(directory):
                    entries.append(self._restore_generation(group_id, directory))
                for damaged in marks.damaged_marks(directory):
                    entries.append(self._rebuild_mark(group_id, directory, damaged))
            except (OSError, LcgError) as exc:  # reported, never a failed startup
                logger.error("group %r: WAL mark files could not be checked: %s", group_id, exc)
                continue
            if not entries:
                continue
            with self._store().read_for_write() as conn:
                known = self.losses(conn, group_id)
            fresh = [e for e in entries if e not in known]
            self._keep(group_id, [*known, *fresh])

    def _restore_generation(self, group_id: str, directory: Path) -> dict[str, Any]:
        with self._store().read_for_write() as conn:
            position = self.position(conn, group_id)
        generation = position[1] if position is not None else None
        source = "database_position"
        if generation is None:
            named = [m.mark for m in marks.list_marks(directory) if m.mark.wal_generation]
            named.sort(key=lambda m: m.created_at_ms)
            generation = named[-1].wal_generation if named else None
            source = "mark"
        if generation is not None:
            restore_generation(directory, generation)
            self._wal.drop_stream(group_id)  # re-read with its generation
        logger.error(
            "group %r: %s did not parse; %s",
            group_id,
            directory / GENERATION_FILE,
            f"restored generation {generation} from the {source.replace('_', ' ')}"
            if generation is not None
            else "no record names its generation: run knowledge_rebuild_from_wal for the group",
        )
        self.events.emit(
            "wal_mark_file_corrupt",
            group_id=group_id,
            file=GENERATION_FILE,
            rebuilt=bool(generation),
        )
        return {
            "kind": MARK,
            "file": GENERATION_FILE,
            "first_seq": None,
            "last_seq": None,
            "rebuilt": generation is not None,
            "rebuilt_from": source if generation is not None else None,
        }

    def _rebuild_mark(
        self, group_id: str, directory: Path, damaged: marks.DamagedMark
    ) -> dict[str, Any]:
        rebuilt = marks.rebuild_mark(directory, damaged)
        relative = str(damaged.path.relative_to(directory))
        logger.error(
            "group %r: WAL mark %r (%s) did not parse; %s",
            group_id,
            damaged.name,
            relative,
            f"rebuilt from the WAL at seq {rebuilt.seq}"
            if rebuilt is not None
            else "the WAL no longer tells its seq: it stays unusable (delete and re-create it)",
        )
        self.events.emit(
            "wal_mark_file_corrupt", group_id=group_id, file=relative, rebuilt=rebuilt is not None
        )
        return {
            "kind": MARK,
            "file": relative,
            "first_seq": None,
            "last_seq": None,
            "mark": damaged.name,
            "rebuilt": rebuilt is not None,
            "rebuilt_from": "wal" if rebuilt is not None else None,
            "seq": rebuilt.seq if rebuilt is not None else None,
        }

    def wal_problems(self, conn: GraphReader) -> list[dict[str, Any]]:
        """The `wal_problems` of `knowledge_status` (an lcg extension): WAL lines lost, by group."""
        return [
            {"group_id": group_id, **loss}
            for group_id in self._wal.groups()
            for loss in self.losses(conn, group_id)
        ]
