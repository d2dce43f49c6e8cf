"""The kernel: lifecycle, startup catch-up, snapshot reads, the commit primitive, name
resolution (see README.md in this directory)."""

from lcg.engine.commits import Batch, EpisodeCommit, Invalidation
from lcg.engine.kernel import Engine, Writer, open_engine

__all__ = [
    "Batch",
    "Engine",
    "EpisodeCommit",
    "Invalidation",
    "Writer",
    "open_engine",
]
