"""The engine-upgrade check: the embedded engine's known defects, re-measured.

    python bench/engine_check.py [--engine ladybug|kuzu] [--quick] [--only NAME ...]

Each check runs in a child process of its own (one engine per process, and a crash is a
verdict, not the end of the run) against the engine's own Python API, the way lcg's storage
layer drives it (`max_num_threads=1`, `auto_checkpoint=False`, prepared statements). It
prints one JSON object (`common.emit`): per check its figures, whether the defect showed
(`defect`) and what lcg expects of that engine (`expected`, from `EXPECTED`, which
src/lcg/storage/README.md explains). It exits 1 when a defect lcg relies on being fixed shows
again (a reintroduced defect, or an unexpected crash), and names those in `reintroduced`; a
known defect that no longer shows is listed in `now_fixed` (update `EXPECTED` and the storage
layer's workaround then; `not_shown_at_quick_sizes` in a quick run, whose sizes may be too small
to show it) and does not fail the run.

`--quick` (CI, under 2 minutes on a shared 2-core machine) runs every check at a smaller size.
The checks: string dictionary growth per checkpoint, a NULL written after a checkpointed
update, native memory kept per CHECKPOINT and per COPY, the cost of an UNWIND key lookup as
the table grows (and of an IN-list), writes after ROLLBACK, CHECKPOINT after a rolled-back
failed COPY, close() after a COPY rolled back into a table with committed rows not yet
checkpointed (a child process: it aborts) and the same close with its checkpoint turned off,
whether lcg's drop of the binding's cached COPY statement still frees the table it scanned,
the file lock after close() with a live prepared statement, the reference count
of DATE/TIMESTAMP values read, a soak of small writes each followed by a checkpoint, and the
buffer pool kept by live `UNION ALL` lookup statements.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import datetime as dt
import gc
import importlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common import emit, rss_mb

# What lcg expects of each engine: True, the defect is known there and worked around (it may
# show); False, lcg relies on its absence (it showing is a reintroduced defect).
EXPECTED: dict[str, dict[str, bool]] = {
    "ladybug": {
        "dictionary_growth": False,
        "null_after_update": False,
        "checkpoint_memory": False,
        "copy_memory": True,
        "copy_keeps_frame": True,
        "key_lookup_unwind": False,
        "key_lookup_unwind_pairs": False,
        "key_lookup_unwind_joined": True,
        "key_lookup_in_list": True,
        "rollback_writes": False,
        "copy_rollback_checkpoint": True,
        "copy_rollback_close": True,
        "copy_rollback_close_guarded": False,
        "copy_frame_forgotten": False,
        "close_with_statement": True,
        "timestamp_refs": True,
        "small_write_soak": False,
        "union_statement_pool": True,
    },
    "kuzu": {
        "dictionary_growth": True,
        "null_after_update": True,
        "checkpoint_memory": True,
        "copy_memory": False,
        "copy_keeps_frame": False,
        "key_lookup_unwind": True,
        "key_lookup_unwind_pairs": True,
        "key_lookup_unwind_joined": True,
        "key_lookup_in_list": True,
        "rollback_writes": True,
        "copy_rollback_checkpoint": False,
        "copy_rollback_close": True,
        "copy_rollback_close_guarded": False,
        "copy_frame_forgotten": False,
        "close_with_statement": False,
        "timestamp_refs": True,
        "small_write_soak": True,
        "union_statement_pool": False,
    },
}

_POOL = 256 * 1024 * 1024


class Db:
    """One database of the engine under test, opened as lcg's store opens it."""

    def __init__(self, engine: Any, path: Path, pool: int = _POOL) -> None:
        self.m = engine
        self.path = path
        self.pool = pool
        self.db = engine.Database(
            str(path), buffer_pool_size=pool, max_num_threads=1, auto_checkpoint=False
        )
        self.conn = engine.Connection(self.db, num_threads=1)
        self._prepared: dict[str, Any] = {}

    def run(self, query: str, params: dict[str, Any] | None = None) -> list[list[Any]]:
        if params:
            statement = self._prepared.get(query)
            if statement is None:
                statement = self._prepared[query] = self.conn._prepare(query)
            result = self.conn.execute(statement, params)
        else:
            result = self.conn.execute(query)
        rows = list(result.get_all())
        result.close()
        return rows

    def close(self) -> None:
        self._prepared.clear()
        self.conn.close()
        self.db.close()

    def reopen(self) -> Db:
        self.close()
        return Db(self.m, self.path, self.pool)


