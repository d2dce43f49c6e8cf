"""What an `Engine` is made of (`Engine.parts`) and what it reports about itself
(`Engine.state`): two small value types, so the kernel's surface names them once instead of
one attribute per part.

`Parts` is fixed when the engine is built (`open_engine` assembles it; each part can be given
instead). `EngineState` is a snapshot: the engine changes its state itself (a reopen, a failed
open) and the admin area through `lcg.engine.exclusive` (the search index rebuilt); nobody
else writes it.
"""

from __future__ import annotations

from dataclasses import dataclass

from lcg.embedding.base import Embedder
from lcg.extraction.select import LlmSlot
from lcg.search.index import SearchIndex
from lcg.telemetry import EventSink
from lcg.wal.writer import Wal

__all__ = ["EngineState", "Parts"]


@dataclass(frozen=True)
class Parts:
    """The parts an engine was assembled from, each the one object the engine uses."""

    wal: Wal
    # The embedding model, wrapped in the embedding cache (lcg.embedding.select).
    embedder: Embedder
    events: EventSink
    # The in-process lexical and vector index (lcg.search), kept in step with commits.
    search: SearchIndex
    # The language model: the one given, else built from the settings on first use.
    llm: LlmSlot


@dataclass(frozen=True)
class EngineState:
    """An engine's health, as `knowledge_status` and the service's degraded gate read it."""

    # Why no database is open (the service then runs degraded); None when one is open.
    degraded_reason: str | None
    # Whether the search index is loaded for every group (it otherwise loads lazily).
    indices_built: bool
