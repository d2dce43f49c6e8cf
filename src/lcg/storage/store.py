"""The embedded database: choosing its engine, opening it safely, its connections,
transactions and checkpoints.

Two engines speak the same Python API: LadybugDB (`ladybug`, the default) and Kuzu 0.11.3
(`kuzu`, deprecated, kept selectable for one release; `LCG_EMBEDDED_STORE`). Their files are not
compatible either way, so `database_engine` tells which wrote a database: its file's header
(`LBUG` or `KUZU`), else the stamp file a new database gets beside it (`<db>.engine`), else Kuzu,
the only engine before stamps. Opening a database with the other engine raises `EngineMismatchError`
before the engine touches the file (the engine layer rebuilds it from the WAL).

Hazards this module answers (`EngineTraits` says which apply to which engine):
- the database is opened with `max_num_threads=1`: multi-threaded Kuzu crashed under an
  ingestion workload (its full-text queries, which lcg no longer runs), and nobody has shown
  that other workloads are safe with more threads;
- one writer: a single writer connection, used only inside `transaction()`, which callers
  serialise (the engine's write lock); readers use a small pool of their own connections;
- a connection whose `BEGIN TRANSACTION` failed is never used again;
- `auto_checkpoint=False`; `checkpoint()` runs only when no reader connection is checked out;
- deleting a database removes the file, its `.wal`, its `.lock` and its stamp;
- every prepared statement is released before its connection and database close: LadybugDB's
  `Database.close()` keeps the file lock and the address-space reservation while one is alive;
- Kuzu: after a ROLLBACK of a transaction that updated rows, later writes to those rows hit
  "write-write conflict" or segfault; a CHECKPOINT clears that state, so every rollback is
  followed by one (if it cannot run then, the next transaction runs it before it begins).
  LadybugDB has no such state, and a CHECKPOINT after rolling back a failed COPY can crash it:
  there a rollback is not followed by a checkpoint;
- both engines: after a rolled-back COPY into a table holding committed rows not yet
  checkpointed, any checkpoint of that handle overruns a heap buffer and the process aborts,
  and `Database.close()` runs one: a failed transaction that ran a COPY closes its handle
  without that checkpoint (`force_checkpoint_on_close=false`) and replaces it (`_rolled_back`);
- Kuzu: every CHECKPOINT keeps ~289 KB of native memory until the Database is closed, so every
  `EngineTraits.recycle_every` checkpoints the handle is reopened (`_recycle`); LadybugDB
  keeps none;
- LadybugDB: every `COPY` keeps ~17 MB of native memory until the Database is closed, so a
  commit that ran one reopens the handle after its checkpoint (`Store.copies_pending`); and
  it keeps the pyarrow table a COPY scanned until the connection closes (its binding's statement
  cache holds it), so that statement is dropped after each COPY (`lcg.storage.spool`).

Every engine exception becomes a `StorageError` here, chained to the original.
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import importlib.util  # noqa: F401  kuzu needs importlib.util imported before numpy parameters
import json
import logging
import queue
import re
import shutil
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lcg.errors import StorageError
from lcg.fsmodes import private_dir, private_file, write_private
from lcg.storage.leaked_refs import give_back, leak_per_value
from lcg.storage.schema import MIGRATIONS
from lcg.storage.spool import copy_via_file, forget_scans, holds_scans, remove_stale

__all__ = [
    "COMPANION_SUFFIXES",
    "DEFAULT_ENGINE",
    "ENGINES",
    "Conn",
    "EngineMismatchError",
    "EngineTraits",
    "ReentrantReadError",
    "Store",
    "database_engine",
    "default_engine",
    "delete_database_files",
    "engine_module",
    "engine_traits",
    "engine_version",
    "may_change_schema",
    "pool_mb",
    "schema_version",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class EngineTraits:
    """What lcg works around on one embedded engine (measured: bench/results/kuzu-0.11.3.md,
    bench/results/ladybug-0.22.0.md; re-checked by bench/engine_check.py)."""

    name: str  # the `LCG_EMBEDDED_STORE` value, and the Python module's name
    checkpoint_after_rollback: bool  # rows a rolled-back transaction updated stay conflicted
    recycle_every: int  # reopen the handle after this many checkpoints (0: never)
    copy_recycles: bool  # each COPY keeps native memory until the Database closes
    copy_keeps_frame: bool  # a COPY keeps the table it scanned until the connection closes
    unwind_lookups: bool  # an UNWIND that MATCHes by primary key is an index lookup
    deprecated: bool


ENGINES: dict[str, EngineTraits] = {
    "ladybug": EngineTraits(
        "ladybug",
        checkpoint_after_rollback=False,
        recycle_every=0,
        copy_recycles=True,
        copy_keeps_frame=True,
        unwind_lookups=True,
        deprecated=False,
    ),
    "kuzu": EngineTraits(
        "kuzu",
        checkpoint_after_rollback=True,
        # Kuzu 0.11.3 keeps ~289 KB of native memory per CHECKPOINT until its Database is
        # closed (300 checkpoints +85.8 MB, all back after close): after 32, the next
        # checkpoint that runs with no reader checked out reopens the handle (`_recycle`);
        # at one checkpoint per 100 commits every ~3,200 commits, ~9 MB at most.
        recycle_every=32,
        copy_recycles=False,
        copy_keeps_frame=False,
        unwind_lookups=False,
        deprecated=True,
    ),
}
DEFAULT_ENGINE = "ladybug"
# The engine of a database that has no stamp: Kuzu was the only engine before stamps.
_UNSTAMPED_ENGINE = "kuzu"
_STAMP_SUFFIX = ".engine"


class EngineMismatchError(StorageError):
    """The database at a path was created by another engine than the one asked for."""

    def __init__(self, path: Path, found: str, wanted: str) -> None:
        super().__init__(
            f"the database {path} was written by {found}, not {wanted}: its files cannot be "
            "opened by the other engine (rebuild it from the WAL)"
        )
        self.found = found
        self.wanted = wanted


def engine_traits(name: str) -> EngineTraits:
    """The traits of engine `name` (raises StorageError for an unknown one)."""
    try:
        return ENGINES[name]
    except KeyError:
        raise StorageError(
            f"unknown embedded engine {name!r}: one of {', '.join(ENGINES)}"
        ) from None


# The engine whose module this process imported: kuzu's and ladybug's native bindings register
# the same pybind11 types, so importing the second fails ("generic_type: type "Database" is
# already registered!") and the import attempt can leave the process to segfault. One process
# uses one engine.
_LOADED: list[str] = []


def _import(name: str) -> Any:
    """The engine's module, imported by name where it is needed (never both in one process)."""
    if name == "kuzu":
        import kuzu

        return kuzu
    import ladybug

    return ladybug


