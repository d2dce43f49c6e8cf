"""One `lcg ingest` run: plan the sync, then feed chunks to `knowledge_process_chunk`.

The runner talks to the graph only through a `Caller` (an in-process dispatch or a running
service's socket), so it works the same either way. Per group and source file:

- unchanged (same content hash as the last completed run): skipped, no call at all;
- new or changed: its old episodes are deleted (`knowledge_delete_by_source`), then its chunks
  are ingested; the file is recorded as done only when every chunk committed;
- gone (with `prune`): its episodes are deleted.

Chunks of all files are in flight together, up to `concurrency` calls; they are submitted in
document order, which the ingestion pipeline keeps for commits within a group. A failed chunk
fails its file: the file's partial episodes are deleted and the failure is reported, and the
next run retries it. A changelog's chunks go one at a time, oldest release first, so each
release is extracted against the facts of those before it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio

from lcg.extraction.prompts import calls_for
from lcg.folder.chunking import Chunk, chunk_document
from lcg.folder.documents import (
    Document,
    DocumentError,
    DocumentKind,
    content_hash,
    read_documents,
)
from lcg.folder.syncstate import SourceRecord, SyncState
from lcg.folder.walk import SourceFile
from lcg.timeutil import to_iso_z

__all__ = [
    "Caller",
    "FilePlan",
    "IngestStats",
    "SyncPlan",
    "estimate",
    "plan_sync",
    "run_sync",
]

# Rough prompt overhead per extraction call (instructions, schema, ontology), in tokens, used
# only by the dry-run estimate.
_PROMPT_OVERHEAD_TOKENS = 700


class Caller(Protocol):
    """Something that runs a method of the registry: `await call(method, params) -> result`."""

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]: ...


@dataclass
class FilePlan:
    source: SourceFile
    action: str  # "new" | "changed" | "unchanged" | "failed"
    content_hash: str = ""
    documents: list[Document] = field(default_factory=list)
    # Each chunk with its document's reference time (RFC 3339), in document order.
    chunks: list[tuple[Chunk, str]] = field(default_factory=list)
    error: str = ""

    @property
    def notes(self) -> list[str]:
        """What was wrong with the file's metadata and what was used instead."""
        return [note for d in self.documents for note in d.notes]

    @property
    def releases(self) -> bool:
        """A changelog read as one document per release (lcg.folder.changelog)."""
        return any(d.time_origin == "release" for d in self.documents)

    @property
    def undated(self) -> bool:
        """Dated only by its modification time (a poor anchor for a temporal graph)."""
        return any(d.time_origin == "mtime" for d in self.documents)


@dataclass
class SyncPlan:
    group_id: str
    files: list[FilePlan]
    removed: list[str]  # sources recorded before that no longer exist

    def of(self, *actions: str) -> list[FilePlan]:
        return [f for f in self.files if f.action in actions]


def plan_sync(
    sources: Sequence[SourceFile],
    state: SyncState,
    max_chars: int,
    *,
    prune: bool,
    kind: DocumentKind = "auto",
    project: str | None = None,
) -> SyncPlan:
    """Read, hash and chunk every source; compare with what the last run completed.

    `kind` and `project` say how to read the files (lcg.folder.documents.read_documents).
    """
    files: list[FilePlan] = []
    for source in sources:
        try:
            data = source.path.read_bytes()
            digest = content_hash(data)
            if state.is_current(source.source_file, digest):
                files.append(FilePlan(source, "unchanged", digest))
                continue
            documents = read_documents(source.path, source.source_file, data, kind, project)
        except (OSError, DocumentError) as exc:
            files.append(FilePlan(source, "failed", error=str(exc)))
            continue
        chunks = [
            (chunk, to_iso_z(doc.reference_time))
            for doc in documents
            for chunk in chunk_document(doc, max_chars)
        ]
        action = "changed" if source.source_file in state.sources else "new"
        files.append(FilePlan(source, action, digest, documents, chunks))
    seen = {f.source.source_file for f in files}
    removed = sorted(s for s in state.sources if s not in seen) if prune else []
    return SyncPlan(state.group_id, files, removed)


def estimate(plan: SyncPlan, single_call_max_chars: int, *, llm: bool = True) -> dict[str, Any]:
    """What a run of `plan` would cost in LLM calls and input tokens (rough, for --dry-run).

    A chunk of up to `single_call_max_chars` characters takes one call, a longer one two
    (entities, then facts), and every call sends the chunk's text. With `llm=False` (the
    heuristic extractor) nothing is sent: zero calls, zero tokens.
    """
    todo = plan.of("new", "changed")
    texts = [c.text for f in todo for c, _ in f.chunks]
    chunks = len(texts)
    calls = [calls_for(t, single_call_max_chars) if llm else 0 for t in texts]
    text_tokens = sum(n * math.ceil(len(t.encode()) / 4) for n, t in zip(calls, texts, strict=True))
    return {
        "files": len(plan.files),
        "to_ingest": len(todo),
        "unchanged": len(plan.of("unchanged")),
        "unreadable": len(plan.of("failed")),
        "to_prune": len(plan.removed),
        "chunks": chunks,
        "llm_calls": sum(calls),
        "input_tokens": text_tokens + sum(calls) * _PROMPT_OVERHEAD_TOKENS,
        "undated_files": [f.source.source_file for f in todo if f.undated],
        "notes": _notes(todo),
    }