def _trim() -> None:
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).malloc_trim(0)


def _fill(db: Db, rows: int, text: Callable[[int], str]) -> dict[str, str]:
    db.run("CREATE NODE TABLE T(uuid STRING PRIMARY KEY, s STRING, n INT64)")
    want = {f"k{i:07d}": text(i) for i in range(rows)}
    items = list(want.items())
    for i in range(0, len(items), 2000):
        batch = [{"u": u, "s": s, "n": 0} for u, s in items[i : i + 2000]]
        db.run("UNWIND $rows AS r CREATE (:T {uuid: r.u, s: r.s, n: r.n})", {"rows": batch})
    db.run("CHECKPOINT")
    return want


def _wrong(db: Db, want: dict[str, str | None]) -> int:
    got = dict(db.run("MATCH (t:T) RETURN t.uuid, t.s"))
    return sum(1 for u, s in want.items() if got.get(u, "<missing>") != s)


# -- the checks (each runs in a child process: `--child NAME`) ----------------------------------


def dictionary_growth(db: Db, quick: bool) -> dict[str, Any]:
    """Every row's string updated, then CHECKPOINT, several times: Kuzu copied the string
    dictionary at each checkpoint (a 10k-row file 4.5 -> 21 MB in 8 rounds)."""
    rows, rounds = (4000, 8) if quick else (10000, 8)
    _fill(db, rows, lambda i: f"value {i} ".ljust(60, "x"))
    sizes = []
    for r in range(rounds):
        db.run("MATCH (t:T) SET t.s = 'round ' + CAST($r AS STRING) + ' ' + t.uuid", {"r": r})
        db.run("CHECKPOINT")
        sizes.append(round(db.path.stat().st_size / 2**20, 2))
    # LadybugDB's file stays the same size to the byte; Kuzu's grew 38% in 5 quick rounds.
    return {"rows": rows, "file_mb_per_round": sizes, "defect": sizes[-1] > 1.25 * sizes[0]}


def null_after_update(db: Db, quick: bool) -> dict[str, Any]:
    """A checkpointed one-row update, then a new row whose string is NULL: Kuzu wrote the NULL
    in place and corrupted the chunk (9,999 of 10,001 rows read back wrong)."""
    rows = 3000 if quick else 10000
    want: dict[str, str | None] = dict(_fill(db, rows, lambda i: f"row {i} ".ljust(60, "y")))
    for k in range(2):
        key = f"k{7 + 2 * k:07d}"
        want[key] = f"updated {k}"
        db.run("MATCH (t:T {uuid: $u}) SET t.s = $s", {"u": key, "s": want[key]})
        db.run("CHECKPOINT")
    db.run("CREATE (:T {uuid: 'null-row', n: 1})")
    want["null-row"] = None
    db.run("CHECKPOINT")
    wrong = _wrong(db, want)
    db = db.reopen()
    wrong_after_reopen = _wrong(db, want)
    return {
        "rows": len(want),
        "wrong": wrong,
        "wrong_after_reopen": wrong_after_reopen,
        "defect": bool(wrong or wrong_after_reopen),
    }


def checkpoint_memory(db: Db, quick: bool) -> dict[str, Any]:
    """Native memory kept per CHECKPOINT (each after a one-row update): Kuzu kept ~290 KB
    until the Database closed."""
    checkpoints = 150 if quick else 400
    _fill(db, 2000, lambda i: f"s{i}")
    update = "MATCH (t:T {uuid: $u}) SET t.n = $n"
    for i in range(30):  # warm-up: statements, pages
        db.run(update, {"u": f"k{i:07d}", "n": -i})
        db.run("CHECKPOINT")
    _trim()
    before = rss_mb()
    for i in range(checkpoints):
        db.run(update, {"u": f"k{i % 2000:07d}", "n": i})
        db.run("CHECKPOINT")
    _trim()
    per = (rss_mb() - before) * 1024 / checkpoints
    return {"checkpoints": checkpoints, "kb_per_checkpoint": round(per, 1), "defect": per > 100}


