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
from pathlib import Path, PurePosixPath
from typing import IO, Any

from lcg.code.extract import ParseFailure, language_of
from lcg.code.ingest import RepoLayout, content_hash, parse_source
from lcg.code.notes import link_notes
from lcg.code.state import load_state
from lcg.code.sync import BatchResult, FileChange, plan_changes
from lcg.engine import Engine, EpisodeCommit
from lcg.errors import ConflictError, InvalidRequestError
from lcg.storage.backend import GraphReader, GroupMovedError

__all__ = ["Change", "Commit", "HistoryReport", "ingest_history", "last_ingested_commit", "walk"]

# A batch of episodes is committed once it holds this many entities, facts and supersessions.
_BATCH_ROWS = 20_000
# Regular files (git's modes); a symbolic link (120000) or a submodule (160000) is not read.
_FILE_MODES = ("100644", "100755")


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


@dataclass(frozen=True)
class Change:
    """One path a commit changed against its first parent: git's status letter, the path, the
    old path of a rename, and the new blob (sha and mode; None for a deletion)."""

    status: str
    path: str
    old_path: str | None
    blob: str | None
    mode: str


def _log_args(selection: str | None, after: str | None) -> list[str]:
    args = [
        "log",
        "--first-parent",
        "--diff-merges=first-parent",
        "--reverse",
        "-M",
        "-r",
        "--raw",
        "-z",
        "--no-abbrev",
        # The same output whatever the user's configuration (log.showRoot, color.ui,
        # log.showSignature).
        "--root",
        "--no-color",
        "--no-show-signature",
        "--format=%x1e%H %P%x1f%ct%x1f%s",
    ]
    if selection and ".." in selection:
        args.append(selection)
    elif selection and selection != "all":
        if not selection.isdigit() or int(selection) < 1:
            raise InvalidRequestError(
                f"--history takes a count or a range A..B, not {selection!r}", field="history"
            )
        args += ["-n", selection, "HEAD"]  # git limits first, then reverses
    else:
        args.append("HEAD")
    if after is not None:
        args.append(f"^{after}")
    return args


def walk(root: Path, selection: str | None, after: str | None) -> list[tuple[Commit, list[Change]]]:
    """Commits to ingest, oldest first, each with its changes against its first parent: all
    (None/"all"), the last N ("N"), or a range ("A..B"); only those after `after` (already
    ingested) when it is given. One `git log --raw` for the whole walk."""
    try:
        _git(root, "rev-parse", "--verify", "-q", "HEAD")
    except InvalidRequestError as exc:
        raise InvalidRequestError(f"{root}: the repository has no commits", field="path") from exc
    tokens = _git(root, *_log_args(selection, after)).split("\0")
    out: list[tuple[Commit, list[Change]]] = []
    i = 0
    while i < len(tokens):
        token = tokens[i].lstrip("\n")
        i += 1
        if token.startswith("\x1e"):
            head, ctime, subject = token[1:].split("\x1f", 2)
            shas = head.split()
            commit = Commit(
                shas[0],
                shas[1] if len(shas) > 1 else None,
                datetime.fromtimestamp(int(ctime), UTC),
                subject,
            )
            out.append((commit, []))
        elif token.startswith(":") and out:
            # ":<old mode> <new mode> <old sha> <new sha> <status>", then one or two paths
            _, mode, _, blob, status = token[1:].split(" ", 4)
            letter = status[0]
            if letter in "RC":
                old, new = tokens[i], tokens[i + 1]
                i += 2
                out[-1][1].append(Change(letter, new, old if letter == "R" else None, blob, mode))
            else:
                path = tokens[i]
                i += 1
                gone = letter == "D"
                out[-1][1].append(Change(letter, path, None, None if gone else blob, mode))
    return out


