"""Telemetry events: one JSON object per line, tagged by `type` (docs/api.md §telemetry).

The engine emits through an `EventSink`; entry points choose where events go (stderr JSONL for
the service, a list in tests). Nothing leaves the machine.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, Protocol, TextIO

import orjson

__all__ = ["EventSink", "JsonlSink", "ListSink", "NullSink"]


class EventSink(Protocol):
    def emit(self, event_type: str, **fields: Any) -> None: ...


class NullSink:
    """Drops every event."""

    def emit(self, event_type: str, **fields: Any) -> None:
        return None


class ListSink:
    """Keeps events in memory (tests, the CLI's summaries)."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def emit(self, event_type: str, **fields: Any) -> None:
        self.events.append({"type": event_type, **fields})

    def of_type(self, event_type: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == event_type]


class JsonlSink:
    """Writes events as JSON lines to a stream (stderr by default); one lock, no interleaving."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream or sys.stderr
        self._lock = threading.Lock()

    def emit(self, event_type: str, **fields: Any) -> None:
        line = orjson.dumps(
            {"type": event_type, "ts_ms": int(time.time() * 1000), **fields}, default=str
        ).decode()
        with self._lock:
            self._stream.write(line + "\n")
            self._stream.flush()
