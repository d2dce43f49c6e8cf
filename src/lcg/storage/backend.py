"""The storage protocol: what the engine needs from a graph store, whichever database holds it.

Two backends implement it (docs/design.md): embedded Kuzu (`lcg.storage.kuzu_backend`, a thin
adapter over the functions of `graph`, `history`, `bulk`, `search_rows` and `dump`, which stay
the Kuzu code) and a FalkorDB server (`lcg.storage.falkordb`, one graph per group). The engine
should only ever hold a `GraphBackend` and the `GraphReader`/`GraphWriter` views it hands out,
and never ask which database it has.

The operations, in four parts:

- **commit** (`GraphBackend.commit`): apply a batch of semantic operations (docs/design.md) to one
  group together with its derived embedding rows and the group's meta entries (its new WAL
  position, its embedder stamp), all or nothing. A backend that keeps the WAL itself (FalkorDB:
  a stream per group) appends the batch's lines in the same atomic unit, with the batch's first
  seq as the optimistic-concurrency check (`GroupMovedError` when another process got there
  first). Replay and admin passes that own a group use `transaction()` instead.
- **point and batch reads** and the **temporal reads** (`GraphReader`): every read the engine's
  areas run, by uuid, by group, by time (the `TimeFilter` rule), and the provenance reads. The
  results are `lcg.models` values; where a read's order is not specified, callers must not
  depend on it (the FalkorDB backend fans out over groups).
- **bulk load for replay** (`GraphWriter.load_folded`) and the columnar reads that load the
  search index (`GraphReader.entity_columns` ...), and the paged whole-group reads of WAL dumps.
- **status and meta**: row counts, the groups present, and a small key/value store. Meta keys
  that belong to one group are passed with that `group_id`, so a sharded backend keeps them
  next to the group's data; keys without one are global.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from lcg.errors import StorageError
from lcg.models import EmbeddingRow, Entity, Episode, Fact
from lcg.storage.search_rows import EntityColumns, EpisodeColumns, FactColumns, TemporalTables
from lcg.timefilter import TimeFilter
from lcg.wal.fold import FoldedGroup
from lcg.wal.records import Op, WalRecord

__all__ = [
    "Commit",
    "GraphBackend",
    "GraphReader",
    "GraphWriter",
    "GroupMovedError",
    "NameRow",
    "NotDurableError",
    "schema_version",
]

# (group_id, name, uuid, created_at, is_merged): a row of the entity-name index.
NameRow = tuple[str, str, str, datetime | None, bool]


class GroupMovedError(StorageError):
    """A commit expected the group at seq `expected`, and the store had moved past it (another
    process committed first). Nothing of the commit was applied: catch up and retry."""

    def __init__(self, group_id: str, expected: int, actual: int | None) -> None:
        super().__init__(
            f"group {group_id!r} moved: the commit expected seq {expected}, the store is at {actual}"
        )
        self.group_id = group_id
        self.expected = expected
        self.actual = actual


class NotDurableError(StorageError):
    """A commit that the primary applied but fewer replicas than required confirmed within the
    timeout (`LCG_FALKORDB_REPLICAS`, `WAIT`): it is **not acknowledged**. Its lines are in the
    group's stream and graph on the primary (a retry at the same seq gets `GroupMovedError`),
    and are lost if that primary fails before a replica has them."""

    def __init__(self, group_id: str, confirmed: int, required: int, timeout_ms: int) -> None:
        super().__init__(
            f"group {group_id!r}: commit applied on the primary but confirmed by {confirmed} of "
            f"{required} replicas within {timeout_ms} ms: not durable, not acknowledged"
        )
        self.group_id = group_id
        self.confirmed = confirmed
        self.required = required


@dataclass(frozen=True)
class Commit:
    """One group's share of an atomic write.

    `first_seq`..`last_seq` are the WAL seqs of `ops` (the group is expected at
    `first_seq - 1`), `lines` their encoded WAL lines (only a backend that keeps the WAL stores
    them), `meta` the group's meta entries set in the same unit (None deletes one).
    """

    group_id: str
    ops: Sequence[Op]
    first_seq: int
    last_seq: int
    lines: Sequence[bytes] = ()
    put: Sequence[EmbeddingRow] = ()
    delete: Sequence[str] = ()
    meta: Mapping[str, str | None] = field(default_factory=dict)


@runtime_checkable
class GraphReader(Protocol):
    """Reads of the graph (a connection-like view, one user at a time)."""

    # -- point and batch reads ------------------------------------------------------------
    def entity_by_uuid(self, uuid: str) -> Entity | None: ...
    def entities_by_uuids(self, uuids: Iterable[str]) -> dict[str, Entity]: ...
    def facts_by_uuids(self, uuids: Iterable[str]) -> dict[str, Fact]: ...
    def episodes_by_uuids(self, uuids: Iterable[str]) -> dict[str, Episode]: ...
    def episode_groups(self, uuids: Sequence[str]) -> dict[str, str]: ...
    def entities_in_groups(
        self, groups: Sequence[str] | None, limit: int | None = None
    ) -> list[Entity]: ...
    def facts_with_hops(
        self,
        groups: Sequence[str] | None = None,
        uuids: Sequence[str] | None = None,
        limit: int | None = None,
    ) -> list[Fact]: ...
    def find_active_fact(
        self, group_id: str, source: str, predicate: str, target: str
    ) -> Fact | None: ...
    def neighbor_facts(
        self, center: str, groups: Sequence[str] | None, limit: int
    ) -> list[Fact]: ...
    def provenance(
        self, entity_uuids: Iterable[str], groups: Sequence[str] | None
    ) -> dict[str, list[tuple[str, str]]]: ...
    def entities_by_source(
        self, source: str, groups: Sequence[str] | None, limit: int
    ) -> list[Entity]: ...
    def episodes_recent(self, group_id: str, last_n: int) -> list[Episode]: ...
    def episode_mentions(self, episode_uuids: Sequence[str]) -> dict[str, list[str]]: ...
    def episodes_matching(
        self,
        groups: Sequence[str],
        *,
        source_file: str | None = None,
        chunk_id: str | None = None,
    ) -> list[tuple[str, str]]: ...
    def name_rows(self) -> list[NameRow]: ...
    def stored_text_hashes(self, keys: Sequence[str]) -> dict[str, str]: ...

    # -- temporal reads -------------------------------------------------------------------
    def facts_at(
        self,
        groups: Sequence[str] | None,
        time: TimeFilter,
        at: datetime,
        limit: int | None = None,
    ) -> list[Fact]: ...
    def neighbor_facts_at(
        self,
        center: str,
        groups: Sequence[str] | None,
        limit: int,
        time: TimeFilter,
        at: datetime,
    ) -> list[Fact]: ...
    def fact_changes(
        self,
        groups: Sequence[str] | None,
        since: datetime,
        until: datetime,
        entity_uuid: str | None = None,
    ) -> list[Fact]: ...
    def facts_around(
        self, entity_uuids: Iterable[str], groups: Sequence[str] | None = None
    ) -> list[Fact]: ...

    # -- whole groups (search index loads, WAL dumps) -------------------------------------
    def group_ids(self) -> list[str]: ...
    def entity_columns(self, group_id: str) -> EntityColumns: ...
    def fact_columns(self, group_id: str, never: int, always: int) -> FactColumns: ...
    def episode_columns(self, group_id: str) -> EpisodeColumns: ...
    def entity_pages(self, group_id: str, size: int = 500) -> Iterator[list[Entity]]: ...
    def fact_pages(self, group_id: str, size: int = 500) -> Iterator[list[Fact]]: ...
    def episode_pages(self, group_id: str, size: int = 500) -> Iterator[list[Episode]]: ...
    def mention_pages(
        self, group_id: str, size: int = 500
    ) -> Iterator[list[tuple[str, list[str]]]]: ...

    # -- status and meta ------------------------------------------------------------------
    def counts(self) -> dict[str, Any]: ...
    def group_counts(self, group_id: str) -> dict[str, int]: ...
    def get_meta(self, key: str, group_id: str | None = None) -> str | None: ...
    def meta_with_prefix(self, prefix: str, group_id: str | None = None) -> dict[str, str]: ...

    # -- curation, embeddings, raw statements ----------------------------------------------
    def pointer_facts(self) -> list[Fact]:
        """Non-invalidated facts that carry cross-group pointers, by uuid."""
        ...

    def active_facts_touching(self, entity_uuids: Iterable[str]) -> list[Fact]:
        """Non-invalidated facts (any group) with an endpoint among the entities, by uuid."""
        ...

    def episodes_mentioning(self, entity_uuids: Iterable[str], group_id: str) -> list[str]:
        """Uuids of the group's episodes that mention any of the entities, sorted."""
        ...

    def embedding_hashes(self, group_id: str, limit: int | None = None) -> dict[str, str]:
        """key -> text_hash of the group's embedding rows (at most `limit` of them)."""
        ...

    def embedding_counts(self) -> dict[str, int]:
        """How many embedding rows each group holds (groups with none are absent)."""
        ...

    def position(self, group_id: str) -> int | None:
        """How many lines of the group's WAL the store holds (the seq of its next line), for a
        backend that keeps the WAL itself (`GraphBackend.keeps_wal`); None otherwise."""
        ...

    def rows(self, query: str, params: Mapping[str, Any] | None = None) -> list[list[Any]]:
        """A raw read-only statement in the backend's own Cypher dialect
        (`knowledge_query_cypher`, the code graph's reads): Kuzu runs it on the one database;
        FalkorDB runs it on every group's graph and concatenates the rows."""
        ...

    def entities_of_hits(self, groups: Sequence[str], uuids: Sequence[str]) -> dict[str, Entity]:
        """Entities by uuid, all of them in `groups` (missing ones absent): the few rows of a
        search's hits, read by primary key, never with a scan of the table (lcg.search)."""
        ...

    def facts_of_hits(self, groups: Sequence[str], uuids: Sequence[str]) -> dict[str, Fact]:
        """Facts by uuid, as `entities_of_hits`."""
        ...

    def episodes_of_hits(self, groups: Sequence[str], uuids: Sequence[str]) -> dict[str, Episode]:
        """Episodes by uuid, as `entities_of_hits`."""
        ...

    # -- batched reads by uuid ---------------------------------------------------
    def facts_with_hops_by_uuid(self, uuids: Sequence[str]) -> dict[str, Fact]:
        """The facts among `uuids` (any group) whose two structural hops exist, by uuid (the
        others absent): the rows of `facts_with_hops(uuids=...)` in one batched read, each
        fact once."""
        ...

    def endpoint_provenance(self, entity_uuids: Sequence[str]) -> dict[str, list[tuple[str, str]]]:
        """`provenance(entity_uuids, None)` for the endpoints of a page of facts (any group),
        read in batches where the backend has them."""
        ...

    def temporal_tables(self) -> TemporalTables | None:
        """Every fact row, hop and MENTIONS edge, scanned for the temporal lists' rows held in
        memory (lcg.search.factrows); None where the backend does not build them (a server:
        other processes write it)."""
        ...


