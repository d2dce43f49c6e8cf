"""Replaying a group's WAL stream into the graph, and the report of what happened.

Two modes, one result:
- **bulk** (a whole stream into an empty group): fold every operation into final rows, embed
  them in batches, then load them with `COPY` in one transaction that also records the position;
- **incremental** (a tail, a bounded range, or a stream with raw Cypher): apply operations in
  transactions of about `batch_size` that end where a WAL batch ends, each advancing the
  position; a transaction that fails is retried one WAL batch per transaction, so one bad line
  costs only its own batch and no WAL batch is ever applied in part.

Neither serves a fact without its endpoints: the bulk fold leaves out the facts whose entities
it does not hold, an incremental batch the fact upserts whose endpoints neither the store nor
the batch holds, and a replayed raw `cypher.exec` is followed, in its transaction, by the
removal of the facts it left without an endpoint (`ReplayReport.dangling`).

Nothing is dropped silently: unparseable lines, unknown operations, failed operations and no-ops
are counted, and failures are sampled by (operation, error). A WAL batch with an unreadable
line or an unknown operation is not applied at all (the reader passes it over and reports it
in `lost`).

The caller holds the engine's write lock for the whole replay.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from lcg.embedding.base import Embedder
from lcg.embedding.stamp import restamp_group
from lcg.embedding.vectors import embed_for_bulk, embed_plan, plan_for_changes, plan_for_rows
from lcg.errors import StorageError
from lcg.gcpause import no_gc
from lcg.models import Fact
from lcg.storage.backend import GraphBackend, GraphReader
from lcg.storage.crossgroup import POINTER_KEY
from lcg.wal.changes import EntityUpsert, FactUpsert, decode_all
from lcg.wal.fold import FoldedGroup, fold
from lcg.wal.reader import LostBatch, ReadStats, iter_records
from lcg.wal.records import Op, WalRecord

__all__ = [
    "Loaded",
    "ReplayReport",
    "applied_position",
    "applied_seq",
    "loss_key",
    "position_key",
    "replay_group",
    "write_position",
]

logger = logging.getLogger(__name__)

Progress = Callable[[dict[str, Any]], None]


class Loaded(Protocol):
    """What a bulk replay's rows also feed (the group's search partitions,
    lcg.engine.warmup.PrebuiltSearch), so that nothing reads them back from the database."""

    def build(self, folded: FoldedGroup) -> None:
        """Build from the rows: runs in a thread of its own while the database loads them
        (Kuzu's COPY releases the GIL), so it must not touch the store."""

    def discard(self) -> None:
        """The load failed: what `build` made must never be used."""


def position_key(group_id: str) -> str:
    return f"wal_position:{group_id}"


def loss_key(group_id: str) -> str:
    """The meta key of the batches of a group's stream that replay could not apply."""
    return f"wal_loss:{group_id}"


def applied_position(conn: GraphReader, group_id: str) -> tuple[int | None, str | None] | None:
    """The group's recorded (applied_seq, generation), None when never recorded."""
    raw = conn.get_meta(position_key(group_id))
    if raw is None:
        return None
    value = json.loads(raw)
    return value.get("applied_seq"), value.get("generation")


def applied_seq(conn: GraphReader, group_id: str) -> int | None:
    """The group's recorded applied WAL position, None when unknown."""
    position = applied_position(conn, group_id)
    return position[0] if position else None


def write_position(
    conn: Any,
    group_id: str,
    applied_seq: int | None,
    generation: str | None,
    held_through: int | None = None,
) -> None:
    """Record a group's applied position (in the caller's transaction).

    `held_through` marks WAL lines after `applied_seq` (up to it) as deliberately not applied —
    a bounded restore — so that startup does not replay them; the next write clears it.
    """
    value: dict[str, Any] = {"applied_seq": applied_seq, "generation": generation}
    if held_through is not None:
        value["held_through"] = held_through
    conn.set_meta(position_key(group_id), json.dumps(value))


@dataclass
class ReplayReport:
    group_id: str
    from_seq: int
    to_seq: int | None
    mode: str = "incremental"
    mutations_replayed: int = 0
    match_prefixed_replayed: int = 0
    wal_files_processed: int = 0
    wal_files_total: int = 0
    unrecognised_lines: int = 0
    failed_lines: int = 0
    unparseable_lines: int = 0
    noop_lines: int = 0
    torn_tail_lines: int = 0
    incomplete_batch_lines: int = 0
    corrupt_batch_lines: int = 0  # readable lines of batches with an unreadable line
    rolled_back_lines: int = 0
    last_committed_seq: int | None = None
    transactions_committed: int = 0
    transactions_rolled_back: int = 0
    seconds: float = 0.0
    failures: Counter[tuple[str, str]] = field(default_factory=Counter)
    lost: list[LostBatch] = field(default_factory=list)
    gaps: list[tuple[str, int, int]] = field(default_factory=list)  # lcg.wal.reader.ReadStats
    failed_batches: list[tuple[int, int, str]] = field(default_factory=list)  # (first, last, why)
    dangling: list[str] = field(default_factory=list)  # facts left out: endpoints not restored

    @property
    def total_lines(self) -> int:
        return (
            self.mutations_replayed
            + self.failed_lines
            + self.unrecognised_lines
            + self.unparseable_lines
            + self.incomplete_batch_lines
            + self.corrupt_batch_lines
        )

    def to_wire(self, sample_cap: int, fidelity_threshold: float) -> dict[str, Any]:
        """The statistics keys of `knowledge_rebuild_from_wal`
        (docs/api.md §knowledge_rebuild_from_wal)."""
        ranked = self.failures.most_common()
        samples = [
            {"cypher": template[:200], "error": error, "count": count}
            for (template, error), count in ranked[:sample_cap]
        ]
        ineffective = (
            self.failed_lines
            + self.noop_lines
            + self.unrecognised_lines
            + self.unparseable_lines
            + self.incomplete_batch_lines
            + self.corrupt_batch_lines
        )
        total = self.total_lines
        warning = None
        if total and ineffective / total > fidelity_threshold:
            warning = (
                f"{ineffective} of {total} WAL lines ({ineffective / total:.1%}) had no effect "
                f"(failed {self.failed_lines}, no-op {self.noop_lines}, unrecognised "
                f"{self.unrecognised_lines}, unparseable {self.unparseable_lines}); the rebuilt "
                f"graph may differ from the original"
            )
        return {
            "group_id": self.group_id,
            "from_seq": self.from_seq,
            "to_seq": self.to_seq,
            "mutations_replayed": self.mutations_replayed,
            "match_prefixed_replayed": self.match_prefixed_replayed,
            "wal_files_processed": self.wal_files_processed,
            "indexes_created": 0,
            "unrecognised_lines": self.unrecognised_lines,
            "failed_lines": self.failed_lines,
            "unparseable_lines": self.unparseable_lines,
            "legacy_skipped_lines": 0,
            "lines_skipped": (
                self.unrecognised_lines
                + self.failed_lines
                + self.unparseable_lines
                + self.incomplete_batch_lines
                + self.corrupt_batch_lines
            ),
            "failed_samples": samples,
            "failed_sample_categories_dropped": max(0, len(ranked) - sample_cap),
            "fidelity_warning": warning,
            "rolled_back_lines": self.rolled_back_lines,
            "last_committed_seq": self.last_committed_seq,
            "transactions_committed": self.transactions_committed,
            "transactions_rolled_back": self.transactions_rolled_back,
            "replay_mode": self.mode,
            "noop_lines": self.noop_lines,
            "torn_tail_lines": self.torn_tail_lines,
            "incomplete_batch_lines": self.incomplete_batch_lines,
            "corrupt_batch_lines": self.corrupt_batch_lines,
            "lost_batches": [loss.to_wire() for loss in self.lost],
            "duration_seconds": round(self.seconds, 3),
        }


def _template(op: str, data: dict[str, Any]) -> str:
    if op == "cypher.exec" and isinstance(data.get("query"), str):
        return str(data["query"])
    return op


def replay_group(
    store: GraphBackend,
    directory: Path,
    group_id: str,
    embedder: Embedder,
    *,
    generation: str | None,
    from_seq: int = 0,
    to_seq: int | None = None,
    bulk_load: bool = False,
    batch_size: int = 64,
    progress: Progress | None = None,
    loaded: Loaded | None = None,
) -> ReplayReport:
    """Replay `[from_seq, to_seq]` of a group's stream; see the module docstring for the modes.

    `bulk_load` may only be asked for when the group holds no rows. A bulk load hands its
    rows to `loaded` too (an incremental replay does not).
    """
    started = time.perf_counter()
    report = ReplayReport(group_id, from_seq, to_seq)
    stats = ReadStats()

    def frame(message: str) -> None:
        """A progress frame in the shape of docs/api.md §progress (the transport adds `type`)."""
        if progress is not None:
            progress(
                {
                    "message": message,
                    "mutations_replayed_so_far": report.mutations_replayed,
                    "files_processed_so_far": stats.files_processed,
                    "files_total": stats.files_total,
                    "failed_lines_so_far": report.failed_lines,
                    "legacy_skipped_lines_so_far": 0,
                }
            )

    if bulk_load:
        # No cyclic collections: a bulk replay allocates millions of long-lived objects and
        # no cycles (fold at 100k facts: 2.7 s CPU with the collector, 2.0 s without).
        with no_gc():
            read = [0]

            def counted(records: Iterable[WalRecord]) -> Iterator[WalRecord]:
                for rec in records:
                    read[0] += 1
                    yield rec

            folded = fold(group_id, counted(iter_records(directory, from_seq, to_seq, stats)))
            frame(f"read {read[0]} lines from {stats.files_processed} files of {directory}")
            if folded.needs_statement_replay:  # rare: read the stream again, one op at a time
                stats = ReadStats()
                records = iter_records(directory, from_seq, to_seq, stats)
                _incremental(
                    store, group_id, embedder, records, report, generation, batch_size, frame
                )
            else:
                report.mode = "bulk"
                _bulk(store, group_id, embedder, folded, report, generation, loaded)
    else:
        _incremental(
            store,
            group_id,
            embedder,
            iter_records(directory, from_seq, to_seq, stats),
            report,
            generation,
            batch_size,
            frame,
        )
    frame(f"replayed {report.mutations_replayed} mutations from {directory}")
    report.unparseable_lines = stats.unparseable
    report.unrecognised_lines += stats.unrecognised
    report.torn_tail_lines = stats.torn_tail
    report.incomplete_batch_lines = stats.incomplete_batch_lines
    report.corrupt_batch_lines = stats.corrupt_batch_lines
    report.lost = stats.lost
    report.gaps = stats.gaps
    report.wal_files_processed = stats.files_processed
    report.wal_files_total = stats.files_total
    report.seconds = time.perf_counter() - started
    return report


def _bulk(
    store: GraphBackend,
    group_id: str,
    embedder: Embedder,
    folded: Any,
    report: ReplayReport,
    generation: str | None,
    loaded: Loaded | None,
) -> None:
    report.unrecognised_lines = folded.unrecognised
    report.noop_lines = folded.noops
    report.failed_lines = len(folded.failures)
    for failure in folded.failures:
        report.failures[(failure.op, failure.error)] += 1
    report.failed_batches = list(folded.failed_batches)
    report.dangling = _leave_out_dangling(folded)
    plan = plan_for_rows(folded.entities.values(), folded.facts.values(), folded.episodes.values())
    vectors = embed_for_bulk(plan, embedder)
    beside = _Beside(loaded, folded) if loaded is not None else None
    try:
        with store.transaction() as tx:
            tx.load_folded(folded, vectors)
            # Stamped here, not in a commit of its own after it: the next group's bulk load
            # still finds a database that holds only bulk loads (lcg.storage.bulk: COPY).
            restamp_group(tx, group_id, embedder.identity)
            if folded.last_seq is not None:
                write_position(tx, group_id, folded.last_seq, generation)
    except BaseException as exc:
        if beside is not None:
            beside.join()
            beside.loaded.discard()
        if not isinstance(exc, StorageError):
            raise
        report.transactions_rolled_back += 1
        report.rolled_back_lines += folded.applied
        report.failed_lines += folded.applied
        report.failures[("bulk load", str(exc))] += 1
        return
    report.transactions_committed += 1
    report.mutations_replayed = folded.applied
    report.last_committed_seq = folded.last_seq
    if beside is not None:
        beside.join()


def _leave_out_dangling(folded: FoldedGroup) -> list[str]:
    """Take out of `folded` the facts whose endpoints it does not hold (their entities were in
    WAL lines lost or missing) and return their uuids: a fact is never served without the
    entities it links. A cross-group fact's endpoints may live in other groups: it stays."""
    out = []
    for uuid, fact in folded.facts.items():
        if fact.source_uuid in folded.entities and fact.target_uuid in folded.entities:
            continue
        if _crosses_groups(fact):
            continue
        out.append(uuid)
    for uuid in out:
        del folded.facts[uuid]
    return out


def _crosses_groups(fact: Fact) -> bool:
    return POINTER_KEY in fact.attributes and POINTER_KEY in json.loads(fact.attributes)


def _without_dangling(
    store: GraphBackend, group_id: str, ops: list[Op]
) -> tuple[list[Op], list[str]]:
    """The batch's operations without the fact upserts whose endpoints neither the store nor
    the batch holds, and those facts' uuids: an incremental replay leaves them out as the
    bulk one does (their entities were in WAL lines lost or missing)."""
    changes = decode_all(ops, group_id)
    facts = [
        (i, c.fact)
        for i, c in enumerate(changes)
        if isinstance(c, FactUpsert) and not _crosses_groups(c.fact)
    ]
    if not facts:
        return ops, []
    made = {c.entity.uuid for c in changes if isinstance(c, EntityUpsert)}
    wanted = {u for _, f in facts for u in (f.source_uuid, f.target_uuid)} - made
    with store.read_for_write() as conn:
        held = made | set(conn.entities_by_uuids(wanted)) if wanted else made
    out = {i: f.uuid for i, f in facts if f.source_uuid not in held or f.target_uuid not in held}
    return [op for i, op in enumerate(ops) if i not in out], list(out.values())


class _Beside(threading.Thread):
    """`loaded.build(folded)` in a thread, alongside the load."""

    def __init__(self, loaded: Loaded, folded: FoldedGroup) -> None:
        super().__init__(name="replay-derive", daemon=True)
        self.loaded, self._folded = loaded, folded
        self.start()

    def run(self) -> None:
        try:
            self.loaded.build(self._folded)
        except Exception:  # derived state: the caller's own fallback applies
            logger.exception("building from a bulk replay's rows failed")
            self.loaded.discard()


def _apply_batch(
    store: GraphBackend,
    group_id: str,
    embedder: Embedder,
    batch: Sequence[WalRecord],
    generation: str | None,
) -> list[str]:
    """Apply the records in one transaction; the facts left out without their endpoints."""
    ops, dangling = _without_dangling(store, group_id, [Op(r.op, r.data) for r in batch])
    plan = plan_for_changes(decode_all(ops, group_id))
    with store.transaction() as tx:
        tx.apply_ops(group_id, ops)
        if any(op.name == "cypher.exec" for op in ops):  # raw: it may delete an endpoint
            dangling += tx.drop_dangling_facts()
        stored = tx.stored_text_hashes(plan.keys())
        tx.put_embeddings(embed_plan(plan, embedder, stored), stored)
        tx.delete_embeddings(plan.stale)
        write_position(tx, group_id, batch[-1].seq, generation)
    return dangling


def _incremental(
    store: GraphBackend,
    group_id: str,
    embedder: Embedder,
    records: Any,
    report: ReplayReport,
    generation: str | None,
    batch_size: int,
    frame: Callable[[str], None],
) -> None:
    pending: list[WalRecord] = []
    reported = [0]

    def flush() -> None:
        if not pending:
            return
        try:
            report.dangling += _apply_batch(store, group_id, embedder, pending, generation)
            _committed(report, pending)
        except (StorageError, ValueError) as exc:
            report.transactions_rolled_back += 1
            report.rolled_back_lines += len(pending)
            batches = _wal_batches(pending)
            if len(batches) == 1:
                report.failed_lines += len(pending)
                report.failures[(_batch_template(pending), str(exc))] += 1
                report.failed_batches.append((pending[0].seq, pending[-1].seq, str(exc)))
            else:
                for batch in batches:  # isolate the failing WAL batch(es), never part of one
                    try:
                        report.dangling += _apply_batch(
                            store, group_id, embedder, batch, generation
                        )
                        _committed(report, batch)
                    except (StorageError, ValueError) as one_exc:
                        report.transactions_rolled_back += 1
                        report.failed_lines += len(batch)
                        report.failures[(_batch_template(batch), str(one_exc))] += 1
                        report.failed_batches.append((batch[0].seq, batch[-1].seq, str(one_exc)))
        pending.clear()
        if report.mutations_replayed - reported[0] >= 1000:
            reported[0] = report.mutations_replayed
            frame(f"replayed {report.mutations_replayed} mutations")

    for rec in records:  # the reader passes over batches with an unknown operation
        boundary = not pending or pending[-1].more == 0
        if rec.op == "cypher.exec" and boundary and rec.more == 0:  # a raw statement alone
            flush()
            pending.append(rec)
            flush()
            continue
        pending.append(rec)
        if len(pending) >= batch_size and rec.more == 0:  # a transaction ends with a WAL batch
            flush()
    flush()


def _wal_batches(records: Sequence[WalRecord]) -> list[list[WalRecord]]:
    """`records` cut at the ends of their WAL batches (a line with no `more`)."""
    out: list[list[WalRecord]] = [[]]
    for rec in records:
        out[-1].append(rec)
        if rec.more == 0:
            out.append([])
    return [b for b in out if b]


def _batch_template(batch: Sequence[WalRecord]) -> str:
    """The failure category of a WAL batch: its one line's template, or its operations."""
    if len(batch) == 1:
        return _template(batch[0].op, batch[0].data)
    return "batch of " + ", ".join(sorted({r.op for r in batch}))


def _committed(report: ReplayReport, batch: Sequence[WalRecord]) -> None:
    report.transactions_committed += 1
    report.mutations_replayed += len(batch)
    report.last_committed_seq = batch[-1].seq
    report.match_prefixed_replayed += sum(
        1
        for r in batch
        if r.op == "cypher.exec"
        and str(r.data.get("query", "")).lstrip().upper().startswith("MATCH")
    )