def copy_memory(db: Db, quick: bool) -> dict[str, Any]:
    """Native memory kept per small COPY (50 rows, committed and checkpointed): LadybugDB
    keeps ~17 MB each until the Database is closed."""
    import pyarrow as pa

    copies = 8 if quick else 24
    db.run("CREATE NODE TABLE T(uuid STRING PRIMARY KEY, s STRING, n INT64)")
    db.run("CHECKPOINT")

    def one(r: int) -> None:
        frame = pa.table(  # noqa: F841  the COPY names it
            {
                "uuid": [f"c{r}-{i}" for i in range(50)],
                "s": [f"text {i}" for i in range(50)],
                "n": list(range(50)),
            }
        )
        db.conn.execute("COPY T FROM frame").close()
        db.run("CHECKPOINT")

    one(-1)
    _trim()
    before = rss_mb()
    for r in range(copies):
        one(r)
    _trim()
    per = (rss_mb() - before) / copies
    return {"copies": copies, "mb_per_copy": round(per, 2), "defect": per > 4}


def copy_keeps_frame(db: Db, quick: bool) -> dict[str, Any]:
    """Arrow memory still allocated after a COPY from a pyarrow table returned and committed,
    the table dropped: LadybugDB keeps the table until the connection closes (its binding's
    statement cache holds it bound; lcg's writer drops that statement: lcg.storage.spool)."""
    import gc

    import pyarrow as pa

    rows = 50_000 if quick else 500_000
    db.run("CREATE NODE TABLE T(uuid STRING PRIMARY KEY, s STRING)")
    before = pa.total_allocated_bytes()

    def one() -> int:
        frame = pa.table({"uuid": [f"k{i}" for i in range(rows)], "s": ["x" * 40] * rows})
        made = int(frame.nbytes)
        db.run("BEGIN TRANSACTION")
        db.conn.execute("COPY T FROM frame").close()
        db.run("COMMIT")
        return made

    made = one()
    gc.collect()
    kept = pa.total_allocated_bytes() - before
    return {
        "rows": rows,
        "table_mb": round(made / 2**20, 2),
        "kept_mb": round(kept / 2**20, 2),
        "defect": kept > made // 2,
    }


def _lookup_ms(db: Db, rows: int, text: str, reps: int, pairs: bool = False) -> float:
    import random

    rng = random.Random(rows)
    times = []
    for _ in range(reps):
        keys = [f"k{rng.randrange(rows):07d}" for _ in range(64)]
        rows_of: list[Any] = keys
        if pairs:  # rows of two endpoints, as lcg's UNWIND statements that create edges bind
            rows_of = [{"a": k, "b": keys[(i * 7) % 64]} for i, k in enumerate(keys)]
        started = time.perf_counter()
        db.run(text, {"keys": rows_of})
        times.append(time.perf_counter() - started)
    return round(statistics.median(times) * 1000, 3)


def _key_lookup(db: Db, quick: bool, text: str, pairs: bool = False) -> dict[str, Any]:
    """64 keys looked up in a table of n rows and of 25n rows (COPY-loaded, as a rebuild
    loads them): a lookup through the primary key costs about the same at both sizes, a scan
    many times more. Kuzu scanned for UNWIND (35.7 ms at 200k rows); both scan for IN."""
    import pyarrow as pa

    small, large = (2000, 50000) if quick else (8000, 200000)
    db.run("CREATE NODE TABLE T(uuid STRING PRIMARY KEY, s STRING, n INT64)")
    out: dict[str, Any] = {}
    loaded = 0
    for size in (small, large):
        frame = pa.table(  # noqa: F841  the COPY names it
            {
                "uuid": [f"k{i:07d}" for i in range(loaded, size)],
                "s": [f"summary {i} " + "x" * 80 for i in range(loaded, size)],
                "n": list(range(loaded, size)),
            }
        )
        db.conn.execute("COPY T FROM frame").close()
        db.run("CHECKPOINT")
        loaded = size
        _lookup_ms(db, size, text, 3, pairs)  # warm-up
        out[f"ms_at_{size}_rows"] = _lookup_ms(db, size, text, 9 if quick else 15, pairs)
    one = "MATCH (t:T {uuid: $u}) RETURN t.uuid, t.s"
    point = [db.run(one, {"u": f"k{i:07d}"}) for i in range(64)]  # prepare, warm
    started = time.perf_counter()
    for _ in range(3):
        point = [db.run(one, {"u": f"k{(i * 7919) % large:07d}"}) for i in range(64)]
    out["ms_64_point_lookups"] = round((time.perf_counter() - started) / 3 * 1000, 3)
    ratio = out[f"ms_at_{large}_rows"] / max(out[f"ms_at_{small}_rows"], 0.001)
    out["growth_for_25x_rows"] = round(ratio, 2)
    # A scan: the cost grows with the table, or one batch costs more than 64 point lookups.
    out["defect"] = ratio > 4 or out[f"ms_at_{large}_rows"] > out["ms_64_point_lookups"]
    del point
    return out


