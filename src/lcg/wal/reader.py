"""Reading a group's stream back: records in seq order, with honest counts of what was skipped.

Reading never modifies files, and yields only whole batches. A line that is not valid JSON, or
not a `{seq, ts, op, data}` record, is counted (`unparseable`) and passed over; a final line
with no newline is a torn write that was never acknowledged and is counted as `torn_tail`, as are
the lines of a batch whose last line never arrived (`incomplete_batch_lines`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from lcg.wal.layout import ordered_files
from lcg.wal.records import WalRecord

__all__ = ["ReadStats", "iter_records", "parse_line"]


@dataclass
class ReadStats:
    """What a read saw besides the records it yielded."""

    files_total: int = 0
    files_processed: int = 0
    unparseable: int = 0
    torn_tail: int = 0
    incomplete_batch_lines: int = 0
    unparseable_samples: list[str] = field(default_factory=list)


def parse_line(line: bytes) -> WalRecord | None:
    """A record, or None when the line is not one."""
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(value, dict):
        return None
    seq, ts, op, data = value.get("seq"), value.get("ts"), value.get("op"), value.get("data")
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
        return None
    if not isinstance(op, str) or not isinstance(data, dict):
        return None
    more = value.get("more", 0)
    if not isinstance(more, int) or isinstance(more, bool) or more < 0:
        return None
    return WalRecord(seq=seq, ts=ts if isinstance(ts, str) else "", op=op, data=data, more=more)


def iter_records(
    directory: Path,
    from_seq: int = 0,
    to_seq: int | None = None,
    stats: ReadStats | None = None,
) -> Iterator[WalRecord]:
    """Yield the stream's records with `from_seq <= seq <= to_seq`, file by file in seq order."""
    stats = stats if stats is not None else ReadStats()
    files = ordered_files(directory)
    stats.files_total = len(files)
    batch: list[WalRecord] = []  # a multi-line batch, held back until its last line
    for path in files:
        stats.files_processed += 1
        data = path.read_bytes()
        lines = data.split(b"\n")
        last = len(lines) - 1
        for index, raw in enumerate(lines):
            if not raw.strip():
                continue
            record = parse_line(raw)
            if record is None:
                if index == last:  # no trailing newline: a torn write
                    stats.torn_tail += 1
                else:
                    stats.unparseable += 1
                    if len(stats.unparseable_samples) < 5:
                        stats.unparseable_samples.append(f"{path.name}:{index + 1}")
                continue
            if batch and not (
                record.seq == batch[-1].seq + 1 and record.more == batch[-1].more - 1
            ):
                stats.incomplete_batch_lines += len(batch)  # its last line never came
                batch = []
            if record.more or batch:
                batch.append(record)
                if record.more:
                    continue
            whole, batch = (batch or [record]), []
            for rec in whole:
                if rec.seq >= from_seq and (to_seq is None or rec.seq <= to_seq):
                    yield rec
        stats.incomplete_batch_lines += len(batch)  # a batch never spans two files
        batch = []