def engine_module(name: str) -> Any:
    """The Python module of engine `name` (`ladybug` or `kuzu`), imported on first use.

    Raises:
        StorageError: `name` is unknown or not installed, or this process already loaded the
            other engine (the two cannot share a process).
    """
    engine_traits(name)
    if _LOADED and _LOADED[0] != name:
        raise StorageError(
            f"this process already uses the {_LOADED[0]} engine: {name} cannot be loaded "
            "beside it (their native bindings clash); use one engine per process"
        )
    try:
        module = _import(name)
    except ImportError as exc:
        raise StorageError(f"the embedded engine {name!r} is not installed: {exc}") from exc
    if not _LOADED:
        _LOADED.append(name)
    return module


def default_engine() -> str:
    """The engine a `Store` opened without naming one uses: the one this process already
    loaded, else `DEFAULT_ENGINE`."""
    return _LOADED[0] if _LOADED else DEFAULT_ENGINE


def engine_version(name: str) -> str:
    """`<engine> <version>`, e.g. `ladybug 0.22.0`."""
    return f"{name} {engine_module(name).__version__}"


def _stamp_path(path: Path) -> Path:
    return Path(f"{path}{_STAMP_SUFFIX}")


# The first bytes of each engine's database file (its header's magic).
_MAGIC = {b"LBUG": "ladybug", b"KUZU": "kuzu"}


def database_engine(path: Path) -> str | None:
    """The engine that wrote the database at `path`: the one its file's header names, else its
    stamp's (a header not readable yet or damaged), else Kuzu's (a database made before stamps);
    None when no database is there (a stamp left alone means nothing)."""
    if not path.exists():
        return None
    try:
        with path.open("rb") as f:
            found = _MAGIC.get(f.read(4))
    except OSError:  # a directory (an old layout) or unreadable: the stamp decides
        found = None
    if found is not None:
        return found
    stamp = _stamp_path(path)
    try:
        recorded = json.loads(stamp.read_text(encoding="utf-8")).get("engine")
    except (OSError, ValueError, AttributeError):
        recorded = None
    if isinstance(recorded, str) and recorded in ENGINES:
        return recorded
    return _UNSTAMPED_ENGINE


def _write_stamp(path: Path, engine: str) -> None:
    stamp = _stamp_path(path)
    body = {"engine": engine, "version": engine_module(engine).__version__}
    tmp = stamp.with_name(stamp.name + ".tmp")
    write_private(tmp, json.dumps(body) + "\n")
    tmp.replace(stamp)


# Statements that leave the writer's view of `Meta` as it was; any other parameterless
# statement on the writer (migrations, ROLLBACK, raw Cypher, a bulk COPY) empties it (`Conn.meta`).
_KEEPS_META = frozenset({"BEGIN TRANSACTION", "COMMIT", "CHECKPOINT"})
# The words without which a statement cannot change the schema (table, index, sequence, type,
# macro or extension DDL); a parameterless statement on the writer holding one of them outside
# its string literals, or a ROLLBACK (which may undo DDL), invalidates every connection's
# prepared statements (`_SchemaEpoch`). Read-only raw Cypher holds none of them as a keyword, so
# it leaves every connection's statements in place: re-preparing them all after each such query
# kept native memory on each prepare (16 read-only clients grew from 260 to 1,249 MB in 180 s).
# A property or label spelled like one of them only costs an unneeded invalidation.
_SCHEMA_WORDS = re.compile(
    r"\b(TABLE|INDEX|ALTER|DROP|SEQUENCE|TYPE|MACRO|INSTALL|LOAD|ATTACH|DETACH|IMPORT|"
    r"ROLLBACK|(CREATE|DROP)_(FTS|VECTOR)_INDEX)\b",
    re.IGNORECASE,
)
_LITERALS = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")


