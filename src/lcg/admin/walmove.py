"""`lcg wal export DIR` / `lcg wal import DIR`: move a workspace between the embedded store and
a server (docs/design.md) through its plain JSONL WAL.

The export directory is laid out as a WAL root (`DIR/<enc(group)>/<file>.jsonl`), one file per
group named `00000000_000000_export_0000.jsonl`, holding every whole batch of the group's WAL in
seq order, each line in the canonical encoding (`encode_line`): what replay applies, read the
way replay reads it (a torn tail or a batch with an unreadable line is left out, and counted).
The same WAL exports to the same bytes from either store. Beside it, `.wal-start.json` holds the
seq the source stream began at (`lcg.wal.layout.write_start`), and the result lists, per group,
the `problems` the read met (seqs no line holds, `seq_gap`; a head the stream lost,
`wal_start_missing`; batches with a line failing its checksum or unreadable,
`batch_not_applied`; a torn tail): an export never hides that its WAL is incomplete.

Import refuses a directory whose WAL is incomplete in any of those ways (nothing is imported)
unless `accept_damage` is given (`lcg wal import --accept-damage`): then what reads whole is
loaded and the replay at import reports the gaps in `wal_problems`, as for any stream.

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
from lcg.wal.layout import fsync_dir, group_dir, list_groups, read_start, start_gap, write_start
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


def _problems(stats: ReadStats, head: tuple[str, int, int] | None) -> list[dict[str, Any]]:
    """What a read of a stream met that leaves it incomplete, in `wal_problems`' shapes."""
    out: list[dict[str, Any]] = []
    if head is not None:
        file, first, last = head
        out.append(
            {"kind": "wal_start_missing", "file": file, "first_seq": first, "last_seq": last}
        )
    out += [
        {"kind": "seq_gap", "file": file, "first_seq": first, "last_seq": last}
        for file, first, last in stats.gaps
    ]
    out += [{"kind": "batch_not_applied", **loss.to_wire()} for loss in stats.lost]
    if stats.unparseable:
        out.append({"kind": "unreadable_lines", "lines": stats.unparseable})
    if stats.torn_tail or stats.incomplete_batch_lines:
        out.append({"kind": "torn_tail", "lines": stats.torn_tail + stats.incomplete_batch_lines})
    if stats.unrecognised:
        out.append({"kind": "unknown_operation_lines", "lines": stats.unrecognised})
    return out


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
            source = engine.parts.wal.directory(group)  # a server's stream keeps no files
            head = start_gap(source) if source.is_dir() else None
            start = read_start(source) if source.is_dir() else None
            directory = group_dir(target, group)
            private_dir(directory)
            path = directory / EXPORT_FILE
            with os.fdopen(open_private(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL), "wb") as f:
                for r in records:
                    f.write(_line(r))
                f.flush()
                os.fsync(f.fileno())
            write_start(directory, records[0].seq if start is None else start)
            out[group] = {
                "lines": len(records),
                "first_seq": records[0].seq,
                "last_seq": records[-1].seq,
                "lines_left_out": stats.torn_tail + stats.unparseable + stats.corrupt_batch_lines,
                "problems": _problems(stats, head),
            }
    if target.is_dir():
        fsync_dir(target)
    return {"directory": str(target), "backend": exclusive.store(engine).backend, "groups": out}


def _read_export(source: Path, accept_damage: bool) -> dict[str, list[WalRecord]]:
    """Every group's records of an export directory, refusing one that replay would not
    apply whole, or that lacks seqs (unless `accept_damage`)."""
    if not source.is_dir():
        raise InvalidRequestError(f"{source} is not a directory", field="directory")
    found: dict[str, list[WalRecord]] = {}
    for group in list_groups(source):
        stats = ReadStats()
        directory = group_dir(source, group)
        records = list(iter_records(directory, stats=stats))
        problems = _problems(stats, start_gap(directory))
        if problems and not accept_damage:
            raise InvalidRequestError(
                f"group {group!r}: the WAL of {source} is incomplete ("
                + "; ".join(_describe(p) for p in problems[:5])
                + "): nothing was imported; `lcg wal import --accept-damage` loads what reads "
                "whole",
                field="directory",
            )
        if records:
            found[group] = records
    if not found:
        raise InvalidRequestError(f"{source} holds no WAL line of any group", field="directory")
    return found


def _describe(problem: dict[str, Any]) -> str:
    kind = problem["kind"]
    if "lines" in problem:
        return f"{kind}: {problem['lines']} lines"
    return f"{kind}: seqs {problem['first_seq']}..{problem['last_seq']} ({problem['file']})"


def import_wal(engine: Engine, source: Path, *, accept_damage: bool = False) -> dict[str, Any]:
    """Load an export directory into the engine's store (groups that hold nothing yet).

    Raises:
        InvalidRequestError: the directory is not a readable export, its WAL is incomplete
            (torn, unreadable or failing checksums, seqs missing; unless `accept_damage`), or a
            group it holds already has WAL lines or rows here (nothing is imported then).
    """
    found = _read_export(source, accept_damage)
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
