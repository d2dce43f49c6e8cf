"""The kernel: lifecycle, startup catch-up, snapshot reads, the commit primitive, name
resolution (see README.md in this directory)."""

from lcg.engine.kernel import (
    Batch,
    Engine,
    EpisodeCommit,
    Invalidation,
    Writer,
    no_ontology,
    open_engine,
)

__all__ = [
    "Batch",
    "Engine",
    "EpisodeCommit",
    "Invalidation",
    "Writer",
    "no_ontology",
    "open_engine",
]
