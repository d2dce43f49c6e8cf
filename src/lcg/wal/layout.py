"""Where a group's stream lives on disk, and the sidecars that describe it (docs/api.md §disk).

    <wal_root>/<enc(group_id)>/<YYYYMMDD>_<HHMMSS>_<session>_<NNNN>.jsonl
    <wal_root>/<enc(group_id)>/.wal-generation.json   stream identity, minted once, never rewritten
    <wal_root>/<enc(group_id)>/.wal-bounds.json       min/max seq cache, safe to delete
    <wal_root>/<enc(group_id)>/.wal-problems.json     what is known lost or damaged in the stream
    <wal_root>/<enc(group_id)>/.wal-start.json        the seq the stream's first line took

Files are ordered by the seq of their first parseable line, not by name. Bounds are found from
each file's first and last parseable line, so they cost two small reads per file; the cache is
trusted only while its checksum holds, the file set and sizes it recorded still match and the
files it names still begin and end at the seqs it records (two small reads); otherwise the
bounds are derived from the WAL again.

The start record is written (checksummed, fsynced) before the stream's first line and never
rewritten: a stream whose first seq on disk is above it has lost its head (its first file
deleted, its first lines cut), which no gap between two files shows. No lcg command drops a
stream's old files; a stream written before the record existed gets one at its first open,
from the first seq it then holds (`adopt_start`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import uuid
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from lcg.errors import InvalidRequestError
from lcg.fsmodes import open_private
from lcg.wal.records import line_intact

__all__ = [
    "GENERATION_FILE",
    "PROBLEMS_FILE",
    "Bounds",
    "adopt_start",
    "decode_group",
    "encode_group",
    "ensure_generation",
    "file_gaps",
    "first_seq",
    "fsync_dir",
    "generation_damaged",
    "group_dir",
    "last_seq",
    "list_groups",
    "ordered_files",
    "read_bounds",
    "read_generation",
    "read_problems",
    "restore_generation",
    "start_gap",
    "write_problems",
    "write_start",
]

GENERATION_FILE = ".wal-generation.json"
BOUNDS_FILE = ".wal-bounds.json"
# Beside the stream, not in the database: deleting the database must not erase the record of
# what the WAL lost (a rebuild could not tell it again). Not `.jsonl`: never read as WAL.
PROBLEMS_FILE = ".wal-problems.json"
START_FILE = ".wal-start.json"
_PLAIN = re.compile(r"[A-Za-z0-9_-]{1,200}")  # always fullmatch: `$` matches before a \n
_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_TAIL_BYTES = 65536


def encode_group(group_id: str) -> str:
    """The directory name of a group: verbatim if plain, else %XX per byte outside the safe set.

    Raises:
        InvalidRequestError: the result would be empty or longer than 200 characters.
    """
    if _PLAIN.fullmatch(group_id):
        return group_id
    encoded = "".join(chr(b) if b in _SAFE else f"%{b:02X}" for b in group_id.encode())
    if not 1 <= len(encoded) <= 200:
        raise InvalidRequestError(
            f'invalid group_id "{group_id}": must be non-empty and map to a directory name of 1-200 chars',
            field="group_id",
        )
    return encoded


def decode_group(name: str) -> str | None:
    """The group id a directory name stands for, or None if it is not a group directory."""
    if "%" not in name:
        return name if _PLAIN.fullmatch(name) else None
    try:
        raw = bytearray()
        i = 0
        while i < len(name):
            if name[i] == "%":
                raw.append(int(name[i + 1 : i + 3], 16))
                i += 3
            else:
                raw.append(ord(name[i]))
                i += 1
        group = raw.decode()
    except (ValueError, IndexError):
        return None
    try:
        return group if encode_group(group) == name else None
    except InvalidRequestError:
        return None


def group_dir(root: Path, group_id: str) -> Path:
    return root / encode_group(group_id)


def list_groups(root: Path) -> list[str]:
    """Every group with a directory under the WAL root, sorted."""
    if not root.is_dir():
        return []
    groups = []
    for child in root.iterdir():
        if child.is_dir():
            group = decode_group(child.name)
            if group is not None:
                groups.append(group)
    return sorted(groups)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_generation(directory: Path) -> str | None:
    """The stream generation, or None when missing, unreadable or blank."""
    try:
        value = json.loads((directory / GENERATION_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    generation = value.get("generation") if isinstance(value, dict) else None
    return generation if isinstance(generation, str) and generation.strip() else None


def generation_damaged(directory: Path) -> bool:
    """Whether the stream has a generation file that does not parse (its id is lost)."""
    return (directory / GENERATION_FILE).exists() and read_generation(directory) is None


def restore_generation(directory: Path, generation: str) -> None:
    """Replace a damaged generation file with `generation` (known from a record that names it:
    the database's applied position, a mark); the damaged file is kept as
    `.wal-generation.json.corrupt-<UTC time>`."""
    import datetime as dt

    path = directory / GENERATION_FILE
    minted = path.stat()  # the restored file keeps its time: marks compare theirs with it
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    os.replace(path, directory / f"{GENERATION_FILE}.corrupt-{stamp}")
    tmp = directory / f"{GENERATION_FILE}.tmp-{uuid.uuid4()}"
    with os.fdopen(open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL), "w") as fh:
        json.dump({"generation": generation}, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.utime(tmp, ns=(minted.st_atime_ns, minted.st_mtime_ns))
    os.replace(tmp, path)
    fsync_dir(directory)


def ensure_generation(directory: Path) -> str | None:
    """Mint a generation for a directory with no WAL content yet; never overwrite one.

    Create-if-absent is atomic: a temp file is fsynced and hard-linked to the final name.
    A populated directory without a generation is left without one (its identity is unknown).
    """
    existing = read_generation(directory)
    if existing is not None or any(directory.glob("*.jsonl")):
        return existing
    tmp = directory / f"{GENERATION_FILE}.tmp-{uuid.uuid4()}"
    with os.fdopen(open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL), "w") as fh:
        json.dump({"generation": str(uuid.uuid4())}, fh)
        fh.flush()
        os.fsync(fh.fileno())
    try:
        os.link(tmp, directory / GENERATION_FILE)
    except FileExistsError:
        pass
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(directory)
    return read_generation(directory)


def _is_seq(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _seq_of(line: bytes) -> int | None:
    """The seq of a line that passes its checksum (a damaged seq must not order the files)."""
    line = line.rstrip(b"\r\n")
    try:
        value = json.loads(line)
    except ValueError:
        return None
    if not isinstance(value, dict) or not line_intact(line, value):
        return None
    seq = value.get("seq")
    return seq if isinstance(seq, int) and not isinstance(seq, bool) and seq >= 0 else None


def first_seq(path: Path) -> int | None:
    """The seq of a file's first parseable line."""
    try:
        with path.open("rb") as fh:
            for line in fh:
                seq = _seq_of(line)
                if seq is not None:
                    return seq
    except OSError:
        return None
    return None


def last_seq(path: Path) -> int | None:
    """The seq of a file's last parseable line (a torn final line is passed over)."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            block = min(size, _TAIL_BYTES)
            while True:
                fh.seek(size - block)
                lines = fh.read(block).split(b"\n")
                if block < size:
                    lines = lines[1:]  # the first piece may be the end of an earlier line
                for line in reversed(lines):
                    seq = _seq_of(line)
                    if seq is not None:
                        return seq
                if block >= size:
                    return None
                block = min(size, block * 4)
    except OSError:
        return None


def ordered_files(directory: Path) -> list[Path]:
    """The stream's `*.jsonl` files, by first seq (files with none last, by name)."""
    files = sorted(directory.glob("*.jsonl")) if directory.is_dir() else []
    keyed = [(first_seq(p), p.name, p) for p in files]
    keyed.sort(key=lambda k: (k[0] is None, k[0] if k[0] is not None else 0, k[1]))
    return [p for _, _, p in keyed]


@dataclass(frozen=True)
class Bounds:
    min_seq: int | None
    max_seq: int | None


def _fingerprint(names: list[str]) -> str:
    return hashlib.sha256("\n".join(sorted(names)).encode()).hexdigest()[:16]


def _manifest_crc(manifest: Mapping[str, object]) -> str:
    return f"{zlib.crc32(json.dumps(manifest, sort_keys=True).encode()):08x}"


def read_bounds(directory: Path, *, write_cache: bool = True) -> Bounds:
    """Min and max seq on disk, from the cache when it still matches, else recomputed."""
    files = sorted(directory.glob("*.jsonl")) if directory.is_dir() else []
    if not files:
        return Bounds(None, None)
    sizes = {p.name: p.stat().st_size for p in files}
    fingerprint = _fingerprint(list(sizes))
    cache_path = directory / BOUNDS_FILE
    # A cache of any other shape (valid JSON but not this object) is stale, never an error; so
    # is one whose checksum fails or whose seqs the files it names do not hold (the next seq is
    # derived from it: a damaged one must never hand a seq out twice).
    with contextlib.suppress(OSError, ValueError, AttributeError, KeyError, TypeError):
        cache = json.loads(cache_path.read_text(encoding="utf-8"))
        if (
            cache.pop("crc") == _manifest_crc(cache)
            and cache["file_set_fingerprint"] == fingerprint
            and sizes.get(cache["max_seq_file"]) == cache["max_seq_file_size"]
            and sizes.get(cache["min_seq_file"], -1) >= cache["min_seq_file_size"]
            and _is_seq(cache["min_seq"])
            and _is_seq(cache["max_seq"])
            and last_seq(directory / cache["max_seq_file"]) == cache["max_seq"]
            and first_seq(directory / cache["min_seq_file"]) == cache["min_seq"]
        ):
            return Bounds(cache["min_seq"], cache["max_seq"])
    lo: tuple[int, str] | None = None
    hi: tuple[int, str] | None = None
    for path in files:
        head, tail = first_seq(path), last_seq(path)
        if head is not None and (lo is None or head < lo[0]):
            lo = (head, path.name)
        if tail is not None and (hi is None or tail > hi[0]):
            hi = (tail, path.name)
    bounds = Bounds(lo[0] if lo else None, hi[0] if hi else None)
    if write_cache:
        manifest = {
            "file_set_fingerprint": fingerprint,
            "max_seq_file": hi[1] if hi else None,
            "max_seq_file_size": sizes[hi[1]] if hi else 0,
            "max_seq": bounds.max_seq,
            "min_seq_file": lo[1] if lo else None,
            "min_seq_file_size": sizes[lo[1]] if lo else 0,
            "min_seq": bounds.min_seq,
        }
        tmp = directory / f".wal-bounds.{uuid.uuid4()}.tmp"
        with contextlib.suppress(OSError):
            with os.fdopen(open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL), "w") as fh:
                fh.write(json.dumps({**manifest, "crc": _manifest_crc(manifest)}))
            os.replace(tmp, cache_path)
        tmp.unlink(missing_ok=True)
    return bounds


