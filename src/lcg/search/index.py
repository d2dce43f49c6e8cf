"""`SearchIndex`: the in-process lexical and vector index of every group, kept in step with commits.

Partitioned by (kind of row, group): `entity` (BM25 over name (weighted twice) + summary; name
and summary vectors), `fact` (BM25 over predicate + sentence; the sentence vector; valid/system times,
predicate, relation type and endpoints as columns), `episode` (BM25 and vector over content,
one document per window of it, lcg.search.windows: a text longer than the embedder reads is
several documents of one uuid, with their offsets as columns; lcg.search.partition `WINDOW`).
Choosing groups is choosing partitions, never filtering hits afterwards.

Lifecycle (driven by lcg.engine):
- a partition is loaded lazily from its saved copy when that matches the database's applied
  WAL position (lcg.search.snapshot; written by `save` when the engine closes), else from the
  database (texts) and the embedding cache (vectors; texts the cache lacks are embedded then, by
  whichever thread loads, never under the write lock) on the first search that needs it, or by
  `warm`;
- `apply(group, ops, vectors)` runs after each successful commit, under the write lock: upserts,
  invalidations and episode deletes are applied in place (vectors come precomputed with the
  batch; those of a long episode's windows from the embedding cache, which `embed_windows`
  filled before the lock was taken), so the next search sees them; anything else marks the
  group's partitions stale;
- `invalidate(groups)` / `reset()` drop partitions after deletes, purges, rebuilds, raw Cypher,
  clear_all and reopening; they reload on the next search (`apply` and `reload`, either of
  them, are what the engine drives every projection of the WAL with: lcg.wal.projection);
- `swap_embedder(embedder, floor)` changes the model the index answers with (a workspace whose
  vectors another model made is served with that model until a re-embed completes,
  lcg.admin.reembed): every partition is built with the new model first, then all are
  installed at once, so no search ever mixes vectors of two models. `generation` counts swaps:
  a search that took its views before a swap and its query vector after retries.

The rows searches hydrated their results with (`rows`, lcg.search.rows) are forgotten by the
commits that name them (`apply`), by `invalidate` (their groups) and by `reset`.

Loading races with commits are settled by versions: a loader installs what it read only if no
commit touched that partition's group since it started (else it retries, and at worst serves
its own consistent snapshot without installing it).
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar, cast

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lcg.embedding.base import Embedder, Vectors
from lcg.embedding.cache import CachedEmbedder, text_hash
from lcg.models import EmbeddingRow, Entity, Episode, Fact
from lcg.search import standing
from lcg.search import vectors as vectors_mod
from lcg.search.factrows import FactRows
from lcg.search.partition import WINDOW, Partition, View
from lcg.search.rows import EPISODE_ROWS, LRU_ROWS, ROWS_PER_FAMILY, RowCache
from lcg.search.snapshot import Snapshots
from lcg.search.standing import STANDING
from lcg.search.text import Vocabulary
from lcg.search.vectors import SAMPLE_ROWS, layout_for
from lcg.search.vectors import Vectors as VectorStore
from lcg.search.windows import episode_windows
from lcg.storage.backend import GraphReader
from lcg.storage.search_rows import EntityColumns, EpisodeColumns, FactColumns
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

__all__ = ["ALWAYS", "FAMILIES", "NEVER", "SearchIndex", "entity_text", "micros"]

logger = logging.getLogger(__name__)

T = TypeVar("T")
Reader = Callable[[Callable[[GraphReader], Any]], Any]

NEVER = int(np.iinfo(np.int64).max)  # an absent invalid_at / expired_at
ALWAYS = int(np.iinfo(np.int64).min)  # an absent valid_at / created_at
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_UTC_MICROS = pa.timestamp("us", tz="UTC")
# Texts whose vectors a partition build asks the embedder for at once (see `_vectors`).
_EMBED_CHUNK = 65_536
QUERY_VECTORS = 64

FAMILIES: dict[str, tuple[str, ...]] = {
    "entity": ("entity_name", "entity_summary"),
    "fact": ("fact",),
    "episode": ("episode",),
}
_FACT_COLUMNS = (
    "valid_at",
    "invalid_at",
    "created_at",
    "expired_at",
    "name",
    "relation_type",
    "source",
    "target",
)
# An episode's documents: its windows, numbered, with their offsets `[start, end)` in its text
# and the standing instructions or preferences each holds (lcg.search.standing).
_EPISODE_COLUMNS = (WINDOW, "start", "end", STANDING)


def entity_text(name: str, summary: str) -> str:
    """What an entity's BM25 document holds: the name twice (a name match outweighs a mention
    in someone else's summary), then the summary."""
    return f"{name} {name} {summary}"