def may_change_schema(query: str) -> bool:
    """Whether parameterless statement `query` may change the schema (see `_SCHEMA_WORDS`)."""
    return _SCHEMA_WORDS.search(_LITERALS.sub("''", query)) is not None


# Prepared statements kept per connection (least recently used goes first). lcg's own code has
# far fewer distinct parameterised statements than this, so eviction only happens if some path
# builds statement text from values; an evicted statement's native memory is not all returned,
# which is why the bound is generous rather than tight.
_PREPARED_MAX = 512
# How a lookup of k keys is run (`point_limit`): one prepared primary-key statement per key costs
# ~0.3 ms a key at any table size; one `UNWIND` query, which Kuzu 0.11 plans as a hash join over
# the whole table, costs ~0.45 ms plus, per 1,000 rows of the table, ~0.1 ms for each column it
# returns or sets and ~0.1 ms on top, whatever k (measured, bench/results/kuzu-0.11.3.md: 8 keys at 20k
# rows 7-11 ms returning the key, 16-20 ms returning an Entity's 8 columns, against 2.2-3.2 ms
# key by key; 90 ms for the 8 columns at 100k). So keys go one by one while k * per-key cost is
# below the UNWIND's cost at the table's size and width: for a whole Entity row ~7 keys at 2k
# rows, ~60 at 20k; for one column ~2 at 2k, ~68 at 100k.
_UNWIND_BASE_MS = 0.45
_UNWIND_MS_PER_ROW = 0.0001
_UNWIND_MS_PER_ROW_COLUMN = 0.0001
_POINT_MS = 0.3
# A table's row count is an estimate, recounted (~0.7 ms at 100k rows) after this many uses.
_RECOUNT_EVERY = 128


def _malloc_trim() -> Any:
    """glibc's `malloc_trim`, or None where the C library has none."""
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None


# Called after each CHECKPOINT: Kuzu frees the old versions of the rows updated since the last
# one, and glibc keeps most of that freed memory mapped (in-process, 1,000 entity updates grew
# RSS by 22-31 MB, of which a `malloc_trim` gave back all but ~5-10 MB).
_TRIM = _malloc_trim()


class _SchemaEpoch:
    """A counter shared by one database's connections, bumped when the schema may have changed.

    Each connection compares it with the value its statement cache was filled under and drops
    the cache when they differ, so no prepared plan outlives a schema change made on another
    connection. (Kuzu 0.11.3 re-binds a stale prepared statement or fails it with a binder
    error rather than crashing, measured; dropping the cache keeps that path rare.)
    """

    def __init__(self) -> None:
        self.value = 0

    def bump(self) -> None:
        self.value += 1


class ReentrantReadError(StorageError):
    """A second pooled reader connection was asked for while one is held (a deadlock hazard)."""


# The stores (by id) whose reader connection the current context holds: a ContextVar, so a
# thread or task sees its own holds and those of the block that started it.
_HELD_READERS: contextvars.ContextVar[frozenset[int]] = contextvars.ContextVar(
    "lcg_held_readers", default=frozenset()
)