def file_gaps(directory: Path) -> list[tuple[str, int, int]]:
    """(file, first missing seq, last missing seq) for each file whose first seq does not
    follow the previous file's last one: a file of the stream missing, or cut short."""
    gaps: list[tuple[str, int, int]] = []
    previous: int | None = None
    for path in ordered_files(directory):
        head, tail = first_seq(path), last_seq(path)
        if head is None or tail is None:
            continue
        if previous is not None and head > previous + 1:
            gaps.append((path.name, previous + 1, head - 1))
        previous = tail if previous is None else max(previous, tail)
    return gaps


def read_start(directory: Path) -> int | None:
    """The seq the stream's first line took, None when unrecorded or damaged (a damaged record
    is never trusted: it could hide a lost head, or invent one)."""
    with contextlib.suppress(OSError, ValueError, AttributeError, KeyError, TypeError):
        value = json.loads((directory / START_FILE).read_text(encoding="utf-8"))
        crc = value.pop("crc")
        if crc == _manifest_crc(value) and _is_seq(value["first_seq"]):
            seq: int = value["first_seq"]
            return seq
    return None


def write_start(directory: Path, seq: int) -> None:
    """Record (0600, fsynced, atomically) that the stream's first line takes `seq`."""
    manifest = {"first_seq": seq}
    tmp = directory / f"{START_FILE}.tmp-{uuid.uuid4()}"
    with os.fdopen(open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL), "w") as fh:
        json.dump({**manifest, "crc": _manifest_crc(manifest)}, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, directory / START_FILE)
    fsync_dir(directory)


