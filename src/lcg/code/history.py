"""`lcg code ingest PATH --history`: a repository's git history, one episode per commit.

Owns walking commits oldest first (first-parent diffs, `git diff-tree -M`, so a rename git
detects is a rename), reading each changed file's content at that commit (one long-running
`git cat-file --batch`), and committing the commit's changed source files through
`lcg.code.sync` with the commit's committer time as reference time: symbols that appear start
their facts then, symbols that disappear end theirs then. Incremental: the last commit ingested
is the `source_description` (`git:<sha>`) of the group's newest history episode, and a re-run
walks only the commits after it.

Why the `git` CLI through subprocess rather than pygit2 or dulwich: it is on every machine that
has a repository, reads every repository format git itself reads (packs, worktrees, partial
clones), and its rename detection is git's own; pygit2 adds a native libgit2 dependency and
dulwich is slow on large packs. Two processes per run, streamed: no per-file process.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from lcg.code.extract import ParseFailure, language_of
from lcg.code.ingest import RepoLayout, content_hash, parse_source
from lcg.code.notes import link_notes
from lcg.code.state import load_state
from lcg.code.sync import BatchResult, FileChange, commit_changes
from lcg.engine import Engine
from lcg.errors import InvalidRequestError
from lcg.storage.store import Conn

__all__ = ["Commit", "HistoryReport", "ingest_history", "last_ingested_commit"]


@dataclass(frozen=True)
class Commit:
    sha: str
    parent: str | None
    time: datetime
    subject: str


@dataclass
class HistoryReport:
    commits_walked: int = 0
    episodes: int = 0
    skipped: list[dict[str, str]] = field(default_factory=list)
    per_commit: list[dict[str, Any]] = field(default_factory=list)
    unresolved_calls: int = 0
    notes: dict[str, Any] = field(default_factory=dict)  # lcg.code.notes.link_notes

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _git(root: Path, *args: str) -> str:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, check=True)
    except FileNotFoundError as exc:
        raise InvalidRequestError("--history needs the git command", field="history") from exc
    except subprocess.CalledProcessError as exc:
        message = exc.stderr.decode("utf-8", "replace").strip()
        raise InvalidRequestError(f"git {args[0]}: {message}", field="path") from exc
    return done.stdout.decode("utf-8", "surrogateescape")


def commits(root: Path, selection: str | None, after: str | None) -> list[Commit]:
    """Commits to ingest, oldest first: all (None/"all"), the last N ("N"), or a range
    ("A..B"); only those after `after` (already ingested) when it is given."""
    try:
        _git(root, "rev-parse", "--verify", "-q", "HEAD")
    except InvalidRequestError as exc:
        raise InvalidRequestError(f"{root}: the repository has no commits", field="path") from exc
    args = ["rev-list", "--first-parent", "--reverse", "--format=%H %P%x1f%ct%x1f%s"]
    if selection and ".." in selection:
        args.append(selection)
    elif selection and selection != "all":
        if not selection.isdigit() or int(selection) < 1:
            raise InvalidRequestError(
                f"--history takes a count or a range A..B, not {selection!r}", field="history"
            )
        args += ["-n", selection, "HEAD"]
        args.remove("--reverse")
    else:
        args.append("HEAD")
    if after is not None:
        args.append(f"^{after}")
    out: list[Commit] = []
    for line in _git(root, *args).splitlines():
        if line.startswith("commit ") or "\x1f" not in line:
            continue
        head, ctime, subject = line.split("\x1f", 2)
        shas = head.split()
        out.append(
            Commit(
                shas[0],
                shas[1] if len(shas) > 1 else None,
                datetime.fromtimestamp(int(ctime), UTC),
                subject,
            )
        )
    if selection and selection.isdigit():
        out.reverse()
    return out


def changed_files(root: Path, commit: Commit) -> list[tuple[str, str, str | None]]:
    """(status letter, path, old path for renames) of the commit against its first parent."""
    base = [commit.parent] if commit.parent else ["--root"]
    out = _git(
        root, "diff-tree", "-r", "-z", "-M", "--no-commit-id", "--name-status", *base, commit.sha
    )
    parts = [p for p in out.split("\0") if p]
    changes: list[tuple[str, str, str | None]] = []
    i = 0
    while i < len(parts):
        status = parts[i][0]
        if status in "RC":
            old, new = parts[i + 1], parts[i + 2]
            changes.append((status, new, old if status == "R" else None))
            i += 3
        else:
            changes.append((status, parts[i + 1], None))
            i += 2
    return changes


class _Blobs:
    """`git cat-file --batch`: the content of `<commit>:<path>`, streamed through one process."""

    def __init__(self, root: Path) -> None:
        self._proc = subprocess.Popen(
            ["git", "-C", str(root), "cat-file", "--batch"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )

    def read(self, sha: str, path: str) -> bytes | None:
        stdin: IO[bytes] = self._proc.stdin  # type: ignore[assignment]  # piped above
        stdout: IO[bytes] = self._proc.stdout  # type: ignore[assignment]  # piped above
        stdin.write(f"{sha}:{path}\n".encode("utf-8", "surrogateescape"))
        stdin.flush()
        header = stdout.readline().split()
        if len(header) < 3 or header[1] != b"blob":
            return None
        data = stdout.read(int(header[2]))
        stdout.read(1)  # the newline after the content
        return data

    def close(self) -> None:
        for pipe in (self._proc.stdin, self._proc.stdout):
            if pipe is not None:
                pipe.close()
        self._proc.wait()


def last_ingested_commit(conn: Conn, group_id: str) -> str | None:
    rows = conn.rows(
        "MATCH (ep:Episode) WHERE ep.group_id = $g AND starts_with(ep.source_description, 'git:') "
        "RETURN ep.source_description ORDER BY ep.valid_at DESC, ep.created_at DESC LIMIT 1",
        {"g": group_id},
    )
    return str(rows[0][0])[4:] if rows else None


async def ingest_history(
    engine: Engine,
    root: Path,
    group_id: str,
    selection: str | None = None,
    *,
    on_progress: Callable[[Commit, int, int], None] | None = None,
) -> HistoryReport:
    """Ingest the commits `selection` names that the group has not seen, oldest first.

    Raises:
        InvalidRequestError: not a git repository, no commits, a bad selection.
        CodeParserUnavailable: tree-sitter is not installed.
    """
    top = Path(_git(root, "rev-parse", "--show-toplevel").strip())
    after = await engine.read(lambda conn: last_ingested_commit(conn, group_id))
    todo = commits(top, selection, after)
    report = HistoryReport()
    if not todo:
        return report
    first_parent = todo[0].parent
    tree = (
        set(_git(top, "ls-tree", "-r", "-z", "--name-only", first_parent).split("\0")) - {""}
        if first_parent
        else set()
    )
    blobs = _Blobs(top)
    state = await load_state(engine, group_id)
    try:
        for i, commit in enumerate(todo):
            if on_progress is not None:
                on_progress(commit, i, len(todo))
            report.commits_walked += 1
            diff = changed_files(top, commit)
            for status, path, old in diff:
                if old is not None:
                    tree.discard(old)
                if status == "D":
                    tree.discard(path)
                else:
                    tree.add(path)
            go_mod = blobs.read(commit.sha, "go.mod") if "go.mod" in tree else None
            layout = RepoLayout.of(sorted(tree), go_mod)
            changes: list[FileChange] = []
            for status, path, old in diff:
                if language_of(path) is None and (old is None or language_of(old) is None):
                    continue
                if status == "D":
                    changes.append(FileChange(path, None))
                    continue
                if language_of(path) is None:  # renamed to a name that is no source file
                    changes.append(FileChange(old or path, None))
                    continue
                data = blobs.read(commit.sha, path)
                if data is None:  # a submodule or a symbolic link
                    report.skipped.append(
                        {"commit": commit.sha, "path": path, "reason": "not a file"}
                    )
                    continue
                try:
                    structure = parse_source(path, data, layout)
                except ParseFailure as exc:
                    report.skipped.append({"commit": commit.sha, "path": path, "reason": str(exc)})
                    continue
                changes.append(FileChange(path, structure, content_hash(data), old))
            if not changes:
                continue
            batch: BatchResult = await commit_changes(
                engine,
                group_id,
                changes,
                when=commit.time,
                name=f"commit {commit.sha[:12]}",
                description=f"git:{commit.sha}",
                content=f"commit {commit.sha[:12]}: {commit.subject}",
                state=state,
            )
            report.unresolved_calls += batch.unresolved_calls
            if batch.episode_uuid is not None:
                report.episodes += 1
            report.per_commit.append(
                {
                    "sha": commit.sha,
                    "time": commit.time.isoformat(),
                    "files": len(changes),
                    "added": batch.symbols_added,
                    "removed": batch.symbols_removed,
                    "signature_changed": batch.signatures_changed,
                }
            )
    finally:
        blobs.close()
    if report.episodes:
        report.notes = await link_notes(engine, group_id)
    return report
