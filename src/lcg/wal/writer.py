"""Appending to the WAL: per-group streams with their own seq, rotation and durability.

Guarantees, for one group's stream:
- seq is strictly increasing across files and sessions; a new writer starts at max(seq) + 1, or
  further on when its owner knows of higher seqs the files lost (`GroupStream.skip_to`);
- one process writes a WAL root at a time (`Wal.lock`, `lcg.wal.lock`);
- one `append(ops)` is one batch: its lines are written with one `write`, flushed and fsynced
  once (group commit) and never span two files; when `append` returns, the batch is durable;
- a failed append leaves the file as it was (a partial write is truncated away) and raises;
- a torn final line left by a crash is cut off when the stream is opened, and reported;
- the seq of the stream's first line is recorded before it is written (`.wal-start.json`), so
  a stream that later lost its head is known to have (`lcg.wal.layout.start_gap`);
- a commit that spans several groups appends one batch per group, each marked with the seqs
  of all of them (`Wal.plan_commit`); a crash between two of those appends leaves some groups
  with their batch and others without: `Wal.open_all` cuts the batches of such a commit from
  every stream that has one, and reports each cut as a torn tail (never applied by halves).

Callers serialise appends (the engine's write lock); this module takes no locks of its own.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from lcg.errors import ConflictError, WalError
from lcg.fsmodes import open_private, private_dir
from lcg.timeutil import to_wal
from lcg.wal import lock
from lcg.wal.layout import (
    Bounds,
    adopt_start,
    ensure_generation,
    fsync_dir,
    group_dir,
    list_groups,
    ordered_files,
    read_bounds,
    read_generation,
    write_start,
)
from lcg.wal.reader import parse_line
from lcg.wal.records import CommitMark, Op, WalRecord, encode_batch

__all__ = ["GroupStream", "TornTail", "Wal", "cut_torn_commits"]


@dataclass(frozen=True)
class TornTail:
    """A partial last line found (and removed) when a stream was opened.

    `first_seq` is the seq the first line cut held or would have held: the stream's next seq.
    """

    group_id: str
    path: Path
    bytes_dropped: int
    lines: int = 1
    first_seq: int | None = None
    # Set when the lines cut were one group's batch of a multi-group commit that did not reach
    # every group's stream: the groups of that commit.
    commit_groups: tuple[str, ...] = ()

    def to_wire(self) -> dict[str, object]:
        """Its entry in `knowledge_status.wal_problems` (besides the group and the kind)."""
        wire: dict[str, object] = {
            "file": self.path.name,
            "first_seq": self.first_seq,
            "last_seq": None,
            "bytes_dropped": self.bytes_dropped,
            "lines": self.lines,
        }
        if self.commit_groups:
            wire["commit_groups"] = list(self.commit_groups)
        return wire


def repair_torn_tail(group_id: str, directory: Path) -> TornTail | None:
    """Cut an unterminated or unparseable final line from the stream's last file.

    A crash can also cut a batch's single write short after some of its lines (the kernel
    stops a write at a page boundary on SIGKILL, possibly exactly between two lines). Those
    lines were never acknowledged either, and replaying them would apply the batch by halves:
    when the last whole line still announces `more` lines of its batch, the batch is cut back
    to its first line.

    Empty files are passed over: a crash between a rotation's file creation and its first
    write leaves one, which sorts last (it has no first seq) and would hide later torn tails.
    """
    files = [p for p in ordered_files(directory) if p.stat().st_size > 0]
    if not files:
        return None
    path = files[-1]
    data = path.read_bytes()
    if not data:
        return None
    keep, lines = len(data), 0
    if not data.endswith(b"\n"):  # an unterminated last line
        keep, lines = data.rfind(b"\n") + 1, 1
    elif (tail := data[:-1].rsplit(b"\n", 1)[-1]).strip() and parse_line(tail) is None:
        # a terminated but garbled last line
        keep, lines = data[:-1].rfind(b"\n") + 1, 1
    # Walk back over whole lines that belong to an unfinished batch.
    expect: int | None = None  # the `more` the previous line of the batch must carry
    while keep > 0:
        start = data.rfind(b"\n", 0, keep - 1) + 1
        record = parse_line(data[start : keep - 1])
        if record is None or record.more != (expect if expect is not None else max(record.more, 1)):
            break
        keep, lines, expect = start, lines + 1, record.more + 1
    if lines == 0:
        return None
    with path.open("r+b") as fh:
        fh.truncate(keep)
        fh.flush()
        os.fsync(fh.fileno())
    return TornTail(group_id, path, len(data) - keep, lines)


def _tail_batch(directory: Path) -> tuple[Path, int, list[WalRecord]] | None:
    """The stream's last batch, when whole and written with `at` places: (its file, the offset
    of its first line, its records)."""
    files = [p for p in ordered_files(directory) if p.stat().st_size > 0]
    if not files:
        return None
    path = files[-1]
    data = path.read_bytes()
    end = len(data)
    records: list[WalRecord] = []
    while end > 0:
        start = data.rfind(b"\n", 0, end - 1) + 1
        record = parse_line(data[start : end - 1])
        if record is None or record.at is None or record.more != len(records):
            return None
        records.insert(0, record)
        if record.at == 0:
            return path, start, records
        end = start
    return None


def cut_torn_commits(root: Path, groups: list[str]) -> list[TornTail]:
    """Cut every multi-group commit that did not reach all its groups' streams.

    A commit's batches are appended group by group, each head line marked with the seqs of all
    of them (`Wal.plan_commit`), and only then committed to the database: a crash between two
    appends leaves the first groups with a durable batch that was never acknowledged, and the
    others without. Such a batch can only be its stream's last (a crash ends the appends, and
    the next process runs this before appending), so each group's last batch is checked: its
    commit is whole when every group it names holds its seqs. The batches of a commit that is
    not are cut from their streams (the database never committed them), each reported as a torn
    tail naming the commit's groups. Run after each stream's own torn tail is cut.
    """
    cut: list[TornTail] = []
    while True:  # a commit with two batches in one group leaves the earlier one as the new tail
        tails = {g: tail for g in groups if (tail := _tail_batch(group_dir(root, g))) is not None}
        max_seqs = {g: read_bounds(group_dir(root, g)).max_seq for g in groups}
        found = False
        for group_id, (path, start, records) in tails.items():
            mark = records[0].commit
            if mark is None or all(
                (held := max_seqs.get(g)) is not None and held >= last
                for g, (_, last) in mark.groups.items()
            ):
                continue
            size = path.stat().st_size
            with path.open("r+b") as fh:
                fh.truncate(start)
                fh.flush()
                os.fsync(fh.fileno())
            cut.append(
                TornTail(
                    group_id,
                    path,
                    size - start,
                    len(records),
                    records[0].seq,
                    tuple(sorted(mark.groups)),
                )
            )
            found = True
        if not found:
            return cut


class GroupStream:
    """The append side of one group's stream."""

    def __init__(self, group_id: str, directory: Path, max_bytes: int, max_events: int) -> None:
        self.group_id = group_id
        self.directory = directory
        self.max_bytes = max_bytes
        self.max_events = max_events
        private_dir(directory)
        self.generation = ensure_generation(directory)
        torn = repair_torn_tail(group_id, directory)
        bounds = read_bounds(directory)
        self.next_seq = 0 if bounds.max_seq is None else bounds.max_seq + 1
        self._started = bounds.max_seq is not None  # the start record is written, or adopted
        if self._started:
            adopt_start(directory)
        self.torn_tail = None if torn is None else replace(torn, first_seq=self.next_seq)
        self._session = secrets.token_hex(3)
        self._counter = 0
        self._file: BinaryIO | None = None
        self._path: Path | None = None
        self._events = 0
        self._bytes = 0
        self.rotations = 0
        self.rotated: list[
            tuple[Path, Path | None]
        ] = []  # (closed file, new file), drained by the owner
        self._last_append: tuple[int, int, int, int] | None = None

    def _open_new_file(self) -> None:
        self.close()
        stamp = datetime.now(UTC).strftime("%Y%m%d_%H%M%S")
        path = self.directory / f"{stamp}_{self._session}_{self._counter:04d}.jsonl"
        self._counter += 1
        self._file = os.fdopen(open_private(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT), "ab")
        self._path = path
        self._events = 0
        self._bytes = 0
        fsync_dir(self.directory)

    def append(self, ops: list[Op], commit: CommitMark | None = None) -> tuple[int, int]:
        """Write `ops` as one durable batch; return the first and last seq assigned. `commit`
        marks the batch as one group's part of a multi-group commit (`Wal.plan_commit`).

        Raises:
            WalError: the batch could not be written (nothing of it remains on disk).
        """
        if not ops:
            raise ValueError("empty batch")
        ts = to_wal(datetime.now(UTC)) or ""
        first = self.next_seq
        blob = b"".join(encode_batch(first, ts, ops, commit))
        if self._file is None or (
            self._events > 0
            and (
                self._events + len(ops) > self.max_events
                or (self.max_bytes > 0 and self._bytes + len(blob) > self.max_bytes)
            )
        ):
            previous = self._path
            self._open_new_file()
            if previous is not None:
                self.rotations += 1
                self.rotated.append((previous, self._path))
        assert self._file is not None
        if not self._started:  # before the first line: a head lost later is then known
            try:
                write_start(self.directory, first)
            except OSError as exc:
                raise WalError(f"{self.directory}: {exc}") from exc
            self._started = True
        start = self._file.tell()
        try:
            self._file.write(blob)
            self._file.flush()
            os.fsync(self._file.fileno())
        except OSError as exc:
            with contextlib.suppress(OSError):
                self._file.truncate(start)
                self._file.flush()
            raise WalError(f"{self._path}: {exc}") from exc
        self._events += len(ops)
        self._bytes += len(blob)
        self.next_seq = first + len(ops)
        self._last_append = (first, start, len(ops), len(blob))
        return first, self.next_seq - 1

    def skip_to(self, seq: int) -> None:
        """Never hand out a seq below `seq`: the database has applied seqs the WAL has lost,
        and a seq once acknowledged names that write forever."""
        self.next_seq = max(self.next_seq, seq)

    def truncate_from(self, first_seq: int) -> None:
        """Undo the most recent append (whose first seq is `first_seq`): a rolled-back commit.

        Raises:
            WalError: that append is not the most recent one, or the file cannot be truncated.
        """
        last = self._last_append
        if last is None or last[0] != first_seq or self._file is None:
            raise WalError(f"cannot undo WAL append at seq {first_seq}: not the latest batch")
        first, start, count, size = last
        try:
            self._file.truncate(start)
            self._file.seek(start)
            self._file.flush()
            os.fsync(self._file.fileno())
        except OSError as exc:
            raise WalError(f"{self._path}: {exc}") from exc
        self._events -= count
        self._bytes -= size
        self.next_seq = first
        self._last_append = None

    def close(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None


class Wal:
    """The WAL root: one lazily opened `GroupStream` per group."""

    def __init__(self, root: Path, max_bytes: int = 5_242_880, max_events: int = 10_000) -> None:
        self.root = root
        self.max_bytes = max_bytes
        self.max_events = max_events
        self._streams: dict[str, GroupStream] = {}
        self._lock: Path | None = None

    def lock(self) -> None:
        """Become the one writing process of this WAL root (idempotent; see `lcg.wal.lock`).

        Raises:
            WalLockedError: another process writes to it.
        """
        if self._lock is None:
            self._lock = lock.acquire(self.root)

    def unlock(self) -> None:
        """Give the WAL root up (the streams must be closed first)."""
        if self._lock is not None:
            lock.release(self._lock)
            self._lock = None

    def directory(self, group_id: str) -> Path:
        return group_dir(self.root, group_id)

    def stream(self, group_id: str) -> GroupStream:
        """The group's stream, creating its directory (and generation) on first use.

        Raises:
            ConflictError: a sibling directory differs from this group's only by case.
        """
        stream = self._streams.get(group_id)
        if stream is None:
            directory = self.directory(group_id)
            if not directory.exists() and self.root.is_dir():
                clash = [
                    c.name for c in self.root.iterdir() if c.name.lower() == directory.name.lower()
                ]
                if clash:
                    raise ConflictError(
                        f'group_id "{group_id}": WAL directory collides case-insensitively with {clash[0]!r}'
                    )
            stream = GroupStream(group_id, directory, self.max_bytes, self.max_events)
            self._streams[group_id] = stream
        return stream

    def append(self, group_id: str, ops: list[Op]) -> tuple[int, int]:
        return self.stream(group_id).append(ops)

    def plan_commit(self, parts: list[tuple[str, int]]) -> CommitMark | None:
        """The mark for a commit that appends, in this order, batches of `parts` (group, number
        of lines): the seqs each group's batches will take. None for a one-batch commit, which
        needs none (its single append is all or nothing). The appends must follow with no other
        append in between (the caller holds the write lock)."""
        if len(parts) < 2:
            return None
        upcoming: dict[str, int] = {}
        groups: dict[str, tuple[int, int]] = {}
        for group_id, lines in parts:
            first = upcoming.get(group_id, self.stream(group_id).next_seq)
            upcoming[group_id] = first + lines
            groups[group_id] = (groups.get(group_id, (first, first))[0], first + lines - 1)
        return CommitMark(secrets.token_hex(8), groups)

    def drop_stream(self, group_id: str) -> None:
        """Forget a group's writer so the next append re-reads the directory (after a rebuild)."""
        stream = self._streams.pop(group_id, None)
        if stream is not None:
            stream.close()

    def open_all(self) -> list[TornTail]:
        """Open every existing group's stream (repairing torn tails); return the repairs."""
        torn = []
        groups = list_groups(self.root)
        for group in groups:
            stream = self.stream(group)
            if stream.torn_tail is not None:
                torn.append(stream.torn_tail)
        for cut in cut_torn_commits(self.root, groups):
            self.drop_stream(cut.group_id)  # its next seq is the first one cut
            torn.append(cut)
        return torn

    def groups(self) -> list[str]:
        return list_groups(self.root)

    def close_files(self) -> int:
        """Close every stream's current file (the next append starts a new one); return how
        many were open. Appends are already durable, so this only ends the files."""
        closed = 0
        for stream in self._streams.values():
            if stream._file is not None:
                stream.close()
                closed += 1
        return closed

    def generation(self, group_id: str) -> str | None:
        return read_generation(self.directory(group_id))

    def bounds(self, group_id: str) -> Bounds:
        directory = self.directory(group_id)
        return read_bounds(directory) if directory.is_dir() else Bounds(None, None)

    def close(self) -> None:
        for stream in self._streams.values():
            stream.close()
        self._streams.clear()
