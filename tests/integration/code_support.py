"""Git for the code-graph tests: commands run with a fixed author and a given commit time."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def git(repo: Path, *args: str, when: int = 0) -> str:
    """Run `git -C repo args` as author "t" at `when` (seconds since the epoch, UTC)."""
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
        "GIT_AUTHOR_DATE": f"{when} +0000",
        "GIT_COMMITTER_DATE": f"{when} +0000",
    }
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=True, env=env)
    return done.stdout.decode()
