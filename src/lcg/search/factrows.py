"""`FactRows`: the rows the temporal lists read, held in memory.

An `as_of` page or a change window picks its candidates from the search index's fact columns
(lcg.temporal.columns); what it then needs from the store, each candidate's row, whether its
two structural hops exist and its endpoints' provenance (the episodes that mention them), cost
~300-400 Kuzu statements a page at 1M facts (0.3-1.3 ms each, however they are batched). This
holds them instead:

- every fact row as Arrow columns (endpoints, group, predicate and relation type dictionary
  encoded), found by uuid through a sorted array of the uuids' bytes;
- the uuids of the facts missing a hop (a set: few or none);
- every MENTIONS edge, sorted by entity, pointing into the episodes' (uuid,
  source_description, created_at, valid_at) columns, which also give the facts' own episodes
  their source and date (`episode_stamps`, lcg.temporal.provenance).

Saved at close beside the search index (Arrow IPC and .npy files, stamped with every group's
applied WAL position) and mapped when the index warms at open if the stamp still matches, so
they cost resident memory only for the pages reads touch. Otherwise built from one scan of each
table (`GraphReader.temporal_tables`) in a background thread, started by the first read that
needs them, which waits for it before taking its reader connection (`ready`, at most `WAIT_S`;
a read that still finds none reads the store; at 1M facts the scans
take ~10 s and leave ~0.7 GB more resident, Kuzu's buffer pool included, which is why an open
does not start one). Kept exact per row: each commit the search index applies
(`note_commit`) marks *dirty* the rows it may change (the facts it upserts or invalidates, the
entities it adds mentions to, those mentioning an episode it re-adds), and reads ask the store
for dirty rows as before. Anything whose effect it cannot follow row by row (an episode
delete, a purge, raw Cypher, an unknown operation, and the index's own `invalidate`, `reset`
and `install`: deletes, rebuilds, bulk replays) drops everything (`drop`); the next read
rebuilds. A build logs the commits that arrive while it scans and replays them on its result
(a row they change is dirty); a drop during a build discards it. Past `REBUILD_AT` dirty rows
a rebuild folds them in (the old rows serve meanwhile).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lcg.fsmodes import replace_dir, write_private
from lcg.models import Fact
from lcg.search import sealed
from lcg.storage.rows import fact as fact_record
from lcg.storage.rows import provenance_of
from lcg.timeutil import from_db
from lcg.wal.changes import (
    Change,
    CypherExec,
    EntityUpsert,
    EpisodeAdd,
    EpisodeDelete,
    FactInvalidate,
    FactUpsert,
    GroupPurge,
    MentionsAdd,
)

if TYPE_CHECKING:
    from lcg.storage.backend import GraphReader
    from lcg.storage.search_rows import TemporalTables

__all__ = ["REBUILD_AT", "WAIT_S", "FactRows", "Stamp"]

logger = logging.getLogger(__name__)

Reader = Callable[[Callable[["GraphReader"], Any]], Any]
Position = Callable[[str], Any]
Keys = npt.NDArray[np.bytes_]
Stamp = tuple[str, datetime | None]  # an episode's source_description and valid_at
Ints = npt.NDArray[np.int64]

WAIT_S = 60.0  # how long a read waits for a build before it reads the store
REBUILD_AT = 50_000  # dirty rows (facts + entities) from which a rebuild folds them in
_RETRY_S = 60.0  # after a failed build, reads go to the store this long before another try
_ATTEMPTS = 3  # builds a run of drops may discard before the next read tries again
_CHUNK = 65_536
_FORMAT = 2  # of the saved rows (`_Rows.save`); 2: the episodes' valid_at
_ARRAYS = (
    "fact_keys",
    "fact_rows",
    "episode_keys",
    "episode_rows",
    "mention_keys",
    "mention_episodes",
)
# Changes whose rows `note_commit` cannot follow: any of them drops everything.
_UNFOLLOWED = (EpisodeDelete, GroupPurge, CypherExec)


def _keys(column: pa.ChunkedArray | pa.Array) -> tuple[Keys, list[int]]:
    """The UTF-8 bytes of a string column as a fixed-width array, and the rows whose value
    that cannot hold exactly (numpy drops trailing NUL bytes): those are never served."""
    n = len(column)
    widths = pc.binary_length(column)
    width = max(1, int(pc.max(widths).as_py() or 1)) if n else 1
    out = np.empty(n, dtype=f"S{width}")
    odd: list[int] = []
    for lo in range(0, n, _CHUNK):
        values = column.slice(lo, _CHUNK).to_pylist()
        encoded = [(v or "").encode() for v in values]
        out[lo : lo + len(encoded)] = encoded
        odd += [lo + i for i, v in enumerate(encoded) if v.endswith(b"\x00") or not v]
    return out, odd


def _lookup(keys: Keys, wanted: Sequence[str]) -> tuple[Ints, Ints]:
    """For each of `wanted`: the first and one-past-last position of its key in the sorted
    `keys` (equal when absent, or when the key cannot be held exactly)."""
    if not wanted:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    encoded = [w.encode() for w in wanted]
    fits = np.array(
        [0 < len(e) <= keys.itemsize and not e.endswith(b"\x00") for e in encoded], dtype=bool
    )
    q = np.array([e if ok else b"" for e, ok in zip(encoded, fits.tolist(), strict=True)])
    q = q.astype(keys.dtype)
    lo = np.searchsorted(keys, q, side="left").astype(np.int64)
    hi = np.searchsorted(keys, q, side="right").astype(np.int64)
    hi[~fits] = lo[~fits]
    return lo, hi


class _Rows:
    """One build's rows and the dirty rows since (module docstring)."""

    def __init__(self, arrays: dict[str, Any], state: dict[str, Any], source: Path | None) -> None:
        self.facts: pa.Table = arrays["facts"]
        self.fact_keys: Keys = arrays["fact_keys"]  # sorted
        self.fact_rows: Ints = arrays["fact_rows"]  # the row of `facts` of each key
        self.episodes: pa.Table = arrays["episodes"]
        self.episode_keys: Keys = arrays["episode_keys"]
        self.episode_rows: Ints = arrays["episode_rows"]
        self.mention_keys: Keys = arrays["mention_keys"]  # entity uuids, sorted
        self.mention_episodes: Ints = arrays["mention_episodes"]  # row of `episodes`, or -1
        self.hopless = frozenset(state["hopless"])
        self.dirty_facts: set[str] = set(state["dirty_facts"])
        self.dirty_entities: set[str] = set(state["dirty_entities"])
        self.unsure_episodes: set[str] = set(state["unsure_episodes"])
        self.dirty_episodes: set[str] = set(state.get("dirty_episodes", ()))  # re-added since
        self.source = source  # the directory the arrays are mapped from (None: a scan)
        self.files: dict[str, str] | None = state.get("files")  # their digests (lcg.search.sealed)

    @classmethod
    def scan(cls, tables: TemporalTables) -> _Rows:
        """Rows from the store's scans."""
        facts = tables.facts
        keys, odd = _keys(facts.column("uuid"))
        order = np.argsort(keys, kind="stable")
        episodes = tables.episodes
        ep_keys, ep_odd = _keys(episodes.column("uuid"))
        ep_order = np.argsort(ep_keys, kind="stable")
        mentions = tables.mentions
        m_keys, m_odd = _keys(mentions.column("entity"))
        m_order = np.argsort(m_keys, kind="stable")
        found = pc.index_in(
            mentions.column("episode"), value_set=episodes.column("uuid").combine_chunks()
        )
        m_ep = np.asarray(found.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)
        # An entity whose key cannot be held exactly, or mentioned by an episode held so (or
        # not held), is read from the store.
        entity = mentions.column("entity")
        bad = set(m_odd) | set(np.flatnonzero(m_ep < 0).tolist())
        if ep_odd:
            bad |= set(np.flatnonzero(np.isin(m_ep, ep_odd)).tolist())
        arrays = {
            "facts": facts,
            "fact_keys": keys[order],
            "fact_rows": order.astype(np.int64),
            "episodes": episodes,
            "episode_keys": ep_keys[ep_order],
            "episode_rows": ep_order.astype(np.int64),
            "mention_keys": m_keys[m_order],
            "mention_episodes": m_ep[m_order],
        }
        # A key held inexactly also matches the key without its trailing NUL bytes: both
        # are read from the store.
        odd_facts = [str(facts.column("uuid")[i].as_py()) for i in odd]
        bad_entities = [str(entity[i].as_py()) for i in sorted(bad)]
        state = {
            "hopless": tables.hopless,
            "dirty_facts": odd_facts + [u.rstrip("\x00") for u in odd_facts],
            "dirty_entities": bad_entities + [u.rstrip("\x00") for u in bad_entities],
            "unsure_episodes": [str(episodes.column("uuid")[i].as_py()) for i in ep_odd],
        }
        return cls(arrays, state, None)

    def state(self) -> dict[str, Any]:
        return {
            "hopless": sorted(self.hopless),
            "dirty_facts": sorted(self.dirty_facts),
            "dirty_entities": sorted(self.dirty_entities),
            "unsure_episodes": sorted(self.unsure_episodes),
            "dirty_episodes": sorted(self.dirty_episodes),
        }

    def save(self, where: Path, stamp: dict[str, Any]) -> None:
        """Write the rows under `where` (Arrow IPC files and .npy arrays, mapped when loaded)
        with `stamp` and the dirty rows; only the state when they were mapped from there."""
        state = {"stamp": stamp, **self.state()}
        if self.source == where and self.files:  # mapped from there, checked when loaded
            tmp = where / "state.json.tmp"
            write_private(tmp, sealed.dumps({**state, "files": self.files}))
            tmp.replace(where / "state.json")
            return

        def fill(fresh: Path) -> None:
            for name in ("facts", "episodes"):
                table: pa.Table = getattr(self, name)
                path = str(fresh / f"{name}.arrow")
                with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, table.schema) as out:
                    out.write_table(table)
            for name in _ARRAYS:
                np.save(fresh / f"{name}.npy", getattr(self, name))
            files = sealed.digests(fresh, "state.json")
            (fresh / "state.json").write_text(sealed.dumps({**state, "files": files}))

        replace_dir(where, fill)

    @classmethod
    def load(cls, where: Path, state: dict[str, Any]) -> _Rows:
        """The rows saved under `where`, mapped (pages are read as lookups touch them)."""
        arrays: dict[str, Any] = {}
        for name in ("facts", "episodes"):
            source = pa.memory_map(str(where / f"{name}.arrow"))
            arrays[name] = pa.ipc.open_file(source).read_all()
        for name in _ARRAYS:
            # A plain view of the map: indexing a `np.memmap` makes a memmap each time.
            arrays[name] = np.load(where / f"{name}.npy", mmap_mode="r").view(np.ndarray)
        return cls(arrays, state, where)

    def dirty(self) -> int:
        return len(self.dirty_facts) + len(self.dirty_entities) + len(self.dirty_episodes)

    def note(self, changes: Sequence[Change]) -> bool:
        """Mark what the committed `changes` may change; False when one cannot be followed."""
        for change in changes:
            match change:
                case FactUpsert(fact):
                    self.dirty_facts.add(fact.uuid)
                case FactInvalidate(uuid):
                    self.dirty_facts.add(uuid)
                case MentionsAdd(_, entities):
                    self.dirty_entities.update(entities)
                case EpisodeAdd(episode):
                    self.dirty_entities.update(self._mentioning(episode.uuid))
                    self.dirty_episodes.add(episode.uuid)
                case EntityUpsert():
                    pass
                case EpisodeDelete() | GroupPurge() | CypherExec():
                    return False
        return True

    def _mentioning(self, episode: str) -> list[str]:
        """The entities a held episode is mentioned by (re-adding it may change its
        provenance columns); none for an episode not held."""
        if episode in self.unsure_episodes:
            return list(self.mention_keys_of(np.arange(len(self.mention_keys))))
        lo, hi = _lookup(self.episode_keys, [episode])
        if hi[0] == lo[0]:
            return []
        rows = self.episode_rows[int(lo[0]) : int(hi[0])]
        at = np.flatnonzero(np.isin(self.mention_episodes, rows))
        return self.mention_keys_of(at)

    def mention_keys_of(self, positions: Ints) -> list[str]:
        return [bytes(k).decode() for k in self.mention_keys[positions].tolist()]

    def facts_with_hops(self, uuids: Sequence[str]) -> tuple[dict[str, Fact], list[str]]:
        """The held facts among `uuids` whose hops exist, and the uuids to ask the store for
        (dirty or not held)."""
        clean = [u for u in uuids if u not in self.dirty_facts]
        ask = [u for u in uuids if u in self.dirty_facts]
        lo, hi = _lookup(self.fact_keys, clean)
        at: list[int] = []
        for uuid, a, b in zip(clean, lo.tolist(), hi.tolist(), strict=True):
            if b - a != 1:  # not held (or, impossibly, twice): the store knows
                ask.append(uuid)
            elif uuid not in self.hopless:
                at.append(a)
        if not at:
            return {}, ask
        part = self.facts.take(pa.array(self.fact_rows[at], type=pa.int64()))
        columns = [part.column(i).to_pylist() for i in range(part.num_columns)]
        facts = [fact_record(row, from_db) for row in zip(*columns, strict=True)]
        return {f.uuid: f for f in facts}, ask

    def provenance(
        self, entity_uuids: Sequence[str]
    ) -> tuple[dict[str, list[tuple[str, str]]], list[str]]:
        """`provenance(entity_uuids, None)` of the clean entities, and the dirty ones."""
        clean = [u for u in entity_uuids if u not in self.dirty_entities]
        ask = [u for u in entity_uuids if u in self.dirty_entities]
        lo, hi = _lookup(self.mention_keys, clean)
        spans = [(u, a, b) for u, a, b in zip(clean, lo.tolist(), hi.tolist(), strict=True)]
        owners = [u for u, a, b in spans for _ in range(b - a)]
        if not owners:
            return {}, ask
        at = np.concatenate([self.mention_episodes[a:b] for _, a, b in spans if b > a])
        part = self.episodes.take(pa.array(at, type=pa.int64()))
        rows = zip(
            owners,
            part.column("uuid").to_pylist(),
            part.column("source_description").to_pylist(),
            part.column("created_at").to_pylist(),
            strict=True,
        )
        return dict(provenance_of(rows)), ask

    def episode_stamps(self, uuids: Sequence[str]) -> tuple[dict[str, Stamp], list[str]]:
        """(source_description, valid_at or else created_at) of the held episodes among
        `uuids`, and the uuids to ask the store for (added or re-added since, held inexactly, or not held)."""
        clean = [u for u in uuids if u not in self.dirty_episodes and u not in self.unsure_episodes]
        ask = [u for u in uuids if u in self.dirty_episodes or u in self.unsure_episodes]
        lo, hi = _lookup(self.episode_keys, clean)
        at: list[int] = []
        held: list[str] = []
        for uuid, a, b in zip(clean, lo.tolist(), hi.tolist(), strict=True):
            if b - a != 1:
                ask.append(uuid)
            else:
                at.append(int(self.episode_rows[a]))
                held.append(uuid)
        if not at:
            return {}, ask
        part = self.episodes.take(pa.array(at, type=pa.int64()))
        rows = zip(
            held,
            part.column("source_description").to_pylist(),
            part.column("valid_at").to_pylist(),
            part.column("created_at").to_pylist(),
            strict=True,
        )
        # As lcg.temporal.provenance dates an episode: valid_at, else created_at.
        return {u: (desc or "", from_db(v or c)) for u, desc, v, c in rows}, ask