@runtime_checkable
class GraphWriter(GraphReader, Protocol):
    """Writes inside one `GraphBackend.transaction()`: all of them apply, or none (per group,
    for a sharded backend). Reads through a writer of a backend without interactive
    transactions (FalkorDB) do not see the transaction's own pending writes."""

    def apply_ops(self, group_id: str, ops: Sequence[Op], new: Collection[str] = ...) -> None:
        """Apply the ops; `new`: uuids of rows they create that the caller minted (stored
        nowhere), which a store may create without looking them up first."""
        ...

    def put_embeddings(
        self,
        rows: Sequence[EmbeddingRow],
        stored: Collection[str] | None = None,
        new: Collection[str] = ...,
    ) -> None:
        """Replace-or-create the rows; `stored`: every stored key among them, when known;
        `new`: owners minted by the caller (their rows are new)."""
        ...

    def delete_embeddings(self, keys: Sequence[str], group_id: str | None = None) -> None: ...
    def set_meta(self, key: str, value: str | None, group_id: str | None = None) -> None: ...
    def load_folded(self, folded: FoldedGroup, embeddings: Sequence[EmbeddingRow]) -> None: ...
    def purge_group(self, group_id: str) -> None:
        """Delete every row of the group (not logged: replay and admin passes only)."""
        ...

    def rewire_hops(self) -> None:
        """Recreate the derived hops of cross-group facts whose endpoints exist."""
        ...

    def drop_dangling_facts(self) -> list[str]:
        """Delete the facts (not cross-group) whose source or target entity does not exist,
        with their hops and embeddings; their uuids (after a raw `cypher.exec` replayed)."""
        ...


