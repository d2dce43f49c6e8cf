"""`lcg code ingest PATH`: the structure of a working tree, synced into a group as one episode.

Owns finding a repository's source files (`git ls-files` when PATH is inside a git work tree,
so `.gitignore` is honoured; otherwise a walk that honours ignore files like `lcg ingest`), the
per-file checks that skip bad input with a reason (outside the repository, not a regular file,
binary, too large, generated, not UTF-8, syntax errors), the content-hash comparison that makes
a re-run with nothing changed write nothing, and the run itself: only new, changed and deleted
files are parsed and committed, in one episode whose reference time is the time of the run.
"""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any

import anyio.to_thread

from lcg.code.extract import EXTENSIONS, FileStructure, ParseFailure, language_of, parse_file
from lcg.code.notes import link_notes
from lcg.code.state import read_file_hashes
from lcg.code.sync import BatchResult, FileChange, commit_changes
from lcg.engine import Engine
from lcg.errors import InvalidRequestError
from lcg.folder.walk import scan_sources
from lcg.timeutil import now

__all__ = ["IngestReport", "RepoLayout", "check_source", "ingest_tree", "list_sources"]

MAX_FILE_BYTES = 1_000_000
_GENERATED_MARKERS = (b"Code generated", b"DO NOT EDIT", b"@generated", b"auto-generated")


@dataclass
class IngestReport:
    files_seen: int = 0
    files_unchanged: int = 0
    files_parsed: int = 0
    files_deleted: int = 0
    skipped: list[dict[str, str]] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)  # lcg.code.notes.link_notes
    batch: BatchResult | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != "batch"}
        b = self.batch or BatchResult()
        out.update(
            episode_uuid=b.episode_uuid,
            symbols_added=len(b.symbols_added),
            symbols_removed=len(b.symbols_removed),
            signatures_changed=len(b.signatures_changed),
            symbols_renamed=len(b.symbols_renamed),
            facts_started=b.facts_started,
            facts_ended=b.facts_ended,
            entities_written=b.entities_written,
            unresolved_calls=b.unresolved_calls,
            unresolved_bases=b.unresolved_bases,
        )
        return out


@dataclass(frozen=True)
class RepoLayout:
    """What module names depend on: package directories (Python) and go.mod's module path."""

    python_packages: frozenset[str]
    go_module: str | None

    @classmethod
    def of(cls, paths: Sequence[str], go_mod: bytes | None) -> RepoLayout:
        packages = frozenset(
            str(PurePosixPath(p).parent) for p in paths if PurePosixPath(p).name == "__init__.py"
        )
        module = None
        for line in (go_mod or b"").decode("utf-8", "replace").splitlines():
            if line.startswith("module "):
                module = line.split(None, 1)[1].strip()
                break
        return cls(packages, module)

    def module_for(self, path: str) -> str | None:
        if language_of(path) != "go":
            return None
        directory = str(PurePosixPath(path).parent)
        if self.go_module:
            return self.go_module if directory == "." else f"{self.go_module}/{directory}"
        return None  # the directory, or the package name at the top (lcg.code.extract)


def check_source(path: str, data: bytes, max_bytes: int = MAX_FILE_BYTES) -> str | None:
    """Why the file is not taken (None: it is)."""
    if len(data) > max_bytes:
        return f"too large ({len(data)} bytes > {max_bytes})"
    if b"\x00" in data[:8192]:
        return "binary (NUL bytes)"
    head = data[:1024]
    if any(marker in head for marker in _GENERATED_MARKERS):
        return "generated (a generated-code marker in its first lines)"
    return None


def parse_source(path: str, data: bytes, layout: RepoLayout) -> FileStructure:
    """Raises ParseFailure with the reason the file is skipped."""
    reason = check_source(path, data)
    if reason is not None:
        raise ParseFailure(reason)
    return parse_file(
        path, data, module=layout.module_for(path), python_roots=set(layout.python_packages)
    )


