"""What a previous `lcg ingest` finished, per group: the content hash of each source file.

Kept as an append-only JSON Lines journal at `<home>/ingest/<encoded group>.jsonl`; the last
line about a source wins. A line is appended (and fsynced) only after every chunk of that file
was committed, so a run interrupted half-way through a file leaves no line for it and the next
run re-ingests it from scratch (deleting its partial episodes first). The journal is compacted
when it holds many more lines than sources.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from lcg.fsmodes import open_private, private_dir
from lcg.wal.layout import encode_group

__all__ = ["SourceRecord", "SyncState"]

_COMPACT_FACTOR = 4


@dataclass(frozen=True)
class SourceRecord:
    source_file: str
    content_hash: str
    chunks: int
    episodes: int


class SyncState:
    """The journal of one group's completed sources."""

    def __init__(self, home: Path, group_id: str) -> None:
        self.group_id = group_id
        self.path = home / "ingest" / f"{encode_group(group_id)}.jsonl"
        self.sources: dict[str, SourceRecord] = {}
        self._lines = 0
        self._load()

    def _load(self) -> None:
        if not self.path.is_file():
            return
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # a torn last line from a crash: the file it names is redone
            self._lines += 1
            if row.get("deleted"):
                self.sources.pop(row["source_file"], None)
            else:
                record = SourceRecord(
                    row["source_file"], row["content_hash"], row["chunks"], row["episodes"]
                )
                self.sources[record.source_file] = record
        if self._lines > _COMPACT_FACTOR * max(len(self.sources), 16):
            self._compact()

    def _append(self, row: dict[str, object]) -> None:
        private_dir(self.path.parent)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
        with os.fdopen(open_private(self.path, flags), "a", encoding="utf-8") as f:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
            f.flush()
            os.fsync(f.fileno())
        self._lines += 1

    def _compact(self) -> None:
        tmp = self.path.with_suffix(".jsonl.tmp")
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        with os.fdopen(open_private(tmp, flags), "w", encoding="utf-8") as f:
            for record in self.sources.values():
                f.write(json.dumps(record.__dict__, ensure_ascii=False) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        self._lines = len(self.sources)

    def is_current(self, source_file: str, content_hash: str) -> bool:
        """Whether `source_file` was completely ingested with exactly this content."""
        record = self.sources.get(source_file)
        return record is not None and record.content_hash == content_hash

    def record_done(self, record: SourceRecord) -> None:
        self.sources[record.source_file] = record
        self._append(dict(record.__dict__))

    def record_removed(self, source_file: str) -> None:
        """The file's episodes were deleted (pruned, or about to be re-ingested)."""
        if source_file in self.sources:
            del self.sources[source_file]
            self._append({"source_file": source_file, "deleted": True})
