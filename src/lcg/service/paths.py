"""Where a file path given over the socket, MCP or HTTP may point (export, import, WAL dump).

A transport's caller is not necessarily the user who started the service (an agent over MCP, a
page over HTTP), so the methods that name files confine them:

- a relative path resolves against the export directory (`LCG_EXPORT_DIR`, default
  `<home>/exports`), never against the service's working directory;
- the resolved path (symlinks followed) must lie inside the export directory or the workspace
  (`LCG_HOME`); anything else is refused with one message that says nothing about whether the
  path exists;
- a path that is written must also stay out of lcg's live state (the WAL root, the database,
  the embedding cache, ontology and settings files, the socket).

The CLI is the local user: `lcg export FILE` / `lcg import FILE` / `lcg wal dump --target-dir`
stage their files in the export directory and move them where the user said (lcg.cli.staging).
"""

from __future__ import annotations

from pathlib import Path

from lcg.config import Settings
from lcg.errors import InvalidRequestError

__all__ = ["readable_path", "writable_path"]

# Workspace entries lcg reads at startup or keeps live; a transport never writes into them.
_STATE_NAMES = (
    "config.toml",
    "ontology.yaml",
    "ontology",
    "ontology-hash.json",
    "embeddings",
    "ingest",
    "eval",
)


def _inside(path: Path, root: Path) -> bool:
    # By components, never by string prefix: `.lcg-evil/secret` is not inside `.lcg`.
    return path.is_relative_to(root)


def _resolve(settings: Settings, raw: str, method: str, field: str) -> Path:
    given = Path(raw)
    try:
        return (given if given.is_absolute() else settings.exports / given).resolve()
    except (OSError, RuntimeError, ValueError) as exc:  # a link loop, a name too long, a NUL
        raise InvalidRequestError(
            f"{method}: {field} cannot be resolved: {exc.__class__.__name__}", field=field
        ) from None


def _refuse(method: str, raw: str, settings: Settings, field: str) -> InvalidRequestError:
    return InvalidRequestError(
        f"{method}: {field} '{raw}' is outside the workspace: over the socket, MCP and HTTP "
        f"files are read and written only under {settings.exports} (where relative paths "
        f"resolve) or {settings.home}",
        field=field,
    )


def readable_path(settings: Settings, raw: str, *, method: str, field: str = "path") -> Path:
    """The absolute path a transport may read.

    Raises:
        InvalidRequestError: it resolves outside the export directory and the workspace.
    """
    resolved = _resolve(settings, raw, method, field)
    roots = (settings.exports.resolve(), settings.home.resolve())
    if not any(_inside(resolved, root) for root in roots):
        raise _refuse(method, raw, settings, field)
    return resolved


def writable_path(settings: Settings, raw: str, *, method: str, field: str = "path") -> Path:
    """The absolute path a transport may write (a file, or a directory to fill).

    Raises:
        InvalidRequestError: it resolves outside the export directory and the workspace, is one
            of those roots itself, or overlaps lcg's live state.
    """
    resolved = readable_path(settings, raw, method=method, field=field)
    home = settings.home.resolve()
    db = settings.db_path.resolve()
    protected = {
        settings.wal_dir.resolve(): "the live WAL directory",
        settings.socket_path.resolve(): "the service socket",
        db: "the database",
        db.with_name(db.name + ".wal"): "the database",
        **{home / name: "lcg's own state" for name in _STATE_NAMES},
    }
    if db.parent != home:
        protected[db.parent] = "the database directory"
    for state, what in protected.items():
        if _inside(resolved, state) or _inside(state, resolved):
            raise InvalidRequestError(
                f"{method}: {field} '{raw}' overlaps {what} '{state}'; choose a path under "
                f"{settings.exports}",
                field=field,
            )
    if resolved in (settings.exports.resolve(), home):
        raise InvalidRequestError(
            f"{method}: {field} '{raw}' is a workspace directory itself; name a path inside "
            f"{settings.exports}",
            field=field,
        )
    return resolved
