"""`lcg wal export DIR` / `lcg wal import DIR`: move a workspace between the embedded store and
a server (docs/design.md) through its plain JSONL WAL.

The export directory is laid out as a WAL root (`DIR/<enc(group)>/<file>.jsonl`), one file per
group named `00000000_000000_export_0000.jsonl`, holding every whole batch of the group's WAL in
seq order, each line in the canonical encoding (`encode_line`): what replay applies, read the
way replay reads it (a torn tail or a batch with an unreadable line is left out, and counted).
The same WAL exports to the same bytes from either store.

Import loads such a directory into groups that hold nothing yet (no WAL line, no row): on Kuzu
it copies each group's file into the workspace WAL and catches the group up from it (the bulk
replay of startup); on a store that keeps the WAL (FalkorDB), it commits batch by batch with
the lines verbatim, so the server's stream holds the same lines and exports the same bytes.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lcg.engine import Engine, exclusive
from lcg.errors import InvalidRequestError
from lcg.fsmodes import open_private, private_dir
from lcg.wal.layout import fsync_dir, group_dir, list_groups
from lcg.wal.reader import ReadStats, iter_records
from lcg.wal.records import Op, WalRecord, encode_line

__all__ = ["EXPORT_FILE", "export_wal", "import_wal"]

EXPORT_FILE = "00000000_000000_export_0000.jsonl"


def _line(r: WalRecord) -> bytes:
    return encode_line(r.seq, r.ts, Op(r.op, r.data), r.more, r.at if r.at is not None else 0)


def _batches(records: list[WalRecord]) -> Iterator[list[WalRecord]]:
    """Whole batches: a batch ends on the line with no `more` to follow."""
    batch: list[WalRecord] = []
    for r in records:
        batch.append(r)
        if r.more == 0:
            yield batch
            batch = []
    if batch:  # the reader yields whole batches only; a tail here would be a reader bug
        raise ValueError("a WAL batch without its last line")


def export_wal(engine: Engine, target: Path) -> dict[str, Any]:
    """Write every group's WAL under `target` (which must not exist, or be an empty directory).

    Runs under the write lock, so the export is one consistent cut.

    Raises:
        InvalidRequestError: `target` exists and is not an empty directory.
    """
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise InvalidRequestError(
            f"{target} exists and is not an empty directory: the export would mix with it",
            field="directory",
        )
    out: dict[str, Any] = {}
    with engine.writer():
        for group in exclusive.mode(engine).wal_groups():
            records, stats = exclusive.mode(engine).wal_records(group)
            if not records:
                continue
            directory = group_dir(target, group)
            private_dir(directory)
            path = directory / EXPORT_FILE
            with os.fdopen(open_private(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL), "wb") as f:
                for r in records:
                    f.write(_line(r))
                f.flush()
                os.fsync(f.fileno())
            fsync_dir(directory)
            out[group] = {
                "lines": len(records),
                "first_seq": records[0].seq,
                "last_seq": records[-1].seq,
                "lines_left_out": stats.torn_tail + stats.unparseable + stats.corrupt_batch_lines,
            }
    if target.is_dir():
        fsync_dir(target)
    return {"directory": str(target), "backend": exclusive.store(engine).backend, "groups": out}


def _read_export(source: Path) -> dict[str, list[WalRecord]]:
    """Every group's records of an export directory, refusing one that replay would not
    apply whole."""
    if not source.is_dir():
        raise InvalidRequestError(f"{source} is not a directory", field="directory")
    found: dict[str, list[WalRecord]] = {}
    for group in list_groups(source):
        stats = ReadStats()
        records = list(iter_records(group_dir(source, group), stats=stats))
        bad = stats.torn_tail + stats.unparseable + stats.unrecognised + stats.corrupt_batch_lines
        if bad:
            raise InvalidRequestError(
                f"group {group!r}: {bad} WAL lines of {source} cannot be applied (torn, "
                "unreadable or of an unknown operation): nothing was imported",
                field="directory",
            )
        if records:
            found[group] = records
    if not found:
        raise InvalidRequestError(f"{source} holds no WAL line of any group", field="directory")
    return found


def import_wal(engine: Engine, source: Path) -> dict[str, Any]:
    """Load an export directory into the engine's store (groups that hold nothing yet).

    Raises:
        InvalidRequestError: the directory is not a readable export, or a group it holds
            already has WAL lines or rows here (nothing is imported then).
    """
    found = _read_export(source)
    with engine.writer() as writer:
        with writer.connection() as view:
            for group in found:
                taken = (
                    (view.position(group) or 0) > 0
                    or any(view.group_counts(group).values())
                    or engine.parts.wal.bounds(group).max_seq is not None
                )
                if taken:
                    raise InvalidRequestError(
                        f"group {group!r} already holds data here: import only into empty "
                        "groups (nothing was imported)",
                        field="directory",
                    )
        for group, records in found.items():
            exclusive.mode(engine).check_import(group, records)
    out: dict[str, Any] = {}
    for group, records in found.items():
        batches = [
            ([Op(r.op, r.data) for r in b], [_line(r) for r in b]) for b in _batches(records)
        ]
        exclusive.mode(engine).import_group(group, batches, EXPORT_FILE)
        out[group] = {"lines": len(records), "last_seq": records[-1].seq}
    return {"directory": str(source), "backend": exclusive.store(engine).backend, "groups": out}