def content_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _git_files(root: Path) -> list[str] | None:
    try:
        out = subprocess.run(
            [
                "git",
                "-C",
                str(root),
                "ls-files",
                "-z",
                "--cached",
                "--others",
                "--exclude-standard",
            ],
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return sorted({p for p in out.decode("utf-8", "surrogateescape").split("\0") if p})


def list_sources(root: Path) -> tuple[list[str], list[dict[str, str]]]:
    """Source files under `root` (relative, forward slashes), and the ones refused with why."""
    listed = _git_files(root)
    if listed is None:
        globs = [f"**/*{ext}" for ext in EXTENSIONS]
        scan = scan_sources([root], globs)
        # The links out of the root are refused below, where the reason is recorded.
        listed = sorted(s.source_file for s in [*scan.sources, *scan.outside])
    real_root = root.resolve()
    paths: list[str] = []
    skipped: list[dict[str, str]] = []
    for rel in listed:
        if language_of(rel) is None:
            continue
        full = root / rel
        try:
            resolved = full.resolve()
        except OSError as exc:
            skipped.append({"path": rel, "reason": str(exc)})
            continue
        if not resolved.is_relative_to(real_root):
            skipped.append({"path": rel, "reason": "outside the repository (a symbolic link)"})
        elif not full.is_file():
            if full.exists():
                skipped.append({"path": rel, "reason": "not a regular file"})
        else:
            paths.append(rel)
    return paths, skipped


def _scan(
    root: Path, known: dict[str, str], on_progress: Callable[[str, int, int], None] | None
) -> tuple[IngestReport, list[FileChange]]:
    """Read, hash and parse what changed since the hashes `known` (path -> hash; blocking:
    run in a worker thread)."""
    try:
        is_dir = root.is_dir()
    except OSError as exc:  # a name too long, a link loop: not a directory lcg can read
        raise InvalidRequestError(f"cannot read {root}: {exc.strerror}", field="path") from None
    if not is_dir:
        raise InvalidRequestError(f"not a directory: {root}", field="path")
    report = IngestReport()
    paths, report.skipped = list_sources(root)
    report.files_seen = len(paths)
    go_mod = (root / "go.mod").read_bytes() if (root / "go.mod").is_file() else None
    layout = RepoLayout.of(paths, go_mod)
    changes: list[FileChange] = []
    for i, rel in enumerate(paths):
        if on_progress is not None:
            on_progress(rel, i, len(paths))
        try:
            data = (root / rel).read_bytes()
        except OSError as exc:
            report.skipped.append({"path": rel, "reason": str(exc)})
            continue
        digest = content_hash(data)
        if known.get(rel) == digest:
            report.files_unchanged += 1
            continue
        try:
            structure = parse_source(rel, data, layout)
        except ParseFailure as exc:
            report.skipped.append({"path": rel, "reason": str(exc)})
            continue
        report.files_parsed += 1
        changes.append(FileChange(rel, structure, digest))
    for path in sorted(set(known) - set(paths)):
        changes.append(FileChange(path, None))
        report.files_deleted += 1
    if on_progress is not None:
        on_progress("committing", len(paths), len(paths))
    return report, changes


async def ingest_tree(
    engine: Engine,
    root: Path,
    group_id: str,
    *,
    when: datetime | None = None,
    on_progress: Callable[[str, int, int], None] | None = None,
) -> IngestReport:
    """Sync the source files under `root` into `group_id`: new and changed files are parsed,
    files gone since the last run end their facts; unchanged files cost one hash each.

    Raises:
        InvalidRequestError: `root` is not a directory.
        CodeParserUnavailable: tree-sitter is not installed.
    """
    known = await engine.read(lambda conn: read_file_hashes(conn, group_id))
    report, changes = await anyio.to_thread.run_sync(_scan, root, known, on_progress)
    if changes:
        report.batch = await commit_changes(
            engine,
            group_id,
            changes,
            when=when or now(),
            name=f"code ingest {root.name or 'tree'}",
            description=f"code:{root}",
        )
        if report.batch.episode_uuid is not None:
            report.notes = await link_notes(engine, group_id)
    return report
