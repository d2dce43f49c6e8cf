"""Finding the files to ingest under the roots given, honouring ignore files.

A root may be a directory or one file. Under a directory, files matching any of the globs are
taken, except those excluded by `.gitignore` / `.lcgignore` files (each applying below its own
directory, git's rules) or by `--exclude` patterns; hidden directories (`.git`, `.lcg`, ...) are
never entered. `source_file` is the path relative to the root given, with forward slashes, so
the same folder ingested from another machine names its sources identically. Files under a
directory that match no glob (a PDF, an image) are not taken but are listed (`Scan.skipped`), so
the command can say what it left out and why. A file under a directory that is a symbolic link
resolving outside that directory is never taken (`Scan.outside`): a link in a shared folder must
not bring a file from elsewhere (a key, a password store) into the graph. Linked directories are
not entered at all.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pathspec

__all__ = ["DEFAULT_GLOBS", "Scan", "SourceFile", "find_sources", "scan_sources"]

DEFAULT_GLOBS = ("**/*.md", "**/*.markdown", "**/*.txt", "**/*.jsonl")
_IGNORE_FILES = (".gitignore", ".lcgignore")


@dataclass(frozen=True)
class SourceFile:
    path: Path
    source_file: str


@dataclass(frozen=True)
class Scan:
    """What a walk found: the files to ingest, the files it passed over (no glob matched), and
    the symbolic links it refused because they lead out of their root."""

    sources: list[SourceFile]
    skipped: list[SourceFile]
    outside: list[SourceFile]


def _leaves(path: Path, real_root: Path) -> bool:
    """Whether `path` resolves (symbolic links followed) outside `real_root`."""
    try:
        return not path.resolve().is_relative_to(real_root)
    except (OSError, RuntimeError):  # a link loop or an unreadable link: not followed either
        return True


def _spec_at(directory: Path) -> pathspec.GitIgnoreSpec | None:
    lines: list[str] = []
    for name in _IGNORE_FILES:
        file = directory / name
        if file.is_file():
            lines.extend(file.read_text(encoding="utf-8", errors="replace").splitlines())
    return pathspec.GitIgnoreSpec.from_lines(lines) if lines else None


def _ignored(
    root: Path,
    path: Path,
    is_dir: bool,
    excludes: pathspec.GitIgnoreSpec,
    specs: list[tuple[Path, pathspec.GitIgnoreSpec]],
) -> bool:
    """Excluded by `--exclude` (relative to the root) or by an ignore file above `path`."""
    slash = "/" if is_dir else ""
    if excludes.match_file(path.relative_to(root).as_posix() + slash):
        return True
    return any(spec.match_file(path.relative_to(base).as_posix() + slash) for base, spec in specs)


def _walk(
    root: Path, globs: pathspec.GitIgnoreSpec, excludes: pathspec.GitIgnoreSpec
) -> Iterator[tuple[Path, bool]]:
    """Every file not ignored nor excluded, with whether a glob takes it."""
    specs: list[tuple[Path, pathspec.GitIgnoreSpec]] = []
    for directory, dirnames, filenames in os.walk(root):
        here = Path(directory)
        specs = [(base, spec) for base, spec in specs if here.is_relative_to(base)]
        spec = _spec_at(here)
        if spec is not None:
            specs.append((here, spec))

        dirnames[:] = sorted(
            d
            for d in dirnames
            if not d.startswith(".") and not _ignored(root, here / d, True, excludes, specs)
        )
        for name in sorted(filenames):
            path = here / name
            if not _ignored(root, path, False, excludes, specs):
                yield path, globs.match_file(path.relative_to(root).as_posix())


def find_sources(
    roots: Sequence[Path], globs: Sequence[str] = DEFAULT_GLOBS, excludes: Sequence[str] = ()
) -> list[SourceFile]:
    """Every file to ingest, in a stable order (roots as given, then path order).

    Raises:
        FileNotFoundError: a root does not exist.
    """
    return scan_sources(roots, globs, excludes).sources


def scan_sources(
    roots: Sequence[Path], globs: Sequence[str] = DEFAULT_GLOBS, excludes: Sequence[str] = ()
) -> Scan:
    """`find_sources`, plus the files under the roots that no glob takes and the symbolic links
    out of a root directory.

    A root that is a file is always taken (it was named, link or not).

    Raises:
        FileNotFoundError: a root does not exist.
    """
    # Globs use git's wildmatch rules too: `**/*.md` matches at any depth, the top included.
    glob_spec = pathspec.GitIgnoreSpec.from_lines(globs)
    exclude_spec = pathspec.GitIgnoreSpec.from_lines(excludes)
    found: list[SourceFile] = []
    skipped: list[SourceFile] = []
    outside: list[SourceFile] = []
    seen: set[str] = set()
    for root in roots:
        if not root.exists():
            raise FileNotFoundError(f"no such file or directory: {root}")
        real_root: Path | None = None
        if root.is_file():
            candidates: Iterator[tuple[Path, bool]] = iter([(root, True)])
            base = root.parent
        else:
            candidates = _walk(root, glob_spec, exclude_spec)
            base = root
            real_root = root.resolve()
        for path, taken in candidates:
            source_file = path.relative_to(base).as_posix()
            if real_root is not None and path.is_symlink() and _leaves(path, real_root):
                outside.append(SourceFile(path, source_file))
            elif not taken:
                skipped.append(SourceFile(path, source_file))
            elif source_file not in seen:
                seen.add(source_file)
                found.append(SourceFile(path, source_file))
    return Scan(found, skipped, outside)
