"""lcg: a local-first, bi-temporal context graph engine.

async with lcg.open(".lcg") as graph:       # the typed library front (lcg.library)
    hits = await graph.find_entities("Apollo 11")

The engine itself: `open_engine(Settings.for_home(Path(".lcg")))`.

Only the error tree is imported with the package; every other public name is imported the first
time it is read (`__getattr__`), so `import lcg.errors` (or `lcg.models`) does not load the
engine, the storage and the search index.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from lcg.errors import (
    ConfigError,
    ConflictError,
    InvalidRequestError,
    LcgError,
    NotFoundError,
    StorageError,
    UnavailableError,
    WalCorruptError,
    WalError,
    WalGenerationError,
)

if TYPE_CHECKING:
    from lcg.config import Settings, load_settings
    from lcg.engine import Engine, EpisodeCommit, Invalidation, open_engine
    from lcg.library import Graph, open
    from lcg.models import Entity, Episode, Fact

__all__ = [
    "ConfigError",
    "ConflictError",
    "Engine",
    "Entity",
    "Episode",
    "EpisodeCommit",
    "Fact",
    "Graph",
    "InvalidRequestError",
    "Invalidation",
    "LcgError",
    "NotFoundError",
    "Settings",
    "StorageError",
    "UnavailableError",
    "WalCorruptError",
    "WalError",
    "WalGenerationError",
    "load_settings",
    "open",
    "open_engine",
]
__version__ = "0.1.0"

# The public names imported on first use: name -> the module that defines it.
_LAZY = {
    "Settings": "lcg.config",
    "load_settings": "lcg.config",
    "Engine": "lcg.engine",
    "EpisodeCommit": "lcg.engine",
    "Invalidation": "lcg.engine",
    "open_engine": "lcg.engine",
    "Graph": "lcg.library",
    "open": "lcg.library",
    "Entity": "lcg.models",
    "Episode": "lcg.models",
    "Fact": "lcg.models",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'lcg' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # read once: later reads find it without this hook
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
