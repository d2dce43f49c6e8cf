"""Giving back the reference Kuzu 0.11.3's Python binding leaks on every date and timestamp it reads.

The binding turns a DATE or TIMESTAMP value into a Python object with
`py::cast<py::object>(PyDateTime_FromDateAndTime(...))` (and `PyDate_FromDate`): the cast takes
a second reference to the new object instead of stealing the first, so every `datetime`/`date`
Kuzu hands back keeps a reference count one too high and is never freed, wherever it sits (a
column, a list element, a struct field, a node's property). 48 bytes a value, in Python's own
heap: tracemalloc sees it, `malloc_trim` does not return it. A read of 300 entities (one
TIMESTAMP each) kept 14 KB; `knowledge_get_nodes_by_group` grew the service by 20.7 MB per
1,500 calls (bench/results/kuzu-0.11.3.md has the measurements).

`give_back(rows, types)` drops that extra reference from every `datetime`/`date` in rows read
through the binding, once the rows are built. It only does so after `leak_per_value(conn)` has
measured, on this process's binding, that each temporal kind in each position (top level, list
element, struct field) carries exactly one extra reference; on a binding that does not leak (a
fixed Kuzu), or leaks in some other way, it does nothing, so it can never free a live object.
"""

from __future__ import annotations

import ctypes
import logging
import re
import sys
import threading
from collections.abc import Sequence
from datetime import date, datetime
from typing import Any

__all__ = ["give_back", "leak_per_value"]

logger = logging.getLogger(__name__)

_decref = ctypes.pythonapi.Py_DecRef
_decref.argtypes = [ctypes.py_object]
_decref.restype = None

# Each temporal kind the binding converts, at the top level, inside a list and inside a struct.
_KINDS = (
    "timestamp('2000-01-01 00:00:00.5')",
    "date('2000-01-01')",
    "CAST(timestamp('2000-01-01 00:00:00') AS TIMESTAMP_TZ)",
    "CAST(timestamp('2000-01-01 00:00:00') AS TIMESTAMP_NS)",
    "CAST(timestamp('2000-01-01 00:00:00') AS TIMESTAMP_MS)",
    "CAST(timestamp('2000-01-01 00:00:00') AS TIMESTAMP_SEC)",
)
_PROBE = "RETURN " + ", ".join(f"{k}, [{k}], {{v: {k}}}" for k in _KINDS)

# Column types whose values hold no date or timestamp at any depth: not walked (only speed
# depends on this list; walking any column is safe, it only touches datetime/date objects).
_PLAIN = re.compile(
    r"(STRING|BOOL|SERIAL|BLOB|UUID|INTERVAL|DOUBLE|FLOAT|U?INT(8|16|32|64|128)?|DECIMAL\(\d+, ?\d+\))"
    r"(\[\d*\])*"
)

_lock = threading.Lock()
_leak: int | None = None  # extra references per value on this binding, once measured


def _extra_refs(row: Sequence[Any]) -> set[int]:
    """The extra references of the probe row's temporal values (2 = the container's + the
    argument's)."""
    counts = set()
    for i in range(0, len(row), 3):
        counts.add(sys.getrefcount(row[i]) - 2)
        counts.add(sys.getrefcount(row[i + 1][0]) - 2)
        counts.add(sys.getrefcount(row[i + 2]["v"]) - 2)
    return counts


def leak_per_value(raw_conn: Any) -> int:
    """How many references the binding leaks per date/timestamp value: 1 on Kuzu 0.11.3, 0 on
    one that does not leak (also 0, with a warning, when the leak is not uniform: then it is
    not repaired). Measured once per process on `raw_conn` (a `kuzu.Connection`).

    Raises:
        RuntimeError: Kuzu refused the probe query.
    """
    global _leak
    with _lock:
        if _leak is None:
            result = raw_conn.execute(_PROBE)
            row = result.get_next()
            result.close()
            extra = _extra_refs(row)
            if extra == {1}:
                _leak = 1
                _give_back_row(row)  # the probe's own values go too
            else:
                _leak = 0
                if extra != {0}:
                    logger.warning(
                        "Kuzu's binding returns dates/timestamps with extra references %s; "
                        "not repaired (reads of them will hold memory)",
                        sorted(extra),
                    )
        return _leak


def _give_back_value(value: Any) -> None:
    kind = type(value)
    if kind is datetime or kind is date:
        _decref(value)
    elif kind is list:
        for item in value:
            _give_back_value(item)
    elif kind is dict:
        for key, item in value.items():
            _give_back_value(key)
            _give_back_value(item)


def _give_back_row(row: Sequence[Any]) -> None:
    for value in row:
        _give_back_value(value)


def give_back(rows: Sequence[Sequence[Any]], types: Sequence[str]) -> None:
    """Drop the leaked reference of every date/timestamp in `rows`, just read through the
    binding (each value exactly once: call it once per fetch), whose columns have Kuzu types
    `types`; nothing unless `leak_per_value` found the uniform one-reference leak."""
    if _leak != 1 or not rows:
        return
    walk = [i for i, name in enumerate(types) if not _PLAIN.fullmatch(name)]
    if not walk:
        return
    for row in rows:
        for i in walk:
            _give_back_value(row[i])
