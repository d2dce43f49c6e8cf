"""The Kuzu backend of the storage protocol (`lcg.storage.backend`): a thin adapter.

It owns no query: every method delegates to the existing functions of `graph`, `history`,
`bulk`, `search_rows` and `dump` with the connection it wraps, so its behaviour is theirs. The
`group_id` of meta calls is ignored (one database holds every group, and the keys already name
their group).
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from lcg.models import EmbeddingRow, Entity, Episode, Fact
from lcg.storage import bulk, crossgroup, dump, graph, history, search_rows
from lcg.storage.backend import Commit, NameRow
from lcg.storage.search_rows import EntityColumns, EpisodeColumns, FactColumns, TemporalTables
from lcg.storage.store import Conn, Store, engine_version
from lcg.timefilter import TimeFilter
from lcg.wal.fold import FoldedGroup
from lcg.wal.records import Op, WalRecord

__all__ = ["KuzuBackend", "KuzuReader", "KuzuWriter"]


class KuzuReader:
    """`GraphReader` over one Kuzu connection."""

    def __init__(self, conn: Conn) -> None:
        self.conn = conn

    def entity_by_uuid(self, uuid: str) -> Entity | None:
        return graph.entity_by_uuid(self.conn, uuid)

    def entities_by_uuids(self, uuids: Iterable[str]) -> dict[str, Entity]:
        return graph.entities_by_uuids(self.conn, uuids)

    def facts_by_uuids(self, uuids: Iterable[str]) -> dict[str, Fact]:
        return graph.facts_by_uuids(self.conn, uuids)

    def episodes_by_uuids(self, uuids: Iterable[str]) -> dict[str, Episode]:
        return graph.episodes_by_uuids(self.conn, uuids)

    def entities_of_hits(self, groups: Sequence[str], uuids: Sequence[str]) -> dict[str, Entity]:
        return graph.entities_of_hits(self.conn, uuids)  # one database holds every group

    def facts_of_hits(self, groups: Sequence[str], uuids: Sequence[str]) -> dict[str, Fact]:
        return graph.facts_of_hits(self.conn, uuids)

    def episodes_of_hits(self, groups: Sequence[str], uuids: Sequence[str]) -> dict[str, Episode]:
        return graph.episodes_of_hits(self.conn, uuids)

    def episode_groups(self, uuids: Sequence[str]) -> dict[str, str]:
        return graph.episode_groups(self.conn, uuids)

    def entities_in_groups(
        self, groups: Sequence[str] | None, limit: int | None = None
    ) -> list[Entity]:
        return graph.entities_in_groups(self.conn, groups, limit)

    def facts_with_hops(
        self,
        groups: Sequence[str] | None = None,
        uuids: Sequence[str] | None = None,
        limit: int | None = None,
    ) -> list[Fact]:
        return graph.facts_with_hops(self.conn, groups, uuids, limit)

    def find_active_fact(
        self, group_id: str, source: str, predicate: str, target: str
    ) -> Fact | None:
        return graph.find_active_fact(self.conn, group_id, source, predicate, target)

    def neighbor_facts(self, center: str, groups: Sequence[str] | None, limit: int) -> list[Fact]:
        return graph.neighbor_facts(self.conn, center, groups, limit)

    def provenance(
        self, entity_uuids: Iterable[str], groups: Sequence[str] | None
    ) -> dict[str, list[tuple[str, str]]]:
        return graph.provenance(self.conn, entity_uuids, groups)

    def entities_by_source(
        self, source: str, groups: Sequence[str] | None, limit: int
    ) -> list[Entity]:
        return graph.entities_by_source(self.conn, source, groups, limit)

    def episodes_recent(self, group_id: str, last_n: int) -> list[Episode]:
        return graph.episodes_recent(self.conn, group_id, last_n)

    def episode_mentions(self, episode_uuids: Sequence[str]) -> dict[str, list[str]]:
        return graph.episode_mentions(self.conn, episode_uuids)

    def episodes_matching(
        self,
        groups: Sequence[str],
        *,
        source_file: str | None = None,
        chunk_id: str | None = None,
    ) -> list[tuple[str, str]]:
        return graph.episodes_matching(
            self.conn, groups, source_file=source_file, chunk_id=chunk_id
        )

    def name_rows(self) -> list[NameRow]:
        return graph.name_rows(self.conn)

    def stored_text_hashes(self, keys: Sequence[str]) -> dict[str, str]:
        return graph.stored_text_hashes(self.conn, keys)

    def facts_at(
        self,
        groups: Sequence[str] | None,
        time: TimeFilter,
        at: datetime,
        limit: int | None = None,
    ) -> list[Fact]:
        return history.facts_at(self.conn, groups, time, at, limit)

    def neighbor_facts_at(
        self,
        center: str,
        groups: Sequence[str] | None,
        limit: int,
        time: TimeFilter,
        at: datetime,
    ) -> list[Fact]:
        return history.neighbor_facts_at(self.conn, center, groups, limit, time, at)

    def fact_changes(
        self,
        groups: Sequence[str] | None,
        since: datetime,
        until: datetime,
        entity_uuid: str | None = None,
    ) -> list[Fact]:
        return history.fact_changes(self.conn, groups, since, until, entity_uuid)

    def facts_around(
        self, entity_uuids: Iterable[str], groups: Sequence[str] | None = None
    ) -> list[Fact]:
        return history.facts_around(self.conn, entity_uuids, groups)

    def group_ids(self) -> list[str]:
        return dump.dump_groups(self.conn)

    def entity_columns(self, group_id: str) -> EntityColumns:
        return search_rows.entity_columns(self.conn, group_id)

    def fact_columns(self, group_id: str, never: int, always: int) -> FactColumns:
        return search_rows.fact_columns(self.conn, group_id, never, always)

    def episode_columns(self, group_id: str) -> EpisodeColumns:
        return search_rows.episode_columns(self.conn, group_id)

    def entity_pages(self, group_id: str, size: int = 500) -> Iterator[list[Entity]]:
        return dump.entity_pages(self.conn, group_id, size)

    def fact_pages(self, group_id: str, size: int = 500) -> Iterator[list[Fact]]:
        return dump.fact_pages(self.conn, group_id, size)

    def episode_pages(self, group_id: str, size: int = 500) -> Iterator[list[Episode]]:
        return dump.episode_pages(self.conn, group_id, size)

    def mention_pages(
        self, group_id: str, size: int = 500
    ) -> Iterator[list[tuple[str, list[str]]]]:
        return dump.mention_pages(self.conn, group_id, size)

    def counts(self) -> dict[str, Any]:
        return graph.counts(self.conn)

    def group_counts(self, group_id: str) -> dict[str, int]:
        return graph.group_counts(self.conn, group_id)

    def get_meta(self, key: str, group_id: str | None = None) -> str | None:
        return graph.get_meta(self.conn, key)

    def meta_with_prefix(self, prefix: str, group_id: str | None = None) -> dict[str, str]:
        return graph.meta_with_prefix(self.conn, prefix)

    def pointer_facts(self) -> list[Fact]:
        return crossgroup.pointer_facts(self.conn)

    def active_facts_touching(self, entity_uuids: Iterable[str]) -> list[Fact]:
        return crossgroup.active_facts_touching(self.conn, entity_uuids)

    def episodes_mentioning(self, entity_uuids: Iterable[str], group_id: str) -> list[str]:
        return crossgroup.episodes_mentioning(self.conn, entity_uuids, group_id)

    def embedding_hashes(self, group_id: str, limit: int | None = None) -> dict[str, str]:
        return graph.embedding_hashes(self.conn, group_id, limit)

    def embedding_counts(self) -> dict[str, int]:
        return graph.embedding_counts(self.conn)

    def position(self, group_id: str) -> int | None:
        return None  # the engine keeps Kuzu's WAL (files) and its applied position (meta)

    def rows(self, query: str, params: Mapping[str, Any] | None = None) -> list[list[Any]]:
        return self.conn.rows(query, dict(params) if params is not None else None)

    def facts_with_hops_by_uuid(self, uuids: Sequence[str]) -> dict[str, Fact]:
        return history.facts_with_hops_by_uuid(self.conn, uuids)

    def endpoint_provenance(self, entity_uuids: Sequence[str]) -> dict[str, list[tuple[str, str]]]:
        return history.endpoint_provenance(self.conn, entity_uuids)

    def temporal_tables(self) -> TemporalTables | None:
        return search_rows.temporal_tables(self.conn)


class KuzuWriter(KuzuReader):
    """`GraphWriter` over the writer connection inside a Kuzu transaction."""

    def apply_ops(self, group_id: str, ops: Sequence[Op], new: Collection[str] = ()) -> None:
        graph.apply_ops(self.conn, group_id, ops, new)

    def put_embeddings(
        self,
        rows: Sequence[EmbeddingRow],
        stored: Collection[str] | None = None,
        new: Collection[str] = (),
    ) -> None:
        graph.put_embeddings(self.conn, rows, stored, new)

    def delete_embeddings(self, keys: Sequence[str], group_id: str | None = None) -> None:
        graph.delete_embeddings(self.conn, keys)

    def set_meta(self, key: str, value: str | None, group_id: str | None = None) -> None:
        graph.set_meta(self.conn, key, value)

    def load_folded(self, folded: FoldedGroup, embeddings: Sequence[EmbeddingRow]) -> None:
        bulk.load_folded(self.conn, folded, embeddings)

    def purge_group(self, group_id: str) -> None:
        graph.purge_group(self.conn, group_id)

    def rewire_hops(self) -> None:
        crossgroup.rewire_hops(self.conn)

    def drop_dangling_facts(self) -> list[str]:
        return crossgroup.drop_dangling_facts(self.conn)


class KuzuBackend:
    """`GraphBackend` over an open `Store` (which the engine may still use directly)."""

    backend = "kuzu"
    keeps_wal = False

    def __init__(self, store: Store) -> None:
        self.store = store

    @contextlib.contextmanager
    def read(self) -> Iterator[KuzuReader]:
        with self.store.read() as conn:
            yield KuzuReader(conn)

    @contextlib.contextmanager
    def read_for_write(self) -> Iterator[KuzuReader]:
        with self.store.writer() as conn:
            yield KuzuReader(conn)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[KuzuWriter]:
        with self.store.transaction() as conn:
            yield KuzuWriter(conn)

    def commit(self, commits: Sequence[Commit]) -> None:
        """Every commit in one Kuzu transaction: the ops, then the embedding rows and the meta
        entries of each group (the engine's write lock orders writers, so seqs are not checked;
        the WAL lines are the engine's files)."""
        with self.transaction() as tx:
            for c in (c for c in commits if c.ops):  # no operation: nothing, as in the engine
                tx.apply_ops(c.group_id, c.ops)
                tx.put_embeddings(c.put)
                tx.delete_embeddings(c.delete)
                for key, value in c.meta.items():
                    tx.set_meta(key, value)

    def status(self) -> dict[str, Any]:
        return {
            "backend": "kuzu",
            "server": str(self.store.path),
            "role": "embedded",
            # The embedded engine and its version, e.g. "ladybug 0.22.0" (LCG_EMBEDDED_STORE).
            "engine": engine_version(self.store.engine),
        }

    def drop_group(self, group_id: str) -> None:
        with self.transaction() as tx:  # the group's WAL files are the engine's
            tx.purge_group(group_id)

    def catch_up(self, group_id: str) -> int:
        return 0  # the engine replays Kuzu's WAL files itself (lcg.engine.catchup)

    def stream_records(self, group_id: str, position: int = 0) -> list[WalRecord]:
        return []  # the engine keeps Kuzu's WAL, as JSONL files

    def replay_tail(self, group_id: str, from_seq: int) -> int:
        return 0  # the engine replays Kuzu's WAL files itself (lcg.admin.rebuild)

    def stream_bounds(self, group_id: str) -> dict[str, Any] | None:
        return None  # the engine keeps Kuzu's WAL, as JSONL files

    def checkpoint(self) -> bool:
        return self.store.checkpoint(force=True)

    def close(self) -> None:
        self.store.close()