class Conn:
    """One engine connection with error translation. Not thread-safe: one user at a time.

    Every parameterised statement is prepared once per connection and re-executed from a
    bounded LRU cache keyed by its text: Kuzu 0.11.3 leaks native memory on every
    `execute(text, params)` (and on every fresh prepare), and not on re-executing a prepared
    statement (bench/results/kuzu-0.11.3.md). It also saves planning, half the cost
    of a one-row write. Kuzu 0.11.3 deprecates its public `prepare` (with a warning) but still
    executes prepared statements; `_prepare` is the same call without the warning.
    Parameterless statements run unprepared (they do not leak). On the writer
    (`schema_owner=True`), a parameterless statement that may change the schema (migrations,
    ROLLBACK, DDL sent as raw Cypher: `may_change_schema`) bumps the database's schema epoch,
    which empties every connection's cache before its next statement; read-only raw Cypher
    leaves them. Before its connection closes, its statements are released (`release`).

    Rows are only materialised here (`rows`, `columns_and_rows`), which give back the reference
    the binding leaks on every date and timestamp value (`lcg.storage.leaked_refs`): a caller
    that fetches from `run()`'s result itself must not read TIMESTAMP/DATE columns as Python
    objects (`search_rows` reads them through Arrow, which does not leak).
    """

    def __init__(
        self,
        raw: Any,
        epoch: _SchemaEpoch | None = None,
        *,
        schema_owner: bool = False,
        traits: EngineTraits | None = None,
    ) -> None:
        self._raw = raw
        self._epoch = epoch or _SchemaEpoch()
        self._schema_owner = schema_owner
        self.traits = traits or ENGINES[DEFAULT_ENGINE]
        self._prepared: OrderedDict[str, Any] = OrderedDict()
        self._prepared_at = self._epoch.value
        self.prepares = 0  # statements prepared on this connection (tests and benchmarks read it)
        self.copies = 0  # COPY statements run on this connection (`Store.copies_pending`)
        # Whether a bulk load may COPY (storage.bulk): the store clears it on LadybugDB once the
        # database holds more than bulk loads.
        self.copy_ok = True
        self.bulk_loads = 0  # bulk loads run on this connection (storage.bulk)
        # The database beside which `copy_from` spools a table to a file when the engine would
        # keep the table (set on the writer; None: COPY from the table itself).
        self.spool_beside: Path | None = None
        self._sizes: dict[str, list[int]] = {}  # table -> [rows, uses before a recount]
        self._meta: dict[str, str | None] = {}  # writer: Meta values it read or wrote (`meta`)
        self._meta_valid = True
        try:
            leak_per_value(raw)  # measured once per process, on the first connection
        except RuntimeError as exc:
            raise StorageError(str(exc)) from exc

    @property
    def prepared_count(self) -> int:
        """How many prepared statements this connection holds now."""
        return len(self._prepared)

    def meta(self) -> dict[str, str | None] | None:
        """On the writer, the `Meta` values (None: no row) it read or wrote itself, by key, for
        `graph.get_meta`/`set_meta` to keep: only the writer writes Meta, through `set_meta`,
        and anything else that could change it (a ROLLBACK, raw Cypher, a migration, a bulk
        COPY: every parameterless statement but BEGIN/COMMIT/CHECKPOINT) empties it. None on a
        reader (its snapshot may be older than the writer's view). An episode commit read two
        Meta rows and merged one (~1.5 ms)."""
        if not self._schema_owner:
            return None
        if not self._meta_valid:
            self._meta.clear()
            self._meta_valid = True
        return self._meta

    def _statement(self, query: str) -> Any:
        """The prepared statement for `query`, prepared on first use (raises RuntimeError)."""
        if self._prepared_at != self._epoch.value:
            self._prepared.clear()
            self._prepared_at = self._epoch.value
        statement = self._prepared.get(query)
        if statement is not None:
            self._prepared.move_to_end(query)
            return statement
        statement = self._raw._prepare(query)
        self.prepares += 1
        self._prepared[query] = statement
        if len(self._prepared) > _PREPARED_MAX:
            self._prepared.popitem(last=False)
        return statement

    def _execute_prepared(self, query: str, params: dict[str, Any]) -> Any:
        """Execute `query`'s cached statement; one that fails leaves the cache (raises
        RuntimeError), so a statement a schema change broke is prepared afresh next time."""
        statement = self._statement(query)
        try:
            return self._raw.execute(statement, params)
        except RuntimeError:
            self._prepared.pop(query, None)
            raise

    def run(self, query: str, params: dict[str, Any] | None = None) -> Any:
        try:
            if not params:
                if self._schema_owner and query not in _KEEPS_META:
                    self._meta_valid = False
                    if may_change_schema(query):
                        self._epoch.bump()
                return self._raw.execute(query, {})
            return self._execute_prepared(query, params)
        except RuntimeError as exc:
            raise StorageError(str(exc)) from exc

    def rows(self, query: str, params: dict[str, Any] | None = None) -> list[list[Any]]:
        result = self.run(query, params)
        try:
            rows = list(result.get_all())
            if rows:
                give_back(rows, result.get_column_data_types())
            return rows
        except RuntimeError as exc:
            raise StorageError(str(exc)) from exc
        finally:
            result.close()

    def table_rows(self, table: str) -> int:
        """About how many rows node table `table` holds (recounted every `_RECOUNT_EVERY` uses;
        it only chooses how statements run, never what they do)."""
        entry = self._sizes.get(table)
        if entry is None or entry[1] <= 0:
            try:
                result = self._raw.execute(f"MATCH (x:{table}) RETURN count(*)")
                entry = self._sizes[table] = [int(result.get_all()[0][0]), _RECOUNT_EVERY]
            except RuntimeError as exc:
                raise StorageError(str(exc)) from exc
        entry[1] -= 1
        return entry[0]

    def point_limit(
        self, table: str, per_key_ms: float = _POINT_MS, columns: int = 1, *, lookup: bool = True
    ) -> int:
        """The most keys worth handling one prepared statement per key (`per_key_ms` each) in
        `table` rather than one `UNWIND` that scans the table and carries `columns` of each
        row (see `_UNWIND_BASE_MS`). On an engine whose `UNWIND` finds keys through the
        primary-key index (LadybugDB: 64 keys in 0.44 ms at 200k rows) that is one key when the
        many-key statement is such a node lookup (`lookup`); one that follows relationships from
        the keys is planned as a scan there (1M facts, 16 keys: provenance by `UNWIND` 313 ms
        CPU against 1.9 ms one by one, `facts_around` by `IN` 99 ms against 3.4 ms), so then
        every key goes one by one."""
        if self.traits.unwind_lookups:
            return 1 if lookup else sys.maxsize
        per_row = _UNWIND_MS_PER_ROW + _UNWIND_MS_PER_ROW_COLUMN * max(1, columns)
        unwind_ms = _UNWIND_BASE_MS + self.table_rows(table) * per_row
        return int(unwind_ms / per_key_ms)

    def point_rows(
        self,
        one: str,
        many: str,
        keys: Sequence[Any],
        params: dict[str, Any] | None = None,
        *,
        table: str,
        columns: int = 1,
        lookup: bool = True,
    ) -> list[list[Any]]:
        """Rows for each key: `one` matches a primary key `$u` of `table`, `many` is the same
        query over `UNWIND $keys AS u`; both return `columns` columns. Up to
        `point_limit(table, lookup=lookup)` keys are looked up one by one with the connection's
        prepared statement; more go in one `many` query (`lookup`: `many` only matches nodes
        by key, it follows no relationship). `params` are passed to both."""
        if not keys:
            return []
        extra = params or {}
        if len(keys) > self.point_limit(table, columns=columns, lookup=lookup):
            return self.rows(many, {**extra, "keys": list(keys)})
        out: list[list[Any]] = []
        for key in keys:
            out += self.rows(one, {**extra, "u": key})
        return out

    def columns_and_rows(self, query: str) -> tuple[list[str], list[list[Any]]]:
        result = self.run(query)
        try:
            rows = list(result.get_all())
            if rows:
                give_back(rows, result.get_column_data_types())
            return list(result.get_column_names()), rows
        except RuntimeError as exc:
            raise StorageError(str(exc)) from exc
        finally:
            result.close()

    def scalar(self, query: str, params: dict[str, Any] | None = None) -> Any:
        rows = self.rows(query, params)
        return rows[0][0] if rows else None

    def copy_from(self, table: str, frame: Any, options: str = "") -> None:
        """`COPY <table> FROM <pyarrow table>` (the engine resolves the variable by name); where
        the engine would keep the table alive, the binding's statement that holds it is dropped
        after, or, on a binding that does not expose it, the COPY reads a Parquet file of the
        table (`lcg.storage.spool`)."""
        self.copies += 1
        keeps = self.traits.copy_keeps_frame
        spool = self.spool_beside if keeps and not holds_scans(self._raw) else None
        if spool is not None and copy_via_file(self.run, table, frame, options, spool):
            return
        arrow_frame = frame  # noqa: F841  referenced by name inside the COPY statement
        try:
            self.run(f"COPY {table} FROM arrow_frame{options}")
        except BaseException:
            if keeps:
                forget_scans(self._raw, copied=False)
            raise
        if keeps:
            forget_scans(self._raw)  # never raises: a failure here would fail the COPY

    def release(self) -> None:
        """Drop this connection's prepared statements: LadybugDB's `Database.close()` keeps
        the file lock and its address-space reservation while any statement made from it is
        still referenced."""
        self._prepared.clear()

    def close(self) -> None:
        self.release()
        with contextlib.suppress(RuntimeError):
            self._raw.close()