def micros(value: datetime | None, missing: int) -> int:
    """Microseconds since the epoch (UTC) of an aware datetime; `missing` for None."""
    if value is None:
        return missing
    return (value - _EPOCH) // timedelta(microseconds=1)


class SearchIndex:
    """Lexical + vector partitions per (kind, group). See the module docstring."""

    def __init__(
        self,
        read: Reader,
        embedder: Embedder,
        vector_floor: float = 0.0,
        snapshots: Snapshots | None = None,
        cache_rows: bool = True,
    ) -> None:
        self._read = read
        self._embedder = embedder
        # The minimum cosine similarity of a vector match (lcg.search.floor).
        self.vector_floor = vector_floor
        self.vocab = Vocabulary()
        self._codes: dict[str, int] = {"": 0}
        self._strings: list[str] = []  # `decode`'s inverse of `_codes`, extended lazily
        self._lock = threading.Lock()
        self._parts: dict[tuple[str, str], Partition] = {}
        self._versions: dict[str, int] = {}
        self._epoch = 0
        self._groups: dict[str, set[str] | None] = dict.fromkeys(FAMILIES)
        self._pending: dict[str, set[str]] = {f: set() for f in FAMILIES}
        self._loading: dict[tuple[str, str], threading.Lock] = {}
        self.generation = 0  # swaps of the embedder so far
        # The last `QUERY_VECTORS` query vectors, by (generation, text): one context read embeds
        # its query for the entity, fact and passage searches (a model call each, ~5 ms).
        self._query_vectors: OrderedDict[tuple[int, str], npt.NDArray[np.float32]] = OrderedDict()
        # Hydrated result rows (lcg.search.rows); None where other processes write the same
        # store (server mode): their commits reach this index late, so the rows would too.
        self.rows: dict[str, RowCache[Any]] | None = (
            {
                family: RowCache(EPISODE_ROWS, EPISODE_ROWS)
                if family == "episode"
                else RowCache(ROWS_PER_FAMILY, LRU_ROWS)
                for family in FAMILIES
            }
            if cache_rows
            else None
        )
        # The temporal lists' rows in memory (lcg.search.factrows), kept in step with the same
        # commits and drops as the partitions; like `rows`, only where this process alone
        # writes the store.
        self.temporal: FactRows | None = None
        if cache_rows:
            self.temporal = (
                FactRows(read, snapshots.directory / "temporal", snapshots.position)
                if snapshots is not None
                else FactRows(read)
            )
        # Saved partitions (lcg.search.snapshot) are usable only with the vocabulary and codes
        # saved with them, restored here before any text is analysed.
        self._snapshots: Snapshots | None = None
        self._load_saved = False
        saved = snapshots.read_index() if snapshots is not None else None
        if saved is not None:
            try:
                self.vocab.restore(saved["vocab"])
                codes = [str(c) for c in saved["codes"]]
                if codes[:1] != [""] or len(set(codes)) != len(codes):
                    raise ValueError("malformed codes")
            except (KeyError, TypeError, ValueError) as exc:
                logger.warning(
                    "search index snapshot unusable (%s): rebuilt from the database", exc
                )
                self.vocab = Vocabulary()
            else:
                self._codes = {c: i for i, c in enumerate(codes)}
                self._snapshots = snapshots
                self._load_saved = True
        if snapshots is not None:
            self._snapshots = snapshots  # saved on close even when nothing could be loaded

    # -- codes ----------------------------------------------------------------------------------

    def code(self, text: str | None) -> int:
        """The integer code of a string column value (predicate, relation type, entity uuid)."""
        key = text or ""
        found = self._codes.get(key)
        if found is not None:
            return found
        with self._lock:
            return self._codes.setdefault(key, len(self._codes))

    def codes(self, texts: Sequence[str | None]) -> npt.NDArray[np.int64]:
        """`code` of many values at once."""
        found = self._codes
        distinct = set(texts)
        for text in distinct.difference(found):
            self.code(text)
        if None in distinct:
            return np.fromiter((found[t or ""] for t in texts), dtype=np.int64, count=len(texts))
        strings = cast("Sequence[str]", texts)  # no None among them
        return np.fromiter(map(found.__getitem__, strings), dtype=np.int64, count=len(texts))

    def known_code(self, text: str) -> int | None:
        """The code of a value if any row ever had it (filters on unseen values match nothing)."""
        return self._codes.get(text)

    def decode(self, codes: Iterable[int]) -> list[str]:
        """The strings of codes (`code`'s inverse; "" for an absent value). Codes are handed out
        in insertion order, so the inverse is the dict's keys, extended as codes are added."""
        with self._lock:
            if len(self._strings) < len(self._codes):
                self._strings.extend(itertools.islice(self._codes, len(self._strings), None))
            strings = self._strings
        return [strings[c] for c in codes]

    # -- embedding ------------------------------------------------------------------------------

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        """A query vector, from the model itself (queries are not written to the embedding
        cache), kept for the next reads of the same query (`QUERY_VECTORS`); read-only."""
        key = (self.generation, text)
        with self._lock:
            held = self._query_vectors.get(key)
            if held is not None:
                self._query_vectors.move_to_end(key)
                return held
        inner = (
            self._embedder.inner if isinstance(self._embedder, CachedEmbedder) else self._embedder
        )
        vector = np.asarray(inner.embed([text])[0], dtype=np.float32)
        vector.flags.writeable = False
        with self._lock:
            self._query_vectors[key] = vector
            while len(self._query_vectors) > QUERY_VECTORS:
                self._query_vectors.popitem(last=False)
        return vector

    @property
    def lexical_only(self) -> bool:
        return self._embedder.identity.lexical_only

    @property
    def embedder(self) -> Embedder:
        """The embedder the index answers with (partitions and query vectors)."""
        return self._embedder

    def swap_embedder(self, embedder: Embedder, vector_floor: float) -> None:
        """Answer with `embedder` (and its `vector_floor`) from now on.

        Every partition of every group is built with it first (through the embedding cache:
        after a re-embed, without the model), while searches keep using the current ones; then
        they are installed together. A partition whose group a commit touched meanwhile is left
        to load on its next search, with the new embedder.
        """
        with self._lock:
            epoch, versions = self._epoch, dict(self._versions)
        staged: dict[tuple[str, str], Partition] = {}
        for family in FAMILIES:
            for group in self._all_groups(family):
                staged[(family, group)] = self._build(family, group, embedder)
        with self._lock:
            self._parts = {
                key: part
                for key, part in staged.items()
                if self._epoch == epoch and self._versions.get(key[1], 0) == versions.get(key[1], 0)
            }
            self._embedder = embedder
            self.vector_floor = vector_floor
            self._epoch += 1  # loads that started with the old embedder do not install
            self.generation += 1

    # -- reads ----------------------------------------------------------------------------------

    def views(self, family: str, groups: Sequence[str] | None) -> list[tuple[str, View]]:
        """Snapshots of the family's partitions for `groups` (None: every group that has rows)."""
        names = list(dict.fromkeys(groups)) if groups is not None else self._all_groups(family)
        return [(g, self._partition(family, g).view()) for g in names]

    def _all_groups(self, family: str) -> list[str]:
        with self._lock:
            known = self._groups[family]
            epoch = self._epoch
            if known is not None:
                return sorted(known)
        found = set(self._read(lambda c: c.group_ids()))
        with self._lock:
            found |= self._pending[family]
            if self._epoch == epoch and self._groups[family] is None:
                self._groups[family] = found
                self._pending[family] = set()
        return sorted(found)

    def _version(self, group: str) -> tuple[int, int]:
        return (self._epoch, self._versions.get(group, 0))

    def _partition(self, family: str, group: str) -> Partition:
        key = (family, group)
        with self._lock:
            part = self._parts.get(key)
            if part is not None:
                return part
            gate = self._loading.setdefault(key, threading.Lock())
        with gate:
            built: Partition | None = None
            for _ in range(3):
                with self._lock:
                    part = self._parts.get(key)
                    if part is not None:
                        return part
                    version = self._version(group)
                built = self._build(family, group)
                with self._lock:
                    if self._version(group) == version:
                        self._parts[key] = built
                        return built
            assert built is not None
            return built  # writes kept racing the load: serve this consistent snapshot once

    def _new(self, family: str, dim: int) -> Partition:
        columns = {"fact": _FACT_COLUMNS, "episode": _EPISODE_COLUMNS}.get(family, ())
        part = Partition(self.vocab, FAMILIES[family], dim, columns)
        part.dirty = True  # only a partition loaded from its snapshot is not
        return part

    @staticmethod
    def _vectors(
        embedder: Embedder, texts: list[str], quantize: bool = False
    ) -> tuple[Vectors | VectorStore, npt.NDArray[np.bool_]]:
        """The texts' vectors (zero where a text is empty), in a matrix with spare rows after
        them: the partition adopts it, and the commits after a load fill the spare rows instead
        of copying the whole matrix into one twice its size (at 1M facts the first episode
        after opening copied ~3 GB). Spare rows are never written, so never resident.

        `quantize`: an int8 store instead (`VectorStore.quantized`, the layout the partition's
        compaction would pick), filled `_EMBED_CHUNK` rows at a time, so the float32 matrix
        (~1.5 GB for 1M facts) never exists whole."""
        n = len(texts)
        present = np.fromiter((bool(t) for t in texts), dtype=bool, count=n)
        dim, cap = embedder.identity.dim, n + n // 4 + 1024
        at = np.flatnonzero(present)
        if quantize:
            sample = embedder.embed([texts[i] for i in at[:SAMPLE_ROWS].tolist()])
            store = VectorStore.quantized(dim, layout_for(sample), cap)
            bounds = np.searchsorted(at, np.arange(0, n + _EMBED_CHUNK, _EMBED_CHUNK))
            for chunk, lo in enumerate(range(0, n, _EMBED_CHUNK)):
                size = min(n, lo + _EMBED_CHUNK) - lo
                rows = at[bounds[chunk] : bounds[chunk + 1]]
                found = embedder.embed([texts[i] for i in rows.tolist()])
                if len(rows) == size:  # no empty text in the chunk: no scatter
                    store.put(lo, np.asarray(found, dtype=np.float32))
                    continue
                block = np.zeros((size, dim), dtype=np.float32)
                block[rows - lo] = found
                store.put(lo, block)
            return store, present
        out = np.zeros((cap, dim), dtype=np.float32)
        for lo in range(0, len(at), _EMBED_CHUNK):  # never a second full-size matrix
            rows = at[lo : lo + _EMBED_CHUNK]
            out[rows] = embedder.embed([texts[i] for i in rows.tolist()])
        return out, present

    def _build(self, family: str, group: str, embedder: Embedder | None = None) -> Partition:
        if embedder is None and self._snapshots is not None and self._load_saved:
            identity = self._embedder.identity
            part = self._new(family, identity.dim)
            if self._snapshots.load(family, group, part, identity.model, identity.dim):
                return part
        embedder = embedder or self._embedder
        if family == "entity":
            columns = self._read(lambda c: c.entity_columns(group))
        elif family == "fact":
            columns = self._read(lambda c: c.fact_columns(group, NEVER, ALWAYS))
        else:
            columns = self._read(lambda c: c.episode_columns(group))
        return self._assemble(family, columns, embedder)

    def _assemble(self, family: str, columns: Any, embedder: Embedder) -> Partition:
        """A compacted partition of the family's rows, given as `lcg.storage.search_rows`
        columns (read from the database by `_build`, or made from folded rows by
        `build_from_rows`)."""
        part = self._new(family, embedder.identity.dim)
        uuids = columns.uuid
        # A partition that will be int8 once compacted (as many live documents as rows: no
        # uuid twice) gets its vectors quantised as they are looked up (`_vectors`).
        q = len(uuids) >= vectors_mod.QUANTIZE_MIN_ROWS and len(set(uuids)) == len(uuids)
        if family == "entity":
            e = columns
            texts = [entity_text(n, s) for n, s in zip(e.name, e.summary, strict=True)]
            part.add(
                e.uuid,
                texts,
                {
                    "entity_name": self._vectors(embedder, e.name, q),
                    "entity_summary": self._vectors(embedder, e.summary, q),
                },
                tags=e.labels,
                bulk=True,
            )
        elif family == "fact":
            f = columns
            values: dict[str, Any] = {
                "valid_at": f.valid_at,
                "invalid_at": f.invalid_at,
                "created_at": f.created_at,
                "expired_at": f.expired_at,
                "name": self.codes(f.name),
                "relation_type": self.codes(f.relation_type),
                "source": self.codes(f.source_uuid),
                "target": self.codes(f.target_uuid),
            }
            texts = [f"{n} {t}" for n, t in zip(f.name, f.fact, strict=True)]
            vec_texts = [t or n for n, t in zip(f.name, f.fact, strict=True)]
            vecs = {"fact": self._vectors(embedder, vec_texts, q)}
            part.add(f.uuid, texts, vecs, values, bulk=True)
        else:
            owners, texts, values = _episode_documents(columns.uuid, columns.content)
            q = len(owners) >= vectors_mod.QUANTIZE_MIN_ROWS and len(set(uuids)) == len(uuids)
            part.add(
                owners, texts, {"episode": self._vectors(embedder, texts, q)}, values, bulk=True
            )
        part.compact()
        return part

    def integrity(self) -> dict[str, Any]:
        """What the checksums of the saved derived indexes found (lcg.search.sealed): the
        search snapshot files rebuilt from the database for failing theirs, how many saved
        temporal-row copies failed theirs, and whether such a copy is still being replaced."""
        temporal = self.temporal
        return {
            "search_snapshots_damaged": list(self._snapshots.damaged) if self._snapshots else [],
            "temporal_rows_damaged": temporal.damaged if temporal is not None else 0,
            "temporal_rows_rebuilding": temporal.known_bad if temporal is not None else False,
        }

    def save(self) -> int:
        """Write the loaded partitions to the snapshot directory (lcg.search.snapshot), changed
        ones in full; how many. The caller holds the engine's write lock (no commit runs)."""
        if self.temporal is not None:
            self.temporal.close()  # its build reads the store being closed
        if self._snapshots is None:
            return 0
        with self._lock:
            parts = [(f, g, p) for (f, g), p in self._parts.items()]
            identity = self._embedder.identity
        with self._lock:
            codes = sorted(self._codes, key=self._codes.__getitem__)
        index = {"vocab": self.vocab.export(), "codes": codes}
        return self._snapshots.save(index, parts, identity.model, identity.dim)

    def nbytes(self) -> int:
        """Bytes of the loaded partitions' numpy arrays (see `Partition.nbytes`)."""
        with self._lock:
            parts = list(self._parts.values())
        return sum(p.nbytes() for p in parts)

    def warm(self, groups: Sequence[str] | None = None) -> None:
        """Load the partitions of `groups` (None: every group) now, instead of on the first search."""
        for family in FAMILIES:
            self.views(family, groups)
        if self.temporal is not None:
            self.temporal.start()

    # -- lifecycle ------------------------------------------------------------------------------

    def forget_saved(self) -> None:
        """Build partitions from the database from now on, never from their saved copy
        (`knowledge_build_indices`); they are saved again at close."""
        self._load_saved = False

    def reset(self) -> None:
        """Forget everything: partitions reload from the database on the next search."""
        if self.temporal is not None:
            self.temporal.drop()
        with self._lock:
            self._parts.clear()
            self._epoch += 1
            for cache in (self.rows or {}).values():
                cache.clear()
            self._groups = dict.fromkeys(FAMILIES)
            self._pending = {f: set() for f in FAMILIES}

    def invalidate(self, groups: Sequence[str]) -> None:
        """Drop the groups' partitions: they reload from the database on the next search."""
        if self.temporal is not None:
            self.temporal.drop()
        for cache in (self.rows or {}).values():
            cache.forget((), groups)
        with self._lock:
            for group in groups:
                self._versions[group] = self._versions.get(group, 0) + 1
                for family in FAMILIES:
                    self._parts.pop((family, group), None)
                    known = self._groups[family]
                    if known is not None:
                        known.add(group)
                    else:
                        self._pending[family].add(group)

    def reload(self, groups: Sequence[str] | None = None) -> None:
        """(`lcg.wal.projection.Projection`.) The partitions of `groups` (None: all, `reset`)
        dropped (`invalidate`): they reload from the database on the next search."""
        if groups is None:
            self.reset()
        else:
            self.invalidate(groups)

    def _target(self, family: str, group: str) -> Partition | None:
        """The installed partition a commit applies to, creating it for a brand-new group."""
        key = (family, group)
        part = self._parts.get(key)
        if part is None:
            known = self._groups[family]
            if known is not None and group not in known:
                known.add(group)
                part = self._parts[key] = self._new(family, self._embedder.identity.dim)
            elif known is None:
                self._pending[family].add(group)
        return part

    def apply(self, group: str, changes: Sequence[Change], vectors: Sequence[EmbeddingRow]) -> None:
        """Bring the group's partitions up to a commit of `changes` (write lock held; no
        embedding).

        Anything that cannot be applied in place (a missing vector) marks the group stale
        instead.
        """
        self._forget_rows(group, changes)
        if self.temporal is not None:
            self.temporal.note_commit(changes)
        with self._lock:
            self._versions[group] = self._versions.get(group, 0) + 1
            if any(isinstance(c, CypherExec) for c in changes):
                stale_all = True
            else:
                stale_all = False
                parts = {f: self._target(f, group) for f in FAMILIES}
        if stale_all:
            self.reset()
            return
        try:
            self._apply(group, changes, {v.key: v for v in vectors}, parts)
            ok = True
        except KeyError:  # a vector the batch did not carry: reload the group instead
            ok = False
        except Exception:  # the commit is durable and the index derived: never fail the write
            logger.exception("search index: could not apply a commit of group %r", group)
            ok = False
        if not ok:
            self.invalidate([group])

    def _forget_rows(self, group: str, changes: Sequence[Change]) -> None:
        """Drop the cached rows the commit of `changes` changed (lcg.search.rows): those its
        changes name, or the whole group for a change that may change others."""
        if self.rows is None:
            return
        uuids: list[str] = []
        whole = False
        for change in changes:
            match change:
                case EntityUpsert(row) | FactUpsert(row) | EpisodeAdd(row):
                    uuids.append(row.uuid)
                case FactInvalidate(uuid) | EpisodeDelete(uuid):
                    uuids.append(uuid)
                case MentionsAdd():  # MENTIONS edges: no column of a cached row
                    pass
                case GroupPurge() | CypherExec():
                    whole = True
        for cache in self.rows.values():
            cache.forget(uuids, [group] if whole else ())

    def _apply(
        self,
        group: str,
        changes: Sequence[Change],
        vectors: Mapping[str, EmbeddingRow],
        parts: Mapping[str, Partition | None],
    ) -> None:
        model = self._embedder.identity.model
        dim = self._embedder.identity.dim

        def vector(kind: str, owner: str, text: str) -> tuple[Vectors, bool]:
            if not text:
                return np.zeros(dim, dtype=np.float32), False
            row = vectors.get(f"{kind}:{owner}")
            if row is None or row.text_hash != text_hash(model, text):
                raise KeyError(f"{kind}:{owner}")
            return np.asarray(row.vec, dtype=np.float32), True

        # Consecutive upserts of one family go to the partition in one `add` (one tokenising and
        # postings pass); the run is flushed before any other operation, and before a uuid
        # repeats, so the order of the operations is kept.
        run = _Run(None)
        targets = dict(parts)

        def flush() -> None:
            nonlocal run
            part = targets.get(run.family or "")
            if part is not None and run.uuids:
                run.add_to(part)
            run = _Run(None)

        def pending(family: str, uuid: str) -> _Run:
            nonlocal run
            if run.family != family or uuid in run.seen:
                flush()
                run = _Run(family)
            run.seen.add(uuid)
            return run

        for change in changes:
            match change:
                case EntityUpsert(e):
                    pending("entity", e.uuid).put(
                        e.uuid,
                        entity_text(e.name, e.summary),
                        {
                            "entity_name": vector("entity_name", e.uuid, e.name),
                            "entity_summary": vector("entity_summary", e.uuid, e.summary),
                        },
                        tags=tuple(e.labels),
                    )
                case FactUpsert(f):
                    pending("fact", f.uuid).put(
                        f.uuid,
                        f"{f.name} {f.fact}",
                        {"fact": vector("fact", f.uuid, f.fact or f.name)},
                        columns={
                            "valid_at": micros(f.valid_at, ALWAYS),
                            "invalid_at": micros(f.invalid_at, NEVER),
                            "created_at": micros(f.created_at, ALWAYS),
                            "expired_at": micros(f.expired_at, NEVER),
                            "name": self.code(f.name),
                            "relation_type": self.code(f.relation_type),
                            "source": self.code(f.source_uuid),
                            "target": self.code(f.target_uuid),
                        },
                    )
                case EpisodeAdd(ep):
                    run_of = pending("episode", ep.uuid)
                    cut = episode_windows(ep.content)
                    if len(cut) == 1:  # the whole text: the episode's own vector
                        vecs = [vector("episode", ep.uuid, ep.content)]
                        texts = [ep.content]
                    else:
                        texts = [ep.content[a:b] for a, b in cut]
                        vecs = [(v, True) for v in self._cached_windows(texts)]
                    for i, ((a, b), text, vec) in enumerate(zip(cut, texts, vecs, strict=True)):
                        run_of.put(
                            ep.uuid,
                            text,
                            {"episode": vec},
                            columns={
                                WINDOW: i,
                                "start": a,
                                "end": b,
                                STANDING: standing.kind(text),
                            },
                        )
                case FactInvalidate(uuid, invalid_at, expired_at):
                    flush()
                    if targets["fact"] is not None:
                        targets["fact"].set_columns(
                            uuid,
                            {
                                "invalid_at": micros(invalid_at, NEVER),
                                "expired_at": micros(expired_at, NEVER),
                            },
                        )
                case EpisodeDelete(uuid):
                    flush()
                    if targets["episode"] is not None:
                        targets["episode"].remove([uuid])
                case GroupPurge():
                    flush()
                    with self._lock:
                        for family in FAMILIES:
                            if (family, group) in self._parts:
                                self._parts[(family, group)] = self._new(
                                    family, self._embedder.identity.dim
                                )
                        targets = {f: self._parts.get((f, group)) for f in FAMILIES}
                case MentionsAdd() | CypherExec():
                    flush()
        flush()

    # -- windows of long episodes ---------------------------------------------------------

    def embed_windows(self, changes: Sequence[Change]) -> None:
        """Embed the windows of the long episodes `changes` add into the embedding cache (no
        lock held), so `apply` finds their vectors there; episodes that fit one window need
        none."""
        texts = [
            change.episode.content[a:b]
            for change in changes
            if isinstance(change, EpisodeAdd)
            for a, b in _long_windows(change.episode.content)
        ]
        if texts and isinstance(self._embedder, CachedEmbedder):
            self._embedder.embed(texts)

    def _cached_windows(self, texts: list[str]) -> list[Vectors]:
        """The cached vectors of window texts (`embed_windows`); KeyError if one is missing."""
        if not isinstance(self._embedder, CachedEmbedder):
            raise KeyError("window vectors")
        found = self._embedder.cached(texts)
        if any(v is None for v in found):
            raise KeyError("window vectors")
        return [np.asarray(v, dtype=np.float32) for v in found]

    # -- a bulk replay's rows -----------------------------------------------------------------

    def build_from_rows(
        self,
        entities: Sequence[Entity],
        facts: Sequence[Fact],
        episodes: Sequence[Episode],
    ) -> dict[str, Partition]:
        """One group's partitions made from the rows a bulk replay just loaded (lcg.engine.replay),
        in the order it loaded them, rather than read back from the database: the same
        partitions `_build` makes of those rows (the columns are what the database returns for
        them). Vectors come from the embedder, i.e. the embedding cache the replay just filled.
        Install them with `install` once the database holds the rows."""
        embedder = self._embedder
        cols = {
            "entity": EntityColumns(
                uuid=[e.uuid for e in entities],
                name=[e.name or "" for e in entities],
                summary=[e.summary or "" for e in entities],
                labels=[tuple(e.labels or ()) for e in entities],
            ),
            "fact": FactColumns(
                uuid=[f.uuid for f in facts],
                name=[f.name or "" for f in facts],
                fact=[f.fact or "" for f in facts],
                relation_type=[f.relation_type for f in facts],
                source_uuid=[f.source_uuid or "" for f in facts],
                target_uuid=[f.target_uuid or "" for f in facts],
                valid_at=_micros_of([f.valid_at for f in facts], ALWAYS),
                invalid_at=_micros_of([f.invalid_at for f in facts], NEVER),
                created_at=_micros_of([f.created_at for f in facts], ALWAYS),
                expired_at=_micros_of([f.expired_at for f in facts], NEVER),
            ),
            "episode": EpisodeColumns(
                uuid=[ep.uuid for ep in episodes], content=[ep.content or "" for ep in episodes]
            ),
        }
        return {family: self._assemble(family, cols[family], embedder) for family in FAMILIES}

    def install(self, group: str, parts: Mapping[str, Partition], model: str) -> bool:
        """Serve `parts` (from `build_from_rows`) as the group's partitions, as if loaded: the
        caller holds the write lock and the database holds exactly their rows. Refused (False)
        when the index now answers with another model than `model`, the one they were built
        with (an embedder swap rebuilds every partition anyway)."""
        if self.temporal is not None:
            self.temporal.drop()
        with self._lock:
            if self._embedder.identity.model != model:
                return False
            for family, part in parts.items():
                self._parts[(family, group)] = part
                known = self._groups[family]
                if known is not None:
                    known.add(group)
                else:
                    self._pending[family].add(group)
        return True


