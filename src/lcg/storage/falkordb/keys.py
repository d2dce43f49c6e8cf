"""Key names, the stored form of timestamps, and the wire form of Cypher parameters.

Keys (docs/server-mode-design.md §2, measured): a group's graph is `lcg:<group>` with no braces,
because FalkorDB adds its own `telemetry{<graph key>}` key whose hash tag is the graph key up to
its first `}`; every other key of the group carries the tag `{lcg:<group>}`, so all of them share
one slot. Group ids are percent-encoded as the WAL's directory names are (`{` and `}` included),
so a group id can never break the tag.

Timestamps are stored as integer microseconds since 1970-01-01 UTC. Measured on FalkorDB 4.16.3:
`localdatetime('2024-01-02T03:04:05.123456')` keeps whole seconds only (the fraction is
dropped), and there is no zoned `datetime()`; an integer keeps every microsecond, orders as the
instants do, compares with `<`/`>=` in Cypher like Kuzu's TIMESTAMP, and covers the years
1950-2080 lcg's tests use (and far beyond).

Parameters travel as text in a `CYPHER name=value ...` header (FalkorDB has no binary
parameters); strings are double-quoted with `\\` and `"` escaped, which round-trips newlines,
quotes, backslashes, backticks and non-ASCII (measured: `param_string_round_trip`). A NUL
character cannot travel this way (FalkorDB's parser stops at it): such a string is refused.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from lcg.errors import StorageError
from lcg.wal.layout import decode_group, encode_group

__all__ = [
    "GRAPH_PREFIX",
    "META_KEY",
    "from_micros",
    "graph_key",
    "group_of_graph",
    "params_header",
    "stream_key",
    "to_micros",
]

GRAPH_PREFIX = "lcg:"
META_KEY = "{lcg}:meta"  # global meta entries (a hash); a group's own live in its graph
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def graph_key(group_id: str) -> str:
    return GRAPH_PREFIX + encode_group(group_id)


def stream_key(group_id: str) -> str:
    return "{" + graph_key(group_id) + "}:wal"


def group_of_graph(key: str) -> str | None:
    """The group a graph key stands for, or None for a key that is not one of lcg's graphs."""
    if not key.startswith(GRAPH_PREFIX):
        return None
    return decode_group(key[len(GRAPH_PREFIX) :])


def to_micros(value: datetime | None) -> int | None:
    """Microseconds since the epoch (UTC) of an aware datetime, exactly."""
    if value is None:
        return None
    delta = value.astimezone(UTC) - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_micros(value: int | None) -> datetime | None:
    if value is None:
        return None
    return _EPOCH + timedelta(microseconds=int(value))


def _literal(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise StorageError(f"a non-finite number cannot be stored: {value!r}")
        return repr(value)
    if isinstance(value, str):
        if "\x00" in value:
            raise StorageError("a string with a NUL character cannot be sent to FalkorDB")
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, datetime):
        return str(to_micros(value))
    if isinstance(value, list | tuple):
        return "[" + ",".join(_literal(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ",".join(f"`{_name(k)}`:{_literal(v)}" for k, v in value.items()) + "}"
    raise StorageError(f"cannot send a {type(value).__name__} as a Cypher parameter")


def _name(key: object) -> str:
    text = str(key)
    if not text or "`" in text:
        raise StorageError(f"invalid parameter name {text!r}")
    return text


def params_header(params: Mapping[str, Any] | None) -> str:
    """The `CYPHER k=v ...` prefix of a query (empty without parameters)."""
    if not params:
        return ""
    return "CYPHER " + " ".join(f"{_name(k)}={_literal(v)}" for k, v in params.items()) + " "