def key_lookup_unwind(db: Db, quick: bool) -> dict[str, Any]:
    return _key_lookup(db, quick, "UNWIND $keys AS u MATCH (t:T {uuid: u}) RETURN t.uuid, t.s")


def _pairs(db: Db, quick: bool, match: str) -> dict[str, Any]:
    return _key_lookup(db, quick, f"UNWIND $keys AS r {match} RETURN a.uuid, b.s", pairs=True)


def key_lookup_unwind_pairs(db: Db, quick: bool) -> dict[str, Any]:
    """Both endpoints of a row by key, a MATCH each: how lcg.storage.graph `_NEW_FACTS` and
    lcg.storage.bulk's UNWIND batches find the two ends of the edges they create."""
    return _pairs(db, quick, "MATCH (a:T {uuid: r.a}) MATCH (b:T {uuid: r.b})")


def key_lookup_unwind_joined(db: Db, quick: bool) -> dict[str, Any]:
    """The same in one comma-joined MATCH, which LadybugDB 0.22.0 answers with a scan
    (bench/results/ladybug-0.22.0.md, "Both endpoints of an UNWIND row"): lcg avoids it."""
    return _pairs(db, quick, "MATCH (a:T {uuid: r.a}), (b:T {uuid: r.b})")


def key_lookup_in_list(db: Db, quick: bool) -> dict[str, Any]:
    return _key_lookup(db, quick, "MATCH (t:T) WHERE t.uuid IN $keys RETURN t.uuid, t.s")


def rollback_writes(db: Db, quick: bool) -> dict[str, Any]:
    """Rows updated in a rolled-back transaction, written again (no CHECKPOINT between):
    Kuzu raised write-write conflicts (6 of 15 rounds) or segfaulted."""
    rounds = 15
    _fill(db, 30, lambda i: f"name {i}")
    update = "MATCH (t:T {uuid: $u}) SET t.s = $s, t.n = $n"
    conflicts = 0
    for r in range(rounds):
        keys = [f"k{i:07d}" for i in range(r, r + 10)]
        db.run("BEGIN TRANSACTION")
        for u in keys:
            db.run(update, {"u": u, "s": f"rolled {r}", "n": -r})
        db.run("ROLLBACK")
        try:
            db.run("BEGIN TRANSACTION")
            for u in keys:
                db.run(update, {"u": u, "s": f"kept {r}", "n": r})
            db.run("COMMIT")
        except RuntimeError:
            conflicts += 1
            with contextlib.suppress(RuntimeError):  # Kuzu may have rolled back already
                db.run("ROLLBACK")
            db.run("CHECKPOINT")
    return {"rounds": rounds, "rounds_with_conflicts": conflicts, "defect": conflicts > 0}


def copy_rollback_checkpoint(db: Db, quick: bool) -> dict[str, Any]:
    """A COPY that fails inside a transaction (it runs out of a small buffer pool), then
    ROLLBACK and CHECKPOINT, as a store would after any failed transaction: LadybugDB can
    segfault or abort there (the child's exit status says so)."""
    import pyarrow as pa

    db = Db(db.m, db.path.with_name("small.db"), pool=64 * 1024 * 1024)
    db.run("CREATE NODE TABLE T(uuid STRING PRIMARY KEY, s STRING, n INT64)")
    failed_at = None
    for r in range(60 if quick else 120):
        frame = pa.table(  # noqa: F841  the COPY names it
            {
                "uuid": [f"c{r}-{i}" for i in range(50)],
                "s": [f"text {i}" for i in range(50)],
                "n": list(range(50)),
            }
        )
        db.run("BEGIN TRANSACTION")
        try:
            db.conn.execute("COPY T FROM frame").close()
            db.run("COMMIT")
        except RuntimeError:
            failed_at = r
            # The engine may have ended the transaction itself, as lcg's store allows.
            with contextlib.suppress(RuntimeError):
                db.run("ROLLBACK")
            db.run("CHECKPOINT")  # a crash here is the defect
            break
        db.run("CHECKPOINT")
    count = db.run("MATCH (t:T) RETURN count(*)")[0][0]
    return {"copy_failed_at": failed_at, "rows": count, "defect": False}