def _long_windows(text: str) -> list[tuple[int, int]]:
    """The windows of a text that needs more than one (else none)."""
    cut = episode_windows(text)
    return cut if len(cut) > 1 else []


def _episode_documents(
    uuids: Sequence[str], contents: Sequence[str]
) -> tuple[list[str], list[str], dict[str, npt.NDArray[np.int64]]]:
    """An episode partition's documents: (uuid, text) per window of each episode, in order,
    and their `_EPISODE_COLUMNS` (window number, start, end, standing marks)."""
    owners: list[str] = []
    texts: list[str] = []
    numbers: list[int] = []
    starts: list[int] = []
    ends: list[int] = []
    for uuid, content in zip(uuids, contents, strict=True):
        cut = episode_windows(content)
        if len(cut) == 1:
            owners.append(uuid)
            texts.append(content)
            numbers.append(0)
            starts.append(0)
            ends.append(len(content))
            continue
        for i, (a, b) in enumerate(cut):
            owners.append(uuid)
            texts.append(content[a:b])
            numbers.append(i)
            starts.append(a)
            ends.append(b)
    values = {
        WINDOW: np.array(numbers, dtype=np.int64),
        "start": np.array(starts, dtype=np.int64),
        "end": np.array(ends, dtype=np.int64),
        STANDING: np.array([standing.kind(t) for t in texts], dtype=np.int64),
    }
    return owners, texts, values