class FactRows:
    """The temporal lists' rows in memory, kept exact (module docstring)."""

    def __init__(
        self, read: Reader, directory: Path | None = None, position: Position | None = None
    ) -> None:
        self._read = read
        # Where the rows are saved at close and loaded from at open while the store's applied
        # positions are those they were saved at (`position`: a group's, as lcg.search.snapshot).
        self._directory = directory if position is not None else None
        self._position = position
        self._lock = threading.Lock()
        self._rows: _Rows | None = None
        self._gen = 0  # drops so far: a build started before the last one is discarded
        self._log: list[Sequence[Change]] | None = None  # commits during the running build
        self._done: threading.Event | None = None  # set when the running build ends
        self._failed_at: float | None = None
        self._disabled = False  # the backend builds none (a server)
        self._scan = False  # whether the running build may scan the store (else only load)
        self.builds = 0  # builds installed so far (tests and benchmarks look)
        self.loads = 0  # of which loaded from the saved copy
        self.damaged = 0  # saved copies that failed their checksum (knowledge_status)
        self.known_bad = False  # one did, and no build has replaced it yet (health_check)

    # -- lifecycle (driven by lcg.search.index) -------------------------------------------

    def note_commit(self, changes: Sequence[Change]) -> None:
        """A commit of `changes` is visible in the store: mark what it may change (or drop)."""
        with self._lock:
            if any(isinstance(c, _UNFOLLOWED) for c in changes):
                self._drop_locked()
                return
            if self._log is not None:
                self._log.append(changes)
            rows = self._rows
            if rows is not None:
                rows.note(changes)
                if rows.dirty() > REBUILD_AT:
                    self._start_locked(scan=True)

    def drop(self) -> None:
        """Forget every row (the store changed in ways not followed row by row)."""
        with self._lock:
            self._drop_locked()

    def _drop_locked(self) -> None:
        self._rows = None
        self._gen += 1

    def start(self) -> None:
        """Load the saved rows now in the background if they match the store (a scan waits
        for the first read that needs the rows: at 1M facts it fills ~0.7 GB of Kuzu's
        buffer pool and scan results)."""
        with self._lock:
            if self._rows is None and not self._disabled:
                self._start_locked(scan=False)

    def _start_locked(self, *, scan: bool) -> None:
        self._scan |= scan  # a running load-only build scans when the load fails
        if self._done is not None:  # already building
            return
        self._done = threading.Event()
        threading.Thread(target=self._build, name="lcg-factrows", daemon=True).start()

    def close(self, timeout: float = 600.0) -> None:
        """(Write lock held, at close.) Wait for a running build to end (it reads the store
        being closed), save the rows for the next open, and drop them."""
        with self._lock:
            done = self._done
        if done is not None:
            done.wait(timeout)
        with self._lock:
            rows = self._rows
            self._drop_locked()
        if rows is None or self._directory is None:
            return
        try:
            stamp = self._stamp()
            if stamp is not None:
                rows.save(self._directory, stamp)
        except Exception:  # derived data: the next open scans instead
            logger.exception("temporal rows: not saved; the next open scans the store")

    def _stamp(self) -> dict[str, Any] | None:
        """What saved rows must match to be loaded: every group's applied position."""
        assert self._position is not None
        positions: dict[str, Any] = {}
        for group in sorted(self._read(lambda conn: conn.group_ids())):
            found = self._position(group)
            if found is None:
                return None
            positions[group] = list(found)
        return {"format": _FORMAT, "positions": positions}

    def _load(self) -> _Rows | None:
        """The saved rows, if they match the store now (else None: scan it)."""
        if self._directory is None:
            return None
        state, damaged = sealed.read(self._directory / "state.json")
        if damaged:
            self._damaged()
        if state is None:
            return None  # none saved, damaged, or saved before it carried digests
        if state.get("stamp") != self._stamp():
            return None
        if not sealed.intact(self._directory, state.get("files")):
            self._damaged()
            return None
        try:
            return _Rows.load(self._directory, state)
        except (OSError, ValueError, KeyError, TypeError, pa.ArrowException):
            logger.warning("temporal rows: saved copy unreadable; the store is scanned")
            return None

    def _damaged(self) -> None:
        """The saved rows failed their checksum: scan the store now (not at the first read
        that needs them), and say so until a build installs rows."""
        logger.warning(
            "temporal rows: saved copy %s failed its checksum; the store is scanned",
            self._directory,
        )
        with self._lock:
            self.damaged += 1
            self.known_bad = True
            self._scan = True

    def _build(self) -> None:
        try:
            for _ in range(_ATTEMPTS):
                with self._lock:
                    gen = self._gen
                    self._log = []
                rows = self._load()
                if rows is None:
                    with self._lock:
                        if not self._scan:
                            return
                    tables = self._read(lambda conn: conn.temporal_tables())
                    if tables is None:
                        with self._lock:
                            self._disabled = True
                        return
                    rows = _Rows.scan(tables)
                    del tables
                    pa.default_memory_pool().release_unused()  # the scans' buffers
                with self._lock:
                    if gen != self._gen:
                        continue  # dropped while scanning: scan again
                    assert self._log is not None
                    if all(rows.note(ops) for ops in self._log):
                        self._rows = rows
                        self._failed_at = None
                        self.builds += 1
                        self.loads += rows.source is not None
                        self.known_bad = False
                        return
                    self._gen += 1  # a logged commit could not be followed (it dropped too)
        except Exception:  # derived data: reads go to the store instead
            logger.exception("temporal rows: build failed; reads use the store")
            with self._lock:
                self._failed_at = time.monotonic()
        finally:
            with self._lock:
                self._log = None
                self._scan = False
                done, self._done = self._done, None
            if done is not None:
                done.set()

    def pending(self) -> bool:
        """Whether a read now would find no rows to serve (not built, not disabled, no recent
        failed build): then `ready` is worth waiting for."""
        with self._lock:
            if self._rows is not None or self._disabled:
                return False
            failed = self._failed_at
            return failed is None or time.monotonic() - failed >= _RETRY_S

    def ready(self) -> None:
        """Build the rows if they are not held, waiting at most `WAIT_S` for the build.

        Call it holding no reader connection of the store (before a read, never inside one):
        the build takes a pooled reader of its own, and reads waiting for it while holding
        every reader of the pool would wait the whole `WAIT_S` (two concurrent first reads do,
        with a pool of two)."""
        for _ in range(2):  # a load-only build may be running: then a scanning one
            with self._lock:
                if self._rows is not None or self._disabled:
                    return
                failed = self._failed_at
                if failed is not None and time.monotonic() - failed < _RETRY_S:
                    return
                self._start_locked(scan=True)
                done = self._done
            if done is not None:
                done.wait(WAIT_S)

    def _current(self) -> _Rows | None:
        """The rows to read from, None: read the store. Never waits (it runs inside a read,
        holding a pooled reader); with no rows held it starts a build for the next reads,
        unless one failed less than `_RETRY_S` ago."""
        with self._lock:
            if self._rows is not None or self._disabled:
                return self._rows
            failed = self._failed_at
            if failed is None or time.monotonic() - failed >= _RETRY_S:
                self._start_locked(scan=True)
            return None

    # -- reads ----------------------------------------------------------------------------

    def facts_with_hops(self, conn: GraphReader, uuids: Iterable[str]) -> dict[str, Fact]:
        """`conn.facts_with_hops_by_uuid(uuids)`, from memory but for the dirty rows."""
        keys = list(dict.fromkeys(uuids))
        rows = self._current() if keys else None
        if rows is None:
            return conn.facts_with_hops_by_uuid(keys) if keys else {}
        found, ask = rows.facts_with_hops(keys)
        if ask:
            found.update(conn.facts_with_hops_by_uuid(ask))
        return found

    def episode_stamps(self, uuids: Iterable[str]) -> tuple[dict[str, Stamp], list[str]]:
        """(source_description, valid_at) of the held episodes among `uuids`, and the others
        (to read from the store). Never starts a build (a search citing its facts' episodes is
        no reason for the scans): without rows, every uuid is returned to be read."""
        keys = list(dict.fromkeys(uuids))
        with self._lock:
            rows = self._rows
        if rows is None or not keys:
            return {}, keys
        return rows.episode_stamps(keys)

    def endpoint_provenance(
        self, conn: GraphReader, entity_uuids: Iterable[str]
    ) -> dict[str, list[tuple[str, str]]]:
        """`conn.endpoint_provenance(entity_uuids)`, from memory but for the dirty entities."""
        keys = list(dict.fromkeys(entity_uuids))
        rows = self._current() if keys else None
        if rows is None:
            return conn.endpoint_provenance(keys) if keys else {}
        found, ask = rows.provenance(keys)
        if ask:
            found.update(conn.endpoint_provenance(ask))
        return found