def schema_version(conn: Conn) -> int:
    """The schema version recorded in the database `conn` belongs to (0: none recorded)."""
    value = conn.scalar("MATCH (m:Meta {key: 'schema_version'}) RETURN m.value")
    return int(value) if value is not None else 0


# Database handles that must never be closed nor freed (`_keep_open_for_ever`).
_NEVER_CLOSED: list[Any] = []


def _keep_open_for_ever(db: Any) -> None:
    """Keep engine handle `db` alive until the process ends, its destructor never run (even at
    interpreter shutdown: one reference is never given back), for a handle whose close would
    checkpoint state the engine cannot checkpoint (`Store._rolled_back`)."""
    _NEVER_CLOSED.append(db)
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(db))


# The files beside a database that belong to it (its journal, lock, shadow pages, stamp).
COMPANION_SUFFIXES = (".wal", ".lock", ".shadow", _STAMP_SUFFIX)


def delete_database_files(path: Path) -> None:
    """Remove a database: the file (or directory), `<path>.wal`, `.lock`, `.shadow`, stamp."""
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)
    for suffix in COMPANION_SUFFIXES:
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def _journal_unreadable(path: Path, exc: Exception) -> bool:
    """Whether opening the database at `path` failed on its own journal (`<path>.wal`): a record
    cut short or failing its checksum, as a kill inside the engine's write of it leaves it
    (LadybugDB 0.22 replays no torn tail: "Reading past the end of the file <path>.wal",
    "Checksum verification failed, the WAL file is corrupted")."""
    text = str(exc)
    journal = Path(f"{path}.wal")
    return journal.is_file() and (
        str(journal) in text or "WAL file is corrupted" in text or "Checksum verification" in text
    )


def set_aside(path: Path) -> Path:
    """Rename the database at `path` and its companion files to `<path>.damaged-<UTC time>`
    (+ their suffixes), kept for inspection; the prefix they now share."""
    aside = Path(f"{path}.damaged-{datetime.now(UTC).strftime('%Y%m%dT%H%M%S%fZ')}")
    if path.exists():
        path.rename(aside)
    for suffix in COMPANION_SUFFIXES:
        companion = Path(f"{path}{suffix}")
        if companion.exists():
            companion.rename(Path(f"{aside}{suffix}"))
    return aside