def _micros_of(values: Sequence[datetime | None], missing: int) -> npt.NDArray[np.int64]:
    """`micros` of many values: pyarrow converts aware datetimes to UTC microseconds in C
    (2.5x faster than a Python call per value; 3.7M values at 1M facts)."""
    stamps = pa.array(values, type=_UTC_MICROS, size=len(values))
    return np.asarray(pc.fill_null(stamps.cast(pa.int64()), missing).to_numpy(), dtype=np.int64)


class _Run:
    """Upserts of one family gathered for a single `Partition.add`."""

    def __init__(self, family: str | None) -> None:
        self.family = family
        self.seen: set[str] = set()
        self.uuids: list[str] = []
        self.texts: list[str] = []
        self.vectors: dict[str, list[Vectors]] = {}
        self.present: dict[str, list[bool]] = {}
        self.columns: dict[str, list[int]] = {}
        self.tags: list[tuple[str, ...]] = []

    def put(
        self,
        uuid: str,
        text: str,
        vectors: Mapping[str, tuple[Vectors, bool]],
        *,
        columns: Mapping[str, int] | None = None,
        tags: tuple[str, ...] = (),
    ) -> None:
        self.uuids.append(uuid)
        self.texts.append(text)
        for kind, (vec, present) in vectors.items():
            self.vectors.setdefault(kind, []).append(vec)
            self.present.setdefault(kind, []).append(present)
        for name, value in (columns or {}).items():
            self.columns.setdefault(name, []).append(value)
        self.tags.append(tags)

    def add_to(self, part: Partition) -> None:
        part.add(
            self.uuids,
            self.texts,
            {
                kind: (np.stack(rows), np.array(self.present[kind], dtype=bool))
                for kind, rows in self.vectors.items()
            },
            {name: np.array(values, dtype=np.int64) for name, values in self.columns.items()}
            or None,
            self.tags,
        )
