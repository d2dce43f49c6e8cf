"""Reading a group's stream back: records in seq order, with honest counts of what was skipped.

Reading never modifies files, and yields only whole batches. A line that is not valid JSON, not
a `{seq, ts, op, data}` record, or one that fails its checksum (`lcg.wal.records`), is counted (`unparseable`) and passed over; a final line
with no newline is a torn write that was never acknowledged and is counted as `torn_tail`, as are
the lines of a batch whose last line never arrived (`incomplete_batch_lines`).

A batch with an unreadable line is never yielded, not even its readable lines: each line says
where its batch ends (`seq + more`), so once a batch is known to have lost a line every other
line ending at the same seq is passed over too. A batch whose first readable line follows an
unreadable one is whole only if its seq is the very next one (the unreadable lines held no seq);
otherwise its head may be among them and it is passed over. Each batch passed over this way is
recorded in `ReadStats.lost` with its file and seq range (`corrupt_batch_lines` counts its
readable lines). Seqs that no line holds at all between two readable batches (a file deleted,
lines cut out of one) are recorded in `ReadStats.gaps`.

A line whose operation this version does not know (`unrecognised`; a newer lcg's, or damage
that left valid JSON) cannot be applied, so its batch is passed over the same way: recorded in
`lost`, its other lines counted in `corrupt_batch_lines`; applying the rest of the batch would
leave the graph in a state that never existed.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from lcg.wal.layout import ordered_files
from lcg.wal.records import OPS, CommitMark, WalRecord, line_intact, made

__all__ = ["LostBatch", "ReadStats", "iter_records", "parse_line"]


@dataclass(eq=False)
class LostBatch:
    """A batch not yielded because at least one of its lines could not be read.

    `first_seq` is None when the unreadable lines came first in the stream (where the batch
    began is unknown); `last_seq` is None when the stream or file ended before any line of the
    batch could be read.
    """

    file: str
    first_seq: int | None
    last_seq: int | None
    lines_dropped: int = 0  # readable lines of the batch that were passed over with it

    def to_wire(self) -> dict[str, object]:
        return {
            "file": self.file,
            "first_seq": self.first_seq,
            "last_seq": self.last_seq,
            "readable_lines_dropped": self.lines_dropped,
        }


@dataclass
class ReadStats:
    """What a read saw besides the records it yielded."""

    files_total: int = 0
    files_processed: int = 0
    unparseable: int = 0
    torn_tail: int = 0
    incomplete_batch_lines: int = 0
    corrupt_batch_lines: int = 0
    unrecognised: int = 0  # lines with an operation this version does not know
    unparseable_samples: list[str] = field(default_factory=list)
    lost: list[LostBatch] = field(default_factory=list)
    # (file, first, last): seqs no line of the stream holds, readable or not, between two
    # readable batches (a file missing, lines cut out): nothing there can be applied.
    gaps: list[tuple[str, int, int]] = field(default_factory=list)


def parse_line(line: bytes) -> WalRecord | None:
    """A record, or None when the line is not one (not JSON, not a record, or a record that
    fails its checksum: `lcg.wal.records.line_intact`)."""
    line = line.rstrip(b"\r\n")  # the same object when there is nothing to strip
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if type(value) is not dict or not line_intact(line, value):  # orjson makes exact dicts
        return None
    get = value.get
    seq, op, data, more = get("seq"), get("op"), get("data"), get("more", 0)
    if type(seq) is not int or seq < 0 or type(op) is not str or type(data) is not dict:
        return None
    if type(more) is not int or more < 0:
        return None
    at = get("at")
    if at is not None and (type(at) is not int or not 0 <= at <= seq):
        return None
    ts = get("ts")
    commit = CommitMark.from_json(value["commit"]) if "commit" in value else None
    return made(
        WalRecord,
        {
            "seq": seq,
            "ts": ts if type(ts) is str else "",
            "op": op,
            "data": data,
            "more": more,
            "at": at,
            "commit": commit,
        },
    )


class _Stream:
    """The state of one read across the stream's files (see the module docstring)."""

    def __init__(self, stats: ReadStats) -> None:
        self.stats = stats
        self.batch: list[WalRecord] = []  # a multi-line batch, held back until its last line
        self.next_seq: int | None = None  # the seq after the last readable line's batch
        self.bad_run = False  # the previous non-blank line of this file was unreadable
        self.expected: int | None = None  # `next_seq` when the current bad run began
        self.open_loss: LostBatch | None = None  # unreadable lines whose batch is not known yet
        self.poisoned: dict[int, LostBatch] = {}  # batch end seq -> its loss
        self.unknown_end = False  # unreadable lines ended the previous file: their seqs unknown

    def _drop(self, loss: LostBatch) -> None:
        if not any(seen is loss for seen in self.stats.lost):
            self.stats.lost.append(loss)

    def unreadable(self, path: Path) -> None:
        if self.bad_run:
            return
        self.bad_run, self.expected = True, self.next_seq
        if self.batch:  # the batch in progress lost a line: none of it is applied
            end = self.batch[-1].seq + self.batch[-1].more
            loss = LostBatch(path.name, self.batch[0].seq, end, len(self.batch))
            self.poisoned[end] = loss
            self._drop(loss)
            self.stats.corrupt_batch_lines += len(self.batch)
            self.batch = []
        else:
            self.open_loss = LostBatch(path.name, self.next_seq, None)

    def readable(self, path: Path, record: WalRecord) -> list[WalRecord]:
        """The whole batch `record` completes, if any."""
        batch, more = self.batch, record.more
        if batch and not (self.bad_run or self.poisoned or self.open_loss is not None):
            # The next line of an undamaged batch, by far the commonest case: what the general
            # path below does with it, with nothing to record.
            tail = batch[-1]
            if (
                record.seq == tail.seq + 1
                and more == tail.more - 1
                and (record.at is None or record.at == len(batch))
            ):
                self.next_seq = record.seq + more + 1
                batch.append(record)
                if more:
                    return []
                self.batch = []
                return batch
        end = record.seq + record.more
        began = record.seq - (record.at or 0)  # where its batch began, as far as it says
        if (
            not (self.batch or self.bad_run or self.unknown_end or self.open_loss is not None)
            and self.next_seq is not None
            and began > self.next_seq
        ):
            self.stats.gaps.append((path.name, self.next_seq, began - 1))
        self.unknown_end = False
        if self.batch and not (
            record.seq == self.batch[-1].seq + 1
            and record.more == self.batch[-1].more - 1
            and (record.at is None or record.at == len(self.batch))
        ):
            self.stats.incomplete_batch_lines += len(self.batch)  # its last line never came
            # Any later line ending where it ends (a `more` damaged into another valid number)
            # belongs to it: not a batch either.
            head, tail = self.batch[0], self.batch[-1]
            self.poisoned.setdefault(
                tail.seq + tail.more, LostBatch(path.name, head.seq, tail.seq + tail.more)
            )
            self.batch = []
        bad_run, self.bad_run = self.bad_run, False
        loss, self.open_loss = self.open_loss, None
        if not self.batch and end not in self.poisoned:
            first: int | None
            if record.at is not None:  # the line says where its batch began
                head_lost, first = record.at > 0, record.seq - record.at
            else:  # an older line: after unreadable ones, only seq continuity vouches for it
                expected = self.expected if self.expected is not None else 0
                head_lost, first = bad_run and record.seq != expected, self.expected
            if head_lost:
                loss = loss or LostBatch(path.name, first, end)
                loss.first_seq, loss.last_seq = first, end
                self.poisoned[end] = loss
                self._drop(loss)
            elif loss is not None and bad_run and record.seq != self.expected:
                loss.last_seq = record.seq - 1  # whole batches of their own were unreadable
                self._drop(loss)
        self.next_seq = end + 1
        loss = self.poisoned.get(end)
        if loss is not None:
            self._drop(loss)
            loss.lines_dropped += 1
            self.stats.corrupt_batch_lines += 1
            return []
        if record.more or self.batch:
            self.batch.append(record)
            if record.more:
                return []
        whole, self.batch = (self.batch or [record]), []
        return whole

    def end_file(self) -> None:
        self.stats.incomplete_batch_lines += len(self.batch)  # a batch never spans two files
        self.batch = []
        if self.open_loss is not None:  # unreadable lines ended the file: their batch is lost
            self._drop(self.open_loss)
            self.open_loss = None
            self.unknown_end = True
        self.bad_run = False