@runtime_checkable
class GraphBackend(Protocol):
    """An open graph store."""

    @property
    def backend(self) -> str:
        """`kuzu` or `falkordb`."""
        ...

    @property
    def keeps_wal(self) -> bool:
        """Whether the store keeps each group's WAL itself, next to the data (FalkorDB: a
        stream per group, appended by `commit`), instead of the engine's JSONL files."""
        ...

    def read(self) -> AbstractContextManager[GraphReader]: ...
    def read_for_write(self) -> AbstractContextManager[GraphReader]:
        """Reads for a writer holding the engine's write lock (Kuzu: the writer connection,
        never waiting for a pooled reader)."""
        ...

    def transaction(self) -> AbstractContextManager[GraphWriter]: ...
    def commit(self, commits: Sequence[Commit]) -> None:
        """Apply each commit with its position, atomically per group (all groups at once on a
        backend with one transaction, such as Kuzu).

        Raises:
            GroupMovedError: a group was not at `first_seq - 1` (nothing of it applied).
            StorageError: the store refused a statement.
        """
        ...

    def drop_group(self, group_id: str) -> None:
        """Delete every row of the group and the WAL the store keeps for it (not logged:
        `knowledge_clear_all` on a server)."""
        ...

    def catch_up(self, group_id: str) -> int:
        """Apply the lines of the group's store-kept WAL that its graph lacks (another
        process's commits, or one whose graph change failed after its append); how many
        lines. Nothing for a store whose WAL is the engine's files (the engine replays those).
        """
        ...

    def stream_records(self, group_id: str, position: int = 0) -> list[WalRecord]:
        """The group's WAL records from seq `position` on, as the store keeps them (one
        backend that `keeps_wal`); nothing for a store whose WAL is the engine's files."""
        ...

    def replay_tail(self, group_id: str, from_seq: int) -> int:
        """Apply the group's store-kept WAL lines from `from_seq` on to its graph again, in order
        (a tail rebuild in server mode: a repair), atomically and only while the graph is at
        its stream's end; how many lines. Nothing for a store whose WAL is the engine's files.

        Raises:
            GroupMovedError: another process committed meanwhile (nothing applied).
            StorageError: the graph is behind its stream, or a line cannot run on the store.
        """
        ...

    def stream_bounds(self, group_id: str) -> dict[str, Any] | None:
        """The group's store-kept WAL stream, for `knowledge_status`: `stream` (its key),
        `entries` (commits), `byte_size` (as the server counts it) and `max_seq` (its last
        line's seq, None when empty); None for a store whose WAL is the engine's files."""
        ...

    def status(self) -> dict[str, Any]:
        """What `knowledge_status` reports about the store: backend, server, role."""
        ...

    def checkpoint(self) -> bool:
        """Fold the store's journal into its files now (Kuzu); whether it ran (a server
        persists on its own terms: False)."""
        ...

    def close(self) -> None: ...


def schema_version(r: GraphReader) -> int:
    """The schema version the store records (0: none recorded, as on a FalkorDB server, whose
    graphs are created at the current one)."""
    value = r.get_meta("schema_version")
    return int(value) if value is not None else 0