def pool_mb(path: Path, configured: int = 0) -> int:
    """The buffer pool (MiB) to open the database at `path` with: `configured` if set, else
    sized to the graph: half the database file, at least 256 and at most 1024 MiB (1024 for a
    database not created yet: a rebuild bulk-loads it). Kuzu's pool becomes resident as pages
    are read, up to its size: 1024 MiB for every workspace let a large one's scans keep ~1 GB
    of pages on top of the search index."""
    if configured:
        return configured
    try:
        size_mb = path.stat().st_size // 2**20 if path.is_file() else None
    except OSError:
        size_mb = None
    if size_mb is None:
        return 1024
    return max(256, min(1024, size_mb // 2))


# How long a commit that ran a COPY waits for running reads before it reopens the handle to
# give back what LadybugDB keeps per COPY (if they do not finish, the next such commit tries).
_COPY_RECYCLE_DRAIN_SECONDS = 5.0


class Store:
    """An open embedded database with one writer connection and a pool of reader connections.

    Raises (at construction):
        EngineMismatchError: the database at `path` was written by another engine.
        StorageError: the engine cannot be loaded, or the database cannot be opened.
    """

    def __init__(
        self, path: Path, *, buffer_pool_mb: int = 0, readers: int = 2, engine: str | None = None
    ) -> None:
        self.path = path
        self.engine = engine or default_engine()
        self.traits = engine_traits(self.engine)
        found = database_engine(path)
        if found is not None and found != self.engine:
            raise EngineMismatchError(path, found, self.engine)
        self._module = engine_module(self.engine)
        if self.traits.deprecated:
            logger.warning(
                "the %s engine is deprecated and will be removed in the next release; "
                "LCG_EMBEDDED_STORE=%s (the default) rebuilds the workspace from its WAL",
                engine_version(self.engine),
                DEFAULT_ENGINE,
            )
        private_dir(path.parent)
        self._buffer_pool_mb = pool_mb(path, buffer_pool_mb)
        # Bytes of the journal before the open replayed it: none after a clean close (which
        # checkpoints), some after a crash (lcg.engine.applied checks the rows then).
        self.journal_at_open = self.journal_bytes()
        # A database this store creates holds only what bulk loads put there until another
        # transaction commits: a failed COPY into it is recovered by starting over (`_rolled_back`).
        self._fresh = found is None
        try:
            self._db = self._open_database()
        except StorageError as exc:
            if found is None or not _journal_unreadable(path, exc):
                raise
            aside = set_aside(path)
            logger.warning(
                "the database %s cannot replay its own journal (%s): set aside as %s.*; the "
                "workspace is rebuilt from its WAL",
                path,
                exc,
                aside,
            )
            found, self._fresh, self.journal_at_open = None, True, 0
            self._db = self._open_database()
        remove_stale(path)  # a killed bulk load's spool files (lcg.storage.spool)
        private_file(path)  # the engine creates its file under the process umask
        if found is None:
            _write_stamp(path, self.engine)
        self.checkpoints_since_open = 0
        self.recycles = 0  # database handles reopened to give back checkpoint or COPY memory
        self.copies_pending = 0  # COPYs committed since the handle opened (LadybugDB keeps memory)
        self._epoch = _SchemaEpoch()
        self._writer = self._connect(writer=True)
        self._reader_total = readers
        self._readers: queue.Queue[Conn] = queue.Queue()
        for _ in range(readers):
            self._readers.put(self._connect())
        self._busy_readers = 0
        self._busy_lock = threading.Lock()
        self._reads_open = threading.Event()  # cleared while a checkpoint drains the readers
        self._reads_open.set()
        # Kuzu keeps every committed update's old versions in memory until a CHECKPOINT
        # (~300 KB per one-entity update, measured: bench/results/kuzu-0.11.3.md), so the engine
        # checkpoints by commit count as well as by journal size.
        self.commits_since_checkpoint = 0
        self._closed = False
        self.rollbacks = 0
        self._checkpoint_owed = False  # a rollback's CHECKPOINT has not run yet
        # The handle saw a COPY rolled back and is not replaced yet: never checkpoint it
        # (`_rolled_back`).
        self._broken = False
        self.migrate()

    def _open_database(self) -> Any:
        try:
            return self._module.Database(
                str(self.path),
                buffer_pool_size=self._buffer_pool_mb * 1024 * 1024,
                max_num_threads=1,
                auto_checkpoint=False,
            )
        except RuntimeError as exc:
            raise StorageError(f"cannot open {self.path}: {exc}") from exc

    def _connect(self, *, writer: bool = False) -> Conn:
        try:
            raw = self._module.Connection(self._db, num_threads=1)
        except RuntimeError as exc:
            raise StorageError(str(exc)) from exc
        conn = Conn(raw, self._epoch, schema_owner=writer, traits=self.traits)
        if writer:
            conn.spool_beside = self.path
        return conn

    # -- schema ---------------------------------------------------------------------------

    def migrate(self) -> list[str]:
        """Apply the migrations not yet recorded; return their names."""
        w = self._writer
        w.run("CREATE NODE TABLE IF NOT EXISTS Meta(key STRING PRIMARY KEY, value STRING)")
        done = {
            row[0]
            for row in w.rows("MATCH (m:Meta) WHERE m.key STARTS WITH 'migration:' RETURN m.key")
        }
        applied = []
        for name, step in MIGRATIONS:
            key = f"migration:{name}"
            if key in done:
                continue
            step(w.run)
            w.run("MERGE (m:Meta {key: $k}) SET m.value = 'applied'", {"k": key})
            applied.append(name)
        w.run(
            "MERGE (m:Meta {key: 'schema_version'}) SET m.value = $v", {"v": str(len(MIGRATIONS))}
        )
        return applied

    @property
    def schema_version(self) -> int:
        """The recorded schema version, on a reader of its own: never use it while holding a
        connection (`read()` refuses that); pass the held one to `schema_version(conn)`."""
        with self.read() as r:
            return schema_version(r)

    # -- connections ----------------------------------------------------------------------

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Conn]:
        """The writer connection inside BEGIN ... COMMIT (ROLLBACK on any exception).

        Callers must serialise: Kuzu refuses a second write transaction instead of waiting.

        Raises:
            StorageError: Kuzu refused a statement, or the CHECKPOINT owed by an earlier
                rollback still cannot run (the write is refused rather than risked).
        """
        if self._broken:
            raise StorageError(
                f"{self.path}: the database handle of a failed COPY could not be replaced; "
                "restart the process"
            )
        if self._checkpoint_owed:
            self.checkpoint(force=True)
        conn = self._writer
        try:
            conn.run("BEGIN TRANSACTION")
        except StorageError:
            # A connection whose BEGIN failed segfaults on its next use: replace it.
            self._writer = self._connect(writer=True)
            raise
        copies, bulk_loads = conn.copies, conn.bulk_loads
        conn.copy_ok = self._fresh or not self.traits.copy_recycles
        try:
            yield conn
        except BaseException:
            self._rolled_back(copied=conn.copies > copies, bulk=conn.bulk_loads > bulk_loads)
            raise
        try:
            conn.run("COMMIT")
        except StorageError:
            self._rolled_back(copied=conn.copies > copies, bulk=conn.bulk_loads > bulk_loads)
            raise
        self.commits_since_checkpoint += 1
        if conn.bulk_loads == bulk_loads:
            self._fresh = False
        if conn.copies > copies and self.traits.copy_recycles:
            self.copies_pending += conn.copies - copies
            self.checkpoint(drain=_COPY_RECYCLE_DRAIN_SECONDS)

    def _rolled_back(self, *, copied: bool = False, bulk: bool = False) -> None:
        """End a failed transaction: ROLLBACK (if the engine has not already), then on Kuzu a
        CHECKPOINT, unless the transaction ran a COPY.

        On Kuzu, without the checkpoint, later writes to rows the rolled-back transaction
        updated fail with "write-write conflict" or segfault (bench/results/kuzu-0.11.3.md).
        A checkpoint that cannot run now (a reader outlasted Kuzu's wait) is owed:
        `transaction()` runs it first. LadybugDB needs none.

        A transaction that ran a COPY is different on both engines: once a COPY appended to a
        table holding committed rows not yet checkpointed has been rolled back, any checkpoint
        of that handle overruns a heap buffer (LadybugDB aborts, "malloc_consolidate(): invalid
        chunk size"; Kuzu segfaults), and `Database.close()` runs one. So that handle is never
        checkpointed again, not even by its close (`_replace_after_failed_copy`): a database
        that holds only bulk-loaded rows starts over empty (the next catch-up loads it again
        from the WAL), any other one is reopened from its files.
        """
        self.rollbacks += 1
        with contextlib.suppress(StorageError):
            self._writer.run("ROLLBACK")
        if copied:
            self._checkpoint_owed = False  # a fresh handle has no rolled-back state to clear
            self._replace_after_failed_copy(start_over=bulk and self._fresh)
            return
        self._checkpoint_owed = self.traits.checkpoint_after_rollback
        if not self._checkpoint_owed:
            return
        try:
            self.checkpoint(force=True)
        except StorageError:
            logger.warning("no checkpoint after a rollback; the next write runs it first")

    def _replace_after_failed_copy(self, *, start_over: bool) -> None:
        """(After a rolled-back COPY.) Close the handle without the checkpoint its close would
        run (`_close_without_checkpoint`), then start a fresh database over (`start_over`: a
        bulk load into one that holds only bulk loads), else reopen the files.

        Raises:
            StorageError: a reader did not finish, or the engine cannot close the handle
                without a checkpoint and it is not started over (the handle is kept open and
                unused: the store refuses writes and checkpoints until the process restarts).
        """
        logger.warning(
            "a COPY failed on %s: %s",
            self.path,
            "starting the database over empty" if start_over else "reopening its handle",
        )
        self._broken = True  # no checkpoint, no write on this handle from here on
        safe = self._close_without_checkpoint()
        if not safe:
            _keep_open_for_ever(self._db)
            if not start_over:
                raise StorageError(
                    f"{self.path}: after a failed COPY the database handle can neither be "
                    "checkpointed nor closed safely; restart the process"
                )
        if not self._close_handles(timeout=10.0, database=safe):
            raise StorageError(f"{self.path}: a reader did not finish after a failed COPY")
        if start_over:
            delete_database_files(self.path)
        self._db = self._open_database()
        if start_over:
            _write_stamp(self.path, self.engine)
        self._reopen_connections()
        self._broken = False
        if start_over:
            self.migrate()

    def _close_without_checkpoint(self) -> bool:
        """Tell the engine not to checkpoint when the handle closes (`Database.close()` runs a
        CHECKPOINT unless the database's `force_checkpoint_on_close` is false); False when the
        engine refuses the setting (then the handle must never be closed or freed)."""
        try:
            self._writer.run("CALL force_checkpoint_on_close=false")
        except StorageError as exc:
            logger.error(
                "%s: the engine refused force_checkpoint_on_close=false (%s): the handle of "
                "the failed COPY is left open and unused for the rest of the process",
                self.path,
                exc,
            )
            return False
        return True

    @contextlib.contextmanager
    def writer(self) -> Iterator[Conn]:
        """The writer connection outside a transaction (for statements that manage their own)."""
        yield self._writer

    @contextlib.contextmanager
    def read(self) -> Iterator[Conn]:
        """A reader connection from the pool, for the duration of the block.

        A block may hold one reader of a store at a time: asking for a second while holding
        one (in the same thread, or in a task or worker thread started from inside the block,
        which inherit its context) raises instead of waiting, because with a pool of n such
        nested waits from n callers deadlock the service. Code that holds a connection passes
        it down.

        Raises:
            ReentrantReadError: this context already holds a reader connection of this store.
            StorageError: the store is closed (or closes while waiting for a connection).
        """
        held = _HELD_READERS.get()
        if id(self) in held:
            raise ReentrantReadError(
                f"a reader connection of {self.path} is already held here: pass it down "
                "instead of taking a second one (nested takes deadlock the pool)"
            )
        while True:
            if self._closed:
                raise StorageError(f"the database {self.path} is closed")
            if not self._reads_open.wait(0.1):  # a checkpoint is draining the readers
                continue
            try:
                conn = self._readers.get(timeout=0.1)
            except queue.Empty:
                continue
            if self._closed:  # a connection handed back after close: never used again
                self._readers.put(conn)
                raise StorageError(f"the database {self.path} is closed")
            with self._busy_lock:  # atomic with a checkpoint's check that no reader is active
                if self._reads_open.is_set():
                    self._busy_readers += 1
                    break
            self._readers.put(conn)  # a checkpoint started meanwhile: wait for it
        token = _HELD_READERS.set(held | {id(self)})
        try:
            yield conn
        finally:
            _HELD_READERS.reset(token)
            with self._busy_lock:
                self._busy_readers -= 1
            self._readers.put(conn)

    # -- maintenance ----------------------------------------------------------------------

    def journal_bytes(self) -> int:
        wal = Path(f"{self.path}.wal")
        return wal.stat().st_size if wal.exists() else 0

    def checkpoint(self, *, force: bool = False, drain: float = 0.0) -> bool:
        """Fold Kuzu's journal into the database file, only when no reader is active.

        Kuzu's checkpoint waits for readers to leave and stalls them meanwhile, so we do not
        start one while any reader connection is checked out, unless `force` (at close), or
        `drain` > 0: then new reads wait while the readers checked out finish (up to `drain`
        seconds; if they do not, nothing is done) and the checkpoint runs. A context that
        holds a reader itself never drains (it would wait for itself).
        """
        if force:
            return self._checkpoint()
        with self._busy_lock:
            busy = self._busy_readers
            if busy and (drain <= 0 or id(self) in _HELD_READERS.get()):
                return False
            self._reads_open.clear()  # no reader starts until the checkpoint is over
        try:
            if busy and not self.wait_idle(drain):
                return False
            # No reader is checked out and none starts: the handle may be reopened now.
            return self._checkpoint(recycle=True)
        finally:
            self._reads_open.set()

    def _checkpoint(self, *, recycle: bool = False) -> bool:
        if self._broken:
            raise StorageError(f"{self.path}: no checkpoint of a handle whose COPY failed")
        self._writer.run("CHECKPOINT")
        self._checkpoint_owed = False
        self.commits_since_checkpoint = 0
        self.checkpoints_since_open += 1
        every = self.traits.recycle_every
        if recycle and ((every and self.checkpoints_since_open >= every) or self.copies_pending):
            self._recycle()
        if _TRIM is not None:
            _TRIM(0)
        return True

    def _recycle(self) -> None:
        """Close and reopen the database handle, with fresh connections (their statement
        caches refill on use), to give back what Kuzu keeps per CHECKPOINT and LadybugDB per
        COPY. Only right after a checkpoint (the journal is empty), with reads held off and no
        reader checked out, and under the caller's write lock.

        Raises:
            StorageError: the database could not be reopened.
        """
        if not self._close_handles(timeout=10.0):
            logger.warning("a reader connection was not handed back: database not reopened")
            return
        self._db = self._open_database()
        self._reopen_connections()
        self.recycles += 1

    def _close_handles(self, timeout: float, *, database: bool = True) -> bool:
        """Take every reader back (waiting up to `timeout` each), then close them, the writer
        and (`database`) the database, statements first. False (nothing closed) if a reader is
        not back."""
        readers = []
        try:
            for _ in range(self._reader_total):  # a reader that lost the race puts its back
                readers.append(self._readers.get(timeout=timeout))
        except queue.Empty:
            for conn in readers:
                self._readers.put(conn)
            return False
        for conn in readers:
            conn.close()
        self._writer.close()
        if database:
            with contextlib.suppress(RuntimeError):
                self._db.close()
        return True

    def _reopen_connections(self) -> None:
        self._writer = self._connect(writer=True)
        for _ in range(self._reader_total):
            self._readers.put(self._connect())
        self.checkpoints_since_open = 0
        self.copies_pending = 0

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no reader connection is checked out; False if `timeout` seconds pass."""
        deadline = time.monotonic() + timeout
        while True:
            with self._busy_lock:
                if not self._busy_readers:
                    return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(StorageError):
            self.checkpoint(force=True)
        while True:
            try:
                self._readers.get_nowait().close()
            except queue.Empty:
                break
        self._writer.close()
        if self._broken:  # its close would checkpoint it (`_rolled_back`)
            _keep_open_for_ever(self._db)
            return
        with contextlib.suppress(RuntimeError):
            self._db.close()