def close_with_statement(db: Db, quick: bool) -> dict[str, Any]:
    """close() while a prepared statement made on the database is still referenced: another
    process must be able to open the file afterwards (LadybugDB keeps the lock)."""
    db.run("CREATE NODE TABLE T(uuid STRING PRIMARY KEY, s STRING, n INT64)")
    kept = db.conn._prepare("MATCH (t:T) WHERE t.uuid = $u RETURN t.s")
    db.conn.close()
    db.db.close()
    child = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import {db.m.__name__} as m, sys; m.Database(sys.argv[1]).close()",
            str(db.path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    del kept
    locked = child.returncode != 0
    lines = child.stderr.strip().splitlines() or [""]
    return {
        "other_process_opened": not locked,
        "error": next((x for x in lines if "lock" in x.lower()), lines[-1])[:160]
        if locked
        else None,
        "defect": locked,
    }


def timestamp_refs(db: Db, quick: bool) -> dict[str, Any]:
    """The reference count of a TIMESTAMP read back: one more than the row holds means each
    value read is never freed (Kuzu's binding; lcg.storage.leaked_refs gives it back)."""
    db.run("CREATE NODE TABLE D(k STRING PRIMARY KEY, at TIMESTAMP)")
    db.run("CREATE (:D {k: 'a', at: timestamp('2024-01-02 03:04:05')})")
    value = db.run("MATCH (d:D) RETURN d.at")[0][0]
    fresh = dt.datetime(2024, 1, 2, 3, 4, 5)
    extra = sys.getrefcount(value) - sys.getrefcount(fresh)
    return {"extra_references": extra, "defect": extra > 0}


def small_write_soak(db: Db, quick: bool) -> dict[str, Any]:
    """Rounds of one new row, one edge and one update, each round committed and followed by a
    CHECKPOINT; then every row read back, and again after a reopen. Kuzu filled its buffer
    pool at round 587 and read 1,760 of 1,764 rows wrong after the reopen."""
    rounds = 300 if quick else 1000
    db.run("CREATE NODE TABLE T(uuid STRING PRIMARY KEY, s STRING, n INT64)")
    db.run("CREATE REL TABLE L(FROM T TO T)")
    want: dict[str, str | None] = {}
    error = None
    try:
        for r in range(rounds):
            key = f"k{r:07d}"
            db.run("BEGIN TRANSACTION")
            db.run("CREATE (:T {uuid: $u, s: $s, n: $n})", {"u": key, "s": f"new {r}", "n": r})
            if r:
                db.run(
                    "MATCH (a:T {uuid: $a}), (b:T {uuid: $b}) CREATE (a)-[:L]->(b)",
                    {"a": f"k{r - 1:07d}", "b": key},
                )
                db.run(
                    "MATCH (t:T {uuid: $u}) SET t.s = $s", {"u": f"k{r // 2:07d}", "s": f"up {r}"}
                )
                want[f"k{r // 2:07d}"] = f"up {r}"
            want.setdefault(key, f"new {r}")
            db.run("COMMIT")
            db.run("CHECKPOINT")
    except RuntimeError as exc:
        error = f"round {r}: {str(exc)[:120]}"
    wrong = _wrong(db, want)
    db = db.reopen()
    wrong_after_reopen = _wrong(db, want)
    edges = db.run("MATCH (:T)-[l:L]->(:T) RETURN count(l)")[0][0]
    return {
        "rounds": rounds,
        "error": error,
        "wrong": wrong,
        "wrong_after_reopen": wrong_after_reopen,
        "edges": edges,
        "defect": bool(error or wrong or wrong_after_reopen or edges != len(want) - 1),
    }


def union_statement_pool(db: Db, quick: bool) -> dict[str, Any]:
    """Live prepared statements of 16 primary-key lookups joined by `UNION ALL`, each executed
    once and kept (as a connection's statement cache keeps them), in a 64 MB buffer pool:
    LadybugDB 0.22 keeps ~4.5 MB of pool per statement, so the 14th fails (and a whole-table
    read after a few); Kuzu keeps none. The same keys by one `UNWIND` statement each keep none."""
    db = Db(db.m, db.path.with_name("union.db"), pool=64 * 1024 * 1024)
    rows = 20_000 if quick else 100_000
    _fill(db, rows, lambda i: f"row {i} with words enough to fill a column chunk of strings")
    statements = 40 if quick else 120
    kept: list[Any] = []

    def kept_until_full(union: bool) -> int | None:
        kept.clear()
        for s in range(statements):
            keys = [f"k{(s * 16 + i) % rows:07d}" for i in range(16)]
            if union:
                query = " UNION ALL ".join(
                    f"MATCH (t:T {{uuid: $u{i}}}) RETURN t.uuid, t.s, {s} AS s" for i in range(16)
                )
                params: dict[str, Any] = {f"u{i}": k for i, k in enumerate(keys)}
            else:
                query = f"UNWIND $keys AS u MATCH (t:T {{uuid: u}}) RETURN t.uuid, t.s, {s} AS s"
                params = {"keys": keys}
            statement = db.conn._prepare(query)
            try:
                db.conn.execute(statement, params).close()
            except RuntimeError:
                return s
            kept.append(statement)
        return None

    union_failed_at = kept_until_full(union=True)
    kept.clear()
    unwind_failed_at = kept_until_full(union=False)
    kept.clear()
    return {
        "statements": statements,
        "pool_mb": 64,
        "union_failed_at": union_failed_at,
        "unwind_failed_at": unwind_failed_at,
        "defect": union_failed_at is not None,
    }


# The smallest sequence that aborted lcg's process: one row committed (not checkpointed) in a
# table, a COPY of more rows into it in a transaction, ROLLBACK, then close(), which runs a
# CHECKPOINT (LadybugDB 0.22.0: "malloc_consolidate(): invalid chunk size" or a segfault; Kuzu
# 0.11.3: a segfault). `guard` sets force_checkpoint_on_close=false before the close, as
# lcg's store does for a handle whose COPY was rolled back (lcg.storage.store `_rolled_back`).
_ROLLED_BACK_COPY = r"""
import sys, importlib
import pyarrow as pa
m = importlib.import_module(sys.argv[1])
db = m.Database(sys.argv[2], buffer_pool_size=64 * 2**20, max_num_threads=1, auto_checkpoint=False)
c = m.Connection(db, num_threads=1)
c.execute("CREATE NODE TABLE T(k STRING PRIMARY KEY, v STRING)")
c.execute("CREATE (:T {k: 'committed', v: 'x'})")
c.execute("BEGIN TRANSACTION")
frame = pa.table({"k": [f"k{i}" for i in range(100)], "v": ["v"] * 100})
c.execute("COPY T FROM frame")
c.execute("ROLLBACK")
if sys.argv[3] == "guard":
    c.execute("CALL force_checkpoint_on_close=false")
c.close()
db.close()
print("closed", flush=True)
"""


def _rolled_back_copy_close(db: Db, guard: bool) -> dict[str, Any]:
    child = subprocess.run(
        [
            sys.executable,
            "-c",
            _ROLLED_BACK_COPY,
            db.m.__name__,
            str(db.path.with_name("rolled-back-copy.db")),
            "guard" if guard else "plain",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    lines = child.stderr.strip().splitlines() or [""]
    return {
        "returncode": child.returncode,
        "stderr": lines[-1][:160] if child.returncode else None,
        "defect": child.returncode != 0,
    }


def copy_rollback_close(db: Db, quick: bool) -> dict[str, Any]:
    """close() after a rolled-back COPY into a table holding a committed row not checkpointed:
    the close's CHECKPOINT overruns a heap buffer and the process aborts (a child process)."""
    return _rolled_back_copy_close(db, guard=False)


def copy_rollback_close_guarded(db: Db, quick: bool) -> dict[str, Any]:
    """The same close with force_checkpoint_on_close=false first, what lcg's store does after a
    failed transaction that ran a COPY: it must not abort (nor the setting be refused)."""
    return _rolled_back_copy_close(db, guard=True)


def copy_frame_forgotten(db: Db, quick: bool) -> dict[str, Any]:
    """Whether lcg's `spool.forget_scans` still gives back the pyarrow table a COPY scanned
    (it drops the COPY statement from a private attribute of the binding): the table still
    allocated after it is the defect (lcg then says so and COPYs from a Parquet file)."""
    import pyarrow as pa

    from lcg.storage import spool

    rows = 20_000 if quick else 200_000
    db.run("CREATE NODE TABLE T(uuid STRING PRIMARY KEY, s STRING)")
    before = pa.total_allocated_bytes()

    def one() -> tuple[int, bool, bool]:
        frame = pa.table({"uuid": [f"k{i}" for i in range(rows)], "s": ["x" * 40] * rows})
        db.run("BEGIN TRANSACTION")
        db.conn.execute("COPY T FROM frame").close()
        db.run("COMMIT")
        has_cache = spool.holds_scans(db.conn)
        return int(frame.nbytes), has_cache, spool.forget_scans(db.conn) if has_cache else False

    made, has_cache, dropped = one()
    gc.collect()
    kept = pa.total_allocated_bytes() - before
    return {
        "binding_cache": has_cache,
        "dropped_copy_statement": dropped,
        "table_mb": round(made / 2**20, 2),
        "kept_mb": round(kept / 2**20, 2),
        "defect": kept > made // 2,
    }


CHECKS: dict[str, Callable[[Db, bool], dict[str, Any]]] = {
    f.__name__: f
    for f in (
        dictionary_growth,
        null_after_update,
        checkpoint_memory,
        copy_memory,
        copy_keeps_frame,
        key_lookup_unwind,
        key_lookup_unwind_pairs,
        key_lookup_unwind_joined,
        key_lookup_in_list,
        rollback_writes,
        copy_rollback_checkpoint,
        copy_rollback_close,
        copy_rollback_close_guarded,
        copy_frame_forgotten,
        close_with_statement,
        timestamp_refs,
        small_write_soak,
        union_statement_pool,
    )
}


def _child(engine: str, name: str, quick: bool) -> None:
    module = importlib.import_module(engine)
    home = Path(tempfile.mkdtemp(prefix=f"engine-check-{name}-"))
    try:
        started = time.process_time()
        result = CHECKS[name](Db(module, home / "check.db"), quick)
        result["cpu_s"] = round(time.process_time() - started, 2)
        print(json.dumps(result, default=str))
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _run(engine: str, name: str, quick: bool) -> dict[str, Any]:
    started = time.perf_counter()
    child = subprocess.run(
        [sys.executable, __file__, "--child", name, "--engine", engine]
        + (["--quick"] if quick else []),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    wall = round(time.perf_counter() - started, 2)
    if child.returncode != 0:
        tail = (child.stderr.strip().splitlines() or [""])[-1][:200]
        return {"crashed": child.returncode, "stderr": tail, "wall_s": wall, "defect": True}
    result: dict[str, Any] = json.loads(child.stdout.strip().splitlines()[-1])
    result["wall_s"] = wall
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--engine", default="ladybug", choices=sorted(EXPECTED))
    ap.add_argument("--quick", action="store_true", help="smaller sizes (CI, under 2 minutes)")
    ap.add_argument("--only", nargs="*", choices=sorted(CHECKS), help="these checks only")
    ap.add_argument("--child", choices=sorted(CHECKS), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(args.engine, args.child, args.quick)
        return
    version = subprocess.run(
        [sys.executable, "-c", f"import {args.engine} as m; print(m.__version__)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    expected = EXPECTED[args.engine]
    results = {}
    for name in args.only or CHECKS:
        result = _run(args.engine, name, args.quick)
        result["expected"] = expected[name]
        results[name] = result
        print(f"{name}: defect={result['defect']} ({result.get('wall_s')} s)", file=sys.stderr)
    reintroduced = [n for n, r in results.items() if r["defect"] and not r["expected"]]
    # Quick sizes may be too small to show a known defect (Kuzu's soak failed at round 587).
    not_shown = [n for n, r in results.items() if not r["defect"] and r["expected"]]
    emit(
        "engine_check",
        {
            "engine": f"{args.engine} {version}",
            "checks": results,
            "reintroduced": reintroduced,
            ("not_shown_at_quick_sizes" if args.quick else "now_fixed"): not_shown,
        },
        params={"quick": args.quick, "pid": os.getpid()},
    )
    sys.exit(1 if reintroduced else 0)


if __name__ == "__main__":
    main()
