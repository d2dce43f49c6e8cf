"""Named WAL positions ("checkpoints", "marks") of one group's stream (docs/api.md §checkpoints).

    <group wal dir>/.checkpoints/<name>/g1.create.json  {"name", "seq", "created_at_ms", "wal_generation"}
    <group wal dir>/.checkpoints/<name>/g1.delete.json  {"name", "deleted_at_ms"}
    <group wal dir>/.checkpoints/<name>/g2.create.json  a re-creation after the deletion

Pure filesystem: no database, no locks. The active mark of a name is its highest generation N
whose create record parses and has no delete record. Records are written once with exclusive
create (O_EXCL), fsynced, and the directory is fsynced; nothing is ever rewritten or removed, so
two racing creators (or deleters) cannot both succeed: the loser's O_EXCL fails.

A create record that no longer parses (a damaged disk, a hand edit) is found at startup
(`damaged_marks`) and rebuilt from the WAL (`rebuild_mark`): the record is written once and never
touched again, so its file's modification time is its creation time, and the mark's seq is the
last WAL line appended before it (marks are taken under the write lock, at the applied position,
which is the end of the stream then). The damaged file is kept beside it as
`gN.create.json.corrupt-<UTC time>`; the engine reports both in knowledge_status.

Reachability (§2.40): a mark with seq null is reachable; seq n is reachable iff the stream still
starts at seq 0 and reaches n; any mark is unreachable when its generation and the stream's
current one are both known and differ (the stream was replaced since).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
import time
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from lcg.errors import ConflictError, InvalidRequestError, NotFoundError, WalError
from lcg.fsmodes import open_private, private_dir
from lcg.timeutil import from_wal
from lcg.wal.layout import GENERATION_FILE, fsync_dir, read_bounds, read_generation
from lcg.wal.reader import iter_records

__all__ = [
    "CHECKPOINTS_DIR",
    "CheckpointExistsError",
    "CheckpointNameError",
    "CheckpointNotFoundError",
    "DamagedMark",
    "Mark",
    "MarkStatus",
    "create_mark",
    "damaged_marks",
    "delete_mark",
    "list_marks",
    "read_active",
    "rebuild_mark",
    "validate_name",
]

CHECKPOINTS_DIR = ".checkpoints"
_NAME = re.compile(r"[A-Za-z0-9_-]{1,200}")
_RECORD = re.compile(r"g([1-9][0-9]*)\.(create|delete)\.json")


def debug_quote(text: str) -> str:
    """`text` quoted the way the reference renders names in messages (Rust's `{:?}`)."""
    out = ['"']
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\0":
            out.append("\\0")
        elif unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"):
            out.append(f"\\u{{{ord(ch):x}}}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


class CheckpointNameError(InvalidRequestError):
    """The name is not 1-200 characters of [A-Za-z0-9_-]."""

    wire_prefix: ClassVar[str] = ""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"invalid checkpoint name {debug_quote(name)}: must be 1-200 chars of [A-Za-z0-9_-]",
            field="name",
        )


class CheckpointExistsError(ConflictError):
    """An active mark of this name exists in the group."""

    wire_prefix: ClassVar[str] = ""

    def __init__(self, name: str) -> None:
        super().__init__(f"checkpoint {debug_quote(name)} already exists")


class CheckpointNotFoundError(NotFoundError):
    """No active mark of this name in the group (never created, or already deleted)."""

    wire_prefix: ClassVar[str] = ""

    def __init__(self, name: str) -> None:
        super().__init__("checkpoint", name, f"checkpoint {debug_quote(name)} not found")


def validate_name(name: str) -> str:
    """Raises CheckpointNameError unless `name` is 1-200 chars of [A-Za-z0-9_-]."""
    if not _NAME.fullmatch(name):
        raise CheckpointNameError(name)
    return name


@dataclass(frozen=True)
class Mark:
    """An active mark as recorded."""

    name: str
    generation_number: int  # the N of gN.create.json
    seq: int | None
    created_at_ms: int
    wal_generation: str | None


@dataclass(frozen=True)
class MarkStatus:
    """A mark with its reachability against the stream as it is now."""

    mark: Mark
    reachable: bool
    wal_min_seq: int | None
    wal_max_seq: int | None
    wal_generation: str | None

    def to_wire(self) -> dict[str, Any]:
        return {
            "name": self.mark.name,
            "seq": self.mark.seq,
            "reachable": self.reachable,
            "wal_min_seq": self.wal_min_seq,
            "wal_max_seq": self.wal_max_seq,
            "generation": self.mark.wal_generation,
        }


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _scan(mark_dir: Path) -> tuple[int, set[int], set[int]]:
    """(highest generation over both kinds, generations with a create, with a delete)."""
    creates: set[int] = set()
    deletes: set[int] = set()
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        for child in mark_dir.iterdir():
            m = _RECORD.fullmatch(child.name)
            if m:
                (creates if m.group(2) == "create" else deletes).add(int(m.group(1)))
    return max(creates | deletes, default=0), creates, deletes


def _read_create(path: Path, name: str, number: int) -> Mark | None:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(value, dict):
        return None
    seq = value.get("seq")
    if seq is not None and (not isinstance(seq, int) or isinstance(seq, bool) or seq < 0):
        return None
    created = value.get("created_at_ms", 0)
    generation = value.get("wal_generation")
    return Mark(
        name=name,
        generation_number=number,
        seq=seq,
        created_at_ms=created if isinstance(created, int) and not isinstance(created, bool) else 0,
        wal_generation=generation if isinstance(generation, str) and generation.strip() else None,
    )


def read_active(group_dir: Path, name: str) -> Mark | None:
    """The active mark of `name`: the highest generation, if created, parsed and not deleted."""
    mark_dir = group_dir / CHECKPOINTS_DIR / name
    top, creates, deletes = _scan(mark_dir)
    if top == 0 or top in deletes or top not in creates:
        return None
    return _read_create(mark_dir / f"g{top}.create.json", name, top)


def _write_exclusive(path: Path, record: dict[str, Any]) -> None:
    """Create `path` with O_EXCL, write and fsync it, then fsync its directory.

    Raises:
        FileExistsError: the record exists already (a racing writer won).
        WalError: any other I/O failure (a partial file is removed).
    """
    data = json.dumps(record, separators=(",", ":")).encode()
    try:
        fd = open_private(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    except FileExistsError:
        raise
    except OSError as exc:
        raise WalError(f"{path}: {exc}") from exc
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        fsync_dir(path.parent)
    except OSError as exc:
        with contextlib.suppress(OSError):
            path.unlink()
        raise WalError(f"{path}: {exc}") from exc


def create_mark(
    group_dir: Path,
    name: str,
    seq: int | None,
    wal_generation: str | None,
    *,
    now_ms: int | None = None,
) -> Mark:
    """Record mark `name` at `seq` (None: nothing applied) for the stream in `group_dir`.

    Raises:
        CheckpointNameError: invalid name.
        CheckpointExistsError: an active mark of that name exists.
        WalError: the record could not be written.
    """
    validate_name(name)
    store = group_dir / CHECKPOINTS_DIR
    mark_dir = store / name
    try:
        for directory in (group_dir, store, mark_dir):
            if not directory.is_dir():
                private_dir(directory)
                fsync_dir(directory.parent)
    except OSError as exc:
        raise WalError(f"{mark_dir}: {exc}") from exc
    top, _, deletes = _scan(mark_dir)
    # Highest generation deleted (or none yet): the next one. Active (or a create record that
    # does not parse): the same one, so the exclusive create fails as "already exists".
    number = top + 1 if top == 0 or top in deletes else top
    created = now_ms if now_ms is not None else _now_ms()
    record = {"name": name, "seq": seq, "created_at_ms": created, "wal_generation": wal_generation}
    try:
        _write_exclusive(mark_dir / f"g{number}.create.json", record)
    except FileExistsError:
        raise CheckpointExistsError(name) from None
    return Mark(name, number, seq, created, wal_generation)


def delete_mark(group_dir: Path, name: str, *, now_ms: int | None = None) -> Mark:
    """Tombstone the active mark `name`; its create record is left as it is. Returns it.

    Raises:
        CheckpointNameError: invalid name.
        CheckpointNotFoundError: no active mark of that name.
        WalError: the tombstone could not be written.
    """
    validate_name(name)
    mark = read_active(group_dir, name)
    if mark is None:
        raise CheckpointNotFoundError(name)
    record = {"name": name, "deleted_at_ms": now_ms if now_ms is not None else _now_ms()}
    try:
        _write_exclusive(
            group_dir / CHECKPOINTS_DIR / name / f"g{mark.generation_number}.delete.json", record
        )
    except FileExistsError:
        raise CheckpointNotFoundError(name) from None  # a racing delete won
    return mark


def reachable(
    seq: int | None,
    mark_generation: str | None,
    min_seq: int | None,
    max_seq: int | None,
    current_generation: str | None,
) -> bool:
    """Whether replaying the stream as it is now can reproduce the marked state (§2.40)."""
    if (
        mark_generation is not None
        and current_generation is not None
        and mark_generation != current_generation
    ):
        return False
    if seq is None:
        return True
    return min_seq == 0 and max_seq is not None and seq <= max_seq


def list_marks(group_dir: Path) -> list[MarkStatus]:
    """Every active mark of the stream, sorted by name, with its reachability."""
    store = group_dir / CHECKPOINTS_DIR
    if not store.is_dir():
        return []
    marks = []
    for child in sorted(store.iterdir(), key=lambda p: p.name):
        if child.is_dir() and _NAME.fullmatch(child.name):
            mark = read_active(group_dir, child.name)
            if mark is not None:
                marks.append(mark)
    if not marks:
        return []
    bounds = read_bounds(group_dir)
    generation = read_generation(group_dir)
    return [
        MarkStatus(
            mark,
            reachable(mark.seq, mark.wal_generation, bounds.min_seq, bounds.max_seq, generation),
            bounds.min_seq,
            bounds.max_seq,
            generation,
        )
        for mark in marks
    ]


# -- damaged records -------------------------------------------------------------------------


@dataclass(frozen=True)
class DamagedMark:
    """An active mark whose create record does not parse (its content is lost)."""

    name: str
    path: Path
    generation_number: int


def damaged_marks(group_dir: Path) -> list[DamagedMark]:
    """The marks of the stream whose newest record is a create record that does not parse."""
    store = group_dir / CHECKPOINTS_DIR
    if not store.is_dir():
        return []
    found = []
    for child in sorted(store.iterdir(), key=lambda p: p.name):
        if not (child.is_dir() and _NAME.fullmatch(child.name)):
            continue
        top, creates, deletes = _scan(child)
        path = child / f"g{top}.create.json"
        if top in creates and top not in deletes and _read_create(path, child.name, top) is None:
            found.append(DamagedMark(child.name, path, top))
    return found


def rebuild_mark(group_dir: Path, damaged: DamagedMark) -> Mark | None:
    """Rewrite a damaged create record from the WAL; None when the WAL cannot tell its seq.

    A `seq` (and `created_at_ms`) the damaged text still holds outright is kept. Otherwise the
    record's modification time is when the mark was taken; its seq is the last line
    appended before then (None when there was none: the group was empty), which the stream
    can tell only if it still starts at seq 0, or its first line is older than the mark. The
    generation is the stream's own if its generation file is older than the mark (else the
    stream was replaced since, and the mark's generation is unknown). The damaged file is
    renamed to `<name>.corrupt-<UTC time>`, and the rebuilt record carries `"rebuilt": true`.

    Raises:
        WalError: the record could not be replaced.
    """
    try:
        made = damaged.path.stat().st_mtime_ns
        text = damaged.path.read_bytes().decode("utf-8", "replace")
    except OSError as exc:
        raise WalError(f"{damaged.path}: {exc}") from exc
    # What the damaged text still says outright wins over the file's time (a hand edit moves it).
    if (found := _SALVAGE_MS.search(text)) is not None:
        made = int(found.group(1)) * 1_000_000
    taken = dt.datetime.fromtimestamp(made / 1e9, dt.UTC)
    named = _SALVAGE_GEN.search(text)
    generation = named.group(1) if named is not None else None
    salvaged = _SALVAGE_SEQ.search(text)
    if salvaged is not None:
        seq = None if salvaged.group(1) == "null" else int(salvaged.group(1))
        return _rewrite(group_dir, damaged, seq, made, generation)
    seq = None
    first = True
    for record in iter_records(group_dir):
        stamp = from_wal(record.ts) if record.ts else None
        if first and record.seq != 0 and (stamp is None or stamp > taken):
            return None  # lines before the mark may have been lost: its seq is unknown
        first = False
        if stamp is None:
            return None
        if stamp > taken:
            break
        seq = record.seq
    return _rewrite(group_dir, damaged, seq, made, generation)


_SALVAGE_SEQ = re.compile(r'"seq"\s*:\s*(null|[0-9]+)\s*[,}]')
_SALVAGE_MS = re.compile(r'"created_at_ms"\s*:\s*([0-9]{1,15})\s*[,}]')
_SALVAGE_GEN = re.compile(r'"wal_generation"\s*:\s*"([0-9a-f-]{36})"')


def _rewrite(
    group_dir: Path, damaged: DamagedMark, seq: int | None, made: int, generation: str | None
) -> Mark:
    """Keep the damaged record aside and write its rebuilt content in its place."""
    if generation is None:
        generation = read_generation(group_dir)
        with contextlib.suppress(OSError):
            if (group_dir / GENERATION_FILE).stat().st_mtime_ns > made:
                generation = None
    stamp_text = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    try:
        os.replace(
            damaged.path, damaged.path.with_name(f"{damaged.path.name}.corrupt-{stamp_text}")
        )
    except OSError as exc:
        raise WalError(f"{damaged.path}: {exc}") from exc
    record_out = {
        "name": damaged.name,
        "seq": seq,
        "created_at_ms": made // 1_000_000,
        "wal_generation": generation,
        "rebuilt": True,
    }
    _write_exclusive(damaged.path, record_out)
    return Mark(damaged.name, damaged.generation_number, seq, made // 1_000_000, generation)
