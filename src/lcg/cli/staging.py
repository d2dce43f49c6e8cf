"""Files the CLI hands to a method that only accepts paths inside the workspace.

Paths given over the socket, MCP or HTTP are confined to the workspace (lcg.service.paths); the
CLI is the local user and may read and write where the user says. So `lcg export FILE`,
`lcg import FILE` and `lcg wal dump --target-dir DIR` stage the file in the export directory
(`LCG_EXPORT_DIR`), call the method with that path — on the running service or on an engine
opened here, the same way — and then move the result where the user asked (export, dump) or
delete the staged copy (import). Error messages and results name the user's path.
"""

from __future__ import annotations

import contextlib
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lcg.config import Settings, load_settings
from lcg.errors import LcgError
from lcg.fsmodes import private_dir

__all__ = ["deliver", "staged", "workspace_settings"]


def workspace_settings(home: str | None) -> Settings:
    """The settings of the workspace a command works on (`--home` or the configured one)."""
    return load_settings(overrides={"home": home} if home else {})


@contextlib.contextmanager
def staged(
    settings: Settings, user_path: Path, suffix: str = "", *, create: bool = False
) -> Iterator[Path]:
    """A fresh path in the export directory standing in for `user_path`; removed on the way
    out (whatever the call left there), and any `LcgError` raised inside names `user_path`
    instead of it. The directory is made here only with `create` (the caller writes the
    stand-in itself); otherwise the method makes it, after checking that the workspace exists.
    """
    directory = private_dir(settings.exports) if create else settings.exports
    stand_in = directory / f".lcg-cli-{uuid.uuid4().hex}{suffix}"
    try:
        yield stand_in
    except LcgError as exc:
        exc.message = exc.message.replace(str(stand_in), str(user_path))
        exc.args = (exc.message,)
        raise
    finally:
        if stand_in.is_dir():
            shutil.rmtree(stand_in, ignore_errors=True)
        else:
            stand_in.unlink(missing_ok=True)


def deliver(stand_in: Path, user_path: Path, result: dict[str, Any], key: str) -> dict[str, Any]:
    """Move the method's output to `user_path` (replacing a file there, as the user asked;
    an existing directory must be empty) and name it in `result[key]`."""
    user_path.parent.mkdir(parents=True, exist_ok=True)
    if user_path.is_dir() and stand_in.is_dir():
        user_path.rmdir()  # the method checked the same rule: must be new or empty
    shutil.move(str(stand_in), str(user_path))
    return {**result, key: str(user_path)}