class _Blobs:
    """`git cat-file --batch`: blobs' contents, streamed through one process."""

    def __init__(self, root: Path) -> None:
        self._proc = subprocess.Popen(
            ["git", "-C", str(root), "cat-file", "--batch"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )

    def read(self, name: str) -> bytes | None:
        """The blob `name` designates (its sha, or `<commit>:<path>`); None if it is none."""
        stdin: IO[bytes] = self._proc.stdin  # type: ignore[assignment]  # piped above
        stdout: IO[bytes] = self._proc.stdout  # type: ignore[assignment]  # piped above
        stdin.write(f"{name}\n".encode("utf-8", "surrogateescape"))
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


def last_ingested_commit(conn: GraphReader, group_id: str) -> str | None:
    rows = conn.rows(
        "MATCH (ep:Episode) WHERE ep.group_id = $g AND ep.source_description STARTS WITH 'git:' "
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
    batch_episodes: int = 64,
) -> HistoryReport:
    """Ingest the commits `selection` names that the group has not seen, oldest first.

    Each commit is its own episode at its own time; up to `batch_episodes` consecutive ones
    (fewer when they are large) are committed together, as one transaction and one WAL batch
    (`Engine.commit_episode` of a list: the same graph as one by one, in fewer operations). A
    failure loses at most the batch it happened in; a re-run resumes after the last commit
    stored.

    Raises:
        InvalidRequestError: not a git repository, no commits, a bad selection.
        ConflictError: server mode, another process committed to the group under a batch
            (nothing of that batch applied; run again to resume).
        CodeParserUnavailable: tree-sitter is not installed.
    """
    top = Path(_git(root, "rev-parse", "--show-toplevel").strip())
    after = await engine.read(lambda conn: last_ingested_commit(conn, group_id))
    todo = walk(top, selection, after)
    report = HistoryReport()
    if not todo:
        return report
    first_parent = todo[0][0].parent
    tree = (
        set(_git(top, "ls-tree", "-r", "-z", "--name-only", first_parent).split("\0")) - {""}
        if first_parent
        else set()
    )
    blobs = _Blobs(top)
    state = await load_state(engine, group_id)
    pending: list[EpisodeCommit] = []
    pending_rows = 0
    layout: RepoLayout | None = None
    try:
        for i, (commit, diff) in enumerate(todo):
            if on_progress is not None:
                on_progress(commit, i, len(todo))
            report.commits_walked += 1
            for change in diff:
                if change.old_path is not None:
                    tree.discard(change.old_path)
                if change.status == "D":
                    tree.discard(change.path)
                else:
                    tree.add(change.path)
            if layout is None or any(_shapes_layout(c) for c in diff):
                go_mod = blobs.read(f"{commit.sha}:go.mod") if "go.mod" in tree else None
                layout = RepoLayout.of(sorted(tree), go_mod)
            changes = _file_changes(commit, diff, layout, blobs, report)
            if not changes:
                continue
            planned = plan_changes(
                state,
                group_id,
                changes,
                when=commit.time,
                name=f"commit {commit.sha[:12]}",
                description=f"git:{commit.sha}",
                content=f"commit {commit.sha[:12]}: {commit.subject}",
            )
            batch = planned[1] if planned is not None else BatchResult(files=len(changes))
            if planned is not None:
                episode = planned[0]
                pending.append(episode)
                pending_rows += len(episode.entities) + len(episode.facts)
                pending_rows += len(episode.invalidations)
                report.episodes += 1
            report.unresolved_calls += batch.unresolved_calls
            report.per_commit.append(
                {
                    "sha": commit.sha,
                    "time": commit.time.isoformat(),
                    "files": len(changes),
                    "added": batch.symbols_added,
                    "removed": batch.symbols_removed,
                    "signature_changed": batch.signatures_changed,
                    "renamed": [list(pair) for pair in batch.symbols_renamed],
                }
            )
            if len(pending) >= batch_episodes or pending_rows >= _BATCH_ROWS:
                await _commit(engine, group_id, pending)
                pending, pending_rows = [], 0
        if pending:
            await _commit(engine, group_id, pending)
    finally:
        blobs.close()
    if report.episodes:
        report.notes = await link_notes(engine, group_id)
    return report


async def _commit(engine: Engine, group_id: str, pending: list[EpisodeCommit]) -> None:
    """Commit a batch of planned episodes.

    Raises:
        ConflictError: server mode, another process committed to the group first. The batch
            was planned on top of the batches before it against state read at the start, and
            that other process may be ingesting this same history, so it is not planned again
            here: nothing of the batch was applied, the batches before it were, and a re-run
            resumes after the last commit stored.
    """
    try:
        await engine.commit_episode(pending)
    except GroupMovedError as exc:
        first, last = pending[0].episode.source_description, pending[-1].episode.source_description
        raise ConflictError(
            f"group {group_id!r} moved under the code history ingest (another process committed "
            f"to it): nothing of the batch {first} .. {last} ({len(pending)} commits) was "
            f"applied, the batches before it were; run the history ingest again, it resumes "
            f"after the last commit stored"
        ) from exc


def _shapes_layout(change: Change) -> bool:
    """Whether a change can change module names: a package marker or go.mod comes or goes."""
    names = {PurePosixPath(change.path).name}
    if change.old_path is not None:
        names.add(PurePosixPath(change.old_path).name)
    return bool(names & {"__init__.py", "go.mod"})


def _file_changes(
    commit: Commit, diff: list[Change], layout: RepoLayout, blobs: _Blobs, report: HistoryReport
) -> list[FileChange]:
    """The commit's changed source files, read and parsed (bad ones reported and skipped)."""
    changes: list[FileChange] = []
    for change in diff:
        path, old = change.path, change.old_path
        if language_of(path) is None and (old is None or language_of(old) is None):
            continue
        if change.blob is None:
            changes.append(FileChange(path, None))
            continue
        if language_of(path) is None:  # renamed to a name that is no source file
            changes.append(FileChange(old or path, None))
            continue
        data = blobs.read(change.blob) if change.mode in _FILE_MODES else None
        if data is None:  # a submodule or a symbolic link
            report.skipped.append({"commit": commit.sha, "path": path, "reason": "not a file"})
            continue
        try:
            structure = parse_source(path, data, layout)
        except ParseFailure as exc:
            report.skipped.append({"commit": commit.sha, "path": path, "reason": str(exc)})
            continue
        changes.append(FileChange(path, structure, content_hash(data), old))
    return changes