def iter_records(
    directory: Path,
    from_seq: int = 0,
    to_seq: int | None = None,
    stats: ReadStats | None = None,
) -> Iterator[WalRecord]:
    """Yield the stream's records with `from_seq <= seq <= to_seq`, file by file in seq order;
    a batch that ends after `to_seq` is left out whole.

    `stats.lost` holds only the losses that may overlap `[from_seq, to_seq]`.
    """
    stats = stats if stats is not None else ReadStats()
    files = ordered_files(directory)
    stats.files_total = len(files)
    state = _Stream(stats)
    for path in files:
        stats.files_processed += 1
        data = path.read_bytes()
        lines = data.split(b"\n")
        last = len(lines) - 1
        for index, raw in enumerate(lines):
            if not raw or raw.isspace():
                continue
            record = parse_line(raw)
            if record is None:
                if index == last:  # no trailing newline: a torn write, never acknowledged
                    stats.torn_tail += 1
                    continue
                stats.unparseable += 1
                if len(stats.unparseable_samples) < 5:
                    stats.unparseable_samples.append(f"{path.name}:{index + 1}")
                state.unreadable(path)
                continue
            whole = state.readable(path, record)
            if not whole:
                continue
            if to_seq is not None and whole[-1].seq > to_seq:
                continue  # a batch ending past `to_seq`: the state in its middle never existed
            unknown = sum(1 for rec in whole if rec.op not in OPS)
            if unknown:  # a batch with a line that cannot be applied: none of it is
                stats.unrecognised += unknown
                stats.corrupt_batch_lines += len(whole) - unknown
                stats.lost.append(LostBatch(path.name, whole[0].seq, whole[-1].seq, len(whole)))
                continue
            for rec in whole:
                if rec.seq >= from_seq:
                    yield rec
        state.end_file()
    stats.lost = [
        loss
        for loss in stats.lost
        if (loss.last_seq is None or loss.last_seq >= from_seq)
        and (loss.first_seq is None or to_seq is None or loss.first_seq <= to_seq)
    ]
    stats.gaps = [
        gap for gap in stats.gaps if gap[2] >= from_seq and (to_seq is None or gap[1] <= to_seq)
    ]