def _notes(files: Sequence[FilePlan]) -> list[dict[str, str]]:
    return [{"source_file": f.source.source_file, "note": n} for f in files for n in f.notes]


@dataclass
class IngestStats:
    """Running totals of a sync, updated as chunks commit (read by the progress display)."""

    files_total: int = 0
    files_done: int = 0
    files_skipped: int = 0
    files_failed: int = 0
    files_pruned: int = 0
    chunks_total: int = 0
    chunks_done: int = 0
    episodes: int = 0
    entities: int = 0  # entities each chunk kept (`nodes_extracted`): a name seen twice counts 2
    entities_created: int = 0  # entities new to the graph (`entities_created`)
    facts: int = 0  # facts inserted (`edges_extracted`)
    llm_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    episodes_deleted: int = 0
    failures: list[dict[str, str]] = field(default_factory=list)
    undated_files: list[str] = field(default_factory=list)
    notes: list[dict[str, str]] = field(default_factory=list)

    def add_result(self, result: dict[str, Any]) -> None:
        self.chunks_done += 1
        self.episodes += 1
        self.entities += int(result.get("nodes_extracted") or 0)
        self.entities_created += int(result.get("entities_created") or 0)
        self.facts += int(result.get("edges_extracted") or 0)
        cost = result.get("cost")
        if isinstance(cost, dict):
            self.llm_calls += int(cost.get("llm_calls") or 0)
            self.input_tokens += int(cost.get("input_tokens") or 0)
            self.output_tokens += int(cost.get("output_tokens") or 0)
            usd = cost.get("estimated_usd")
            if isinstance(usd, int | float):
                self.cost_usd = (self.cost_usd or 0.0) + float(usd)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


async def _delete_source(caller: Caller, group_id: str, source_file: str) -> int:
    result = await caller.call(
        "knowledge_delete_by_source", {"source_file": source_file, "group_ids": [group_id]}
    )
    return int(result.get("deleted_count") or result.get("episodes_deleted") or 0)


async def run_sync(
    caller: Caller,
    plan: SyncPlan,
    state: SyncState,
    *,
    concurrency: int,
    on_progress: Callable[[IngestStats], None] | None = None,
) -> IngestStats:
    """Carry out `plan`; returns the totals. Interrupting it is safe at any point."""
    todo = plan.of("new", "changed")
    stats = IngestStats(
        files_total=len(plan.files),
        files_skipped=len(plan.of("unchanged")),
        chunks_total=sum(len(f.chunks) for f in todo),
        undated_files=[f.source.source_file for f in todo if f.undated],
        notes=_notes(todo),
    )
    for f in plan.of("failed"):
        stats.files_failed += 1
        stats.failures.append({"source_file": f.source.source_file, "error": f.error})

    def report() -> None:
        if on_progress is not None:
            on_progress(stats)

    for source_file in plan.removed:
        stats.episodes_deleted += await _delete_source(caller, plan.group_id, source_file)
        state.record_removed(source_file)
        stats.files_pruned += 1
    report()

    chunk_slots = anyio.CapacityLimiter(concurrency)
    file_slots = anyio.CapacityLimiter(concurrency)

    async def ingest_chunk(source_file: str, chunk: Chunk, when: str, errors: list[str]) -> None:
        async with chunk_slots:
            if errors:
                return  # the file already failed; its episodes are about to be deleted
            try:
                result = await caller.call(
                    "knowledge_process_chunk",
                    {
                        "chunk_text": chunk.text,
                        "chunk_id": chunk.chunk_id,
                        "source_file": source_file,
                        "group_id": plan.group_id,
                        "reference_time": when,
                    },
                )
            except Exception as exc:  # any failure fails its file; the run goes on
                errors.append(f"{chunk.chunk_id}: {exc}")
                return
        stats.add_result(result)
        report()

    async def ingest_file(f: FilePlan) -> None:
        source_file = f.source.source_file
        async with file_slots:
            # Whatever an earlier, interrupted or failed run left of this file goes first.
            stats.episodes_deleted += await _delete_source(caller, plan.group_id, source_file)
            state.record_removed(source_file)
            errors: list[str] = []
            if f.releases:
                # A changelog's releases one after another, oldest first: each is extracted
                # against the facts of the releases before it, which it may end.
                for chunk, when in f.chunks:
                    await ingest_chunk(source_file, chunk, when, errors)
            else:
                async with anyio.create_task_group() as tg:
                    for chunk, when in f.chunks:
                        tg.start_soon(ingest_chunk, source_file, chunk, when, errors)
            if errors:
                stats.files_failed += 1
                stats.failures.append({"source_file": source_file, "error": errors[0]})
                await _delete_source(caller, plan.group_id, source_file)
            else:
                record = SourceRecord(source_file, f.content_hash, len(f.chunks), len(f.chunks))
                state.record_done(record)
                stats.files_done += 1
        report()

    async with anyio.create_task_group() as tg:
        for f in todo:
            tg.start_soon(ingest_file, f)
    return stats
