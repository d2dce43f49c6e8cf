"""lcg: a local-first, bi-temporal context graph engine.

from lcg import Settings, open_engine
engine = open_engine(Settings.for_home(Path(".lcg")))
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
from lcg.models import Entity, Episode, Fact

__all__ = [
    "ConfigError",
    "ConflictError",
    "Engine",
    "Entity",
    "Episode",
    "EpisodeCommit",
    "Fact",
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
    "open_engine",
]
__version__ = "0.1.0"