def adopt_start(directory: Path) -> None:
    """Give a stream written before start records one, from the first seq it holds now (what
    it lost before this cannot be told). A stream with a record, or with no line, is left."""
    if (directory / START_FILE).exists():
        return
    bounds = read_bounds(directory, write_cache=False)
    if bounds.min_seq is not None:
        write_start(directory, bounds.min_seq)


def start_gap(directory: Path) -> tuple[str, int, int] | None:
    """(first file, first missing seq, last missing seq) when the stream no longer begins at
    the seq its start record holds: its head was deleted or cut. None when it does, when it
    has no line, or when the record is missing or damaged."""
    start = read_start(directory)
    if start is None:
        return None
    for path in ordered_files(directory):
        head = first_seq(path)
        if head is None:
            continue
        if head <= start or _first_line_seq(path) != head:
            # An unreadable first line may hold the seqs before `head`: a read reports that
            # batch (`batch_not_applied`), so it is not a lost head.
            return None
        return path.name, start, head - 1
    return None


def _first_line_seq(path: Path) -> int | None:
    """The seq of a file's first non-blank line, None when that line does not verify."""
    with path.open("rb") as fh:
        for line in fh:
            if line.strip():
                return _seq_of(line)
    return None


def read_problems(directory: Path) -> list[dict[str, object]] | None:
    """The stream's recorded problems; None when it has no record (an unreadable record is
    kept aside as `.wal-problems.json.corrupt` and counts as none)."""
    path = directory / PROBLEMS_FILE
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        with contextlib.suppress(OSError):
            os.replace(path, directory / f"{PROBLEMS_FILE}.corrupt")
        return None
    if not isinstance(value, list):
        return None
    return [x for x in value if isinstance(x, dict)]


def write_problems(directory: Path, entries: list[dict[str, object]]) -> None:
    """Replace the stream's record of problems (0600, fsynced, atomically)."""
    tmp = directory / f"{PROBLEMS_FILE}.tmp-{uuid.uuid4()}"
    with os.fdopen(open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL), "w") as fh:
        json.dump(entries, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, directory / PROBLEMS_FILE)
    fsync_dir(directory)
