"""Every error lcg raises, in one tree.

    LcgError                      base; `rpc_code` -32000, `exit_code` 1
    ├── ConfigError               a setting is invalid or something required is not configured
    ├── InvalidRequestError       a request's parameters are wrong (names the `field`)
    ├── NotFoundError             a named thing does not exist (`kind`, `ident`)
    ├── ConflictError             the request contradicts the current state (busy, collision)
    ├── UnavailableError          no database is open (degraded); `rpc_code` -32001
    ├── ExtractionError           a language model / embedding provider failed; nothing was written
    │   └── ProviderTransportError  unreachable provider or HTTP error status ("HTTP error: ...")
    ├── StorageError              the graph database failed (Kuzu errors are translated in storage/)
    └── WalError                  the write-ahead log could not be read or written
        ├── WalCorruptError       a WAL line cannot be parsed (`path`, `line`)
        ├── WalOpError            an operation's name is unknown or its data lacks what it needs
        └── WalGenerationError    a group's stream generation is unknown where it must be known

Codes live on the classes: `rpc_code` is what the JSON-RPC transport answers, `exit_code` what the
CLI exits with. `wire_message()` renders the message with the prefix the reference service uses
(docs/api.md §errors), so clients that match on substrings keep working.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

__all__ = [
    "ConfigError",
    "ConflictError",
    "ExtractionError",
    "InvalidRequestError",
    "LcgError",
    "NotFoundError",
    "ProviderTransportError",
    "StorageError",
    "UnavailableError",
    "WalCorruptError",
    "WalError",
    "WalGenerationError",
    "WalOpError",
]


class LcgError(Exception):
    """Base of every error lcg raises."""

    rpc_code: ClassVar[int] = -32000
    exit_code: ClassVar[int] = 1
    wire_prefix: ClassVar[str] = "IPC error: "

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def wire_message(self) -> str:
        """The message as the reference service words it (prefix + text)."""
        return f"{self.wire_prefix}{self.message}"

    def wire_data(self) -> dict[str, Any] | None:
        """Structured `data` for a JSON-RPC error, or None."""
        return None


class ConfigError(LcgError):
    """A setting is invalid, or a provider the call needs is not configured."""

    exit_code: ClassVar[int] = 2
    wire_prefix: ClassVar[str] = "configuration error: "


class InvalidRequestError(LcgError):
    """A request parameter is missing, of the wrong type or out of range."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field

    def wire_data(self) -> dict[str, Any] | None:
        return {"field": self.field} if self.field else None


class NotFoundError(LcgError):
    """A thing the request names does not exist."""

    def __init__(self, kind: str, ident: str, message: str | None = None) -> None:
        super().__init__(message or f"{kind} '{ident}' not found")
        self.kind = kind
        self.ident = ident


class ConflictError(LcgError):
    """The request conflicts with the current state (name collision, busy service)."""


class UnavailableError(LcgError):
    """No database is open: the service is degraded and needs recovery."""

    rpc_code: ClassVar[int] = -32001
    wire_prefix: ClassVar[str] = ""

    def __init__(self, reason: str = "unknown") -> None:
        super().__init__("DB unavailable, recovery required")
        self.reason = reason

    def wire_data(self) -> dict[str, Any] | None:
        return {"reason": self.reason}


class ExtractionError(LcgError):
    """A language model or embedding provider failed (transport, HTTP status, unusable output).

    Raised before anything is written: a failed call leaves the graph and the WAL unchanged.
    """


class ProviderTransportError(ExtractionError):
    """A provider could not be reached, timed out, or answered an HTTP error status."""

    wire_prefix: ClassVar[str] = "HTTP error: "


class StorageError(LcgError):
    """The graph database failed; raised only by lcg.storage, chained from the Kuzu error."""

    wire_prefix: ClassVar[str] = "database error: "


class WalError(LcgError):
    """The write-ahead log could not be read or written."""

    wire_prefix: ClassVar[str] = "WAL I/O error: "


class WalCorruptError(WalError):
    """A WAL line is not valid JSON or not a known record."""

    wire_prefix: ClassVar[str] = "WAL JSON error: "

    def __init__(self, path: Path, line: int, detail: str) -> None:
        super().__init__(f"{path}:{line}: {detail}")
        self.path = path
        self.line = line


class WalOpError(WalError, ValueError):
    """A WAL operation cannot be decoded (lcg.wal.changes): its name is not an operation, or its
    data lacks a field or holds one of the wrong type. Also a ValueError, as the record
    converters of lcg.wal.records raise: replay and fold treat both as a malformed record."""


class WalGenerationError(WalError):
    """A group's stream generation is unknown although a position was recorded against it."""

    wire_prefix: ClassVar[str] = "WAL stream generation unknown: "
