"""lcg: a local-first, bi-temporal context graph engine.

async with lcg.open(".lcg") as graph:       # the typed library front (lcg.library)
    hits = await graph.find_entities("Apollo 11")

The engine itself: `open_engine(Settings.for_home(Path(".lcg")))`.
"""

from lcg.config import Settings, load_settings
from lcg.engine import Engine, EpisodeCommit, Invalidation, open_engine
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
