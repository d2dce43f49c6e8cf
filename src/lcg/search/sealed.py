"""Content checksums for the derived indexes saved beside the database (the search index,
the temporal rows): written with a snapshot, checked before it is loaded, so damage that leaves
the files well formed (a flipped bit in a vector, a truncated column, an edited vocabulary) is
never served — the snapshot is rebuilt from the store instead.

- `digests(directory, exclude)`: the SHA-256 of each file under `directory` but the stamp
  (`exclude`) that will keep them;
- `intact(directory, digests)`: whether every file still has the digest recorded for it;
- `dumps` / `unseal` (once parsed): a JSON object carrying the SHA-256 of its own canonical text
  (`"sha256"`), for the stamp and state files themselves.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

__all__ = ["digests", "dumps", "intact", "unseal"]


def _file_digest(path: Path) -> str:
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def digests(directory: Path, exclude: str) -> dict[str, str]:
    """The SHA-256 of every file under `directory` (by relative path) but `exclude`."""
    files = sorted(p for p in directory.rglob("*") if p.is_file())
    return {
        str(p.relative_to(directory)): _file_digest(p)
        for p in files
        if str(p.relative_to(directory)) != exclude
    }


def intact(directory: Path, recorded: object) -> bool:
    """Whether `recorded` is a non-empty {name: digest} and every file still matches it."""
    if not isinstance(recorded, dict) or not recorded:
        return False
    try:
        return all(
            isinstance(name, str)
            and not Path(name).is_absolute()
            and ".." not in Path(name).parts
            and _file_digest(directory / name) == digest
            for name, digest in recorded.items()
        )
    except OSError:
        return False


def _canonical(value: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def dumps(value: dict[str, Any]) -> str:
    """`value` as JSON, with the digest of its canonical form as `"sha256"`."""
    return json.dumps({**value, "sha256": _canonical(value)})


def unseal(value: dict[str, Any]) -> dict[str, Any] | None:
    """`value` (parsed from what `dumps` wrote) without its digest, None when that fails."""
    digest = value.pop("sha256", None)
    return value if digest == _canonical(value) else None


def read(path: Path) -> tuple[dict[str, Any] | None, bool]:
    """(the object `path` holds, whether it is damaged): (None, False) when it is missing or
    was written before it carried a digest (stale, rebuilt quietly)."""
    try:
        raw = json.loads(path.read_text())
    except OSError:
        return None, False
    except ValueError:  # every stamp this version writes parses
        return None, True
    if not isinstance(raw, dict) or "sha256" not in raw:
        return None, False
    value = unseal(raw)
    return value, value is None
