"""The FalkorDB server backend: `GraphBackend` over one FalkorDB (redis-server + module) node.

Reads run `GRAPH.RO_QUERY ... --compact` on the graphs of the groups asked for, pipelined in one
round trip when they fan out over several groups (a read with `groups=None`, or by uuid, covers
every group graph `GRAPH.LIST` names), and merge the answers: a read with an order and a limit
is ordered and limited per graph and again after the merge, with the ordering both databases
use (nulls sort as the largest value).

A commit (`GraphBackend.commit`) is, per group, one write of these commands on one connection:

    MULTI
    EVAL <append if the stream ends at first_seq>  {lcg:<g>}:wal  (XADD id first_seq + 1)
    GRAPH.QUERY lcg:<g> <each statement, guarded: runs only while the position is first_seq>
    GRAPH.QUERY lcg:<g> <advance the position to last_seq + 1>
    EXEC
    WAIT <replicas> <timeout>                       (only with replicas >= 1)

The position is how many WAL lines the graph holds (the seq of the next line), kept in the
graph's one `LcgPosition` node; the stream id is position + 1 because Redis refuses the id 0-0.
The append is a small script (`_APPEND`): it adds the entry only if the stream ends just before
the batch. If another process committed first, the append is refused and every guarded
statement matches nothing: `GroupMovedError`, nothing applied. EXEC never rolls back
(measured), so a statement that fails after the XADD leaves the stream ahead of the graph; the
commit then raises `StorageError` and is not acknowledged (the outcome is unknown to the caller:
the lines are in the stream), and `catch_up` applies the stream from the graph's position.
Nor does EXEC stop at a failed statement: the rest of the transaction runs, the advance
included, so a commit (or a catch-up) whose reply holds an error for one statement sets the
position back to the batch's first seq (`REWIND`) before it raises: the graph never claims
seqs whose rows it lacks, and the next catch-up applies the batch again.

A Redis Cluster (several seed nodes in the URL, or one node that says `cluster_enabled:1`):
reads go through redis-py's `RedisCluster`, which routes each command by its key and fans a
multi-group read out as one pipeline per primary; a commit goes to the primary owning the
group's slot on a connection of that primary's pool (WAIT must run on the connection that
wrote). A MOVED/ASK/CLUSTERDOWN reply aborts the EXEC (nothing applied), so the commit refreshes
the slot map and is sent again; a lost connection leaves the outcome unknown and is raised.

What this backend does not do yet: follow an ASK through a slot migration (it retries until
the migration ends or its attempts run out), a full rebuild of a group
from its stream through the engine's replay (only `catch_up` of the tail), cross-group hops (a
fact whose endpoint is in another group's graph has no hop there), and
`cypher.exec` operations.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import defaultdict
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

import numpy as np

try:
    import redis
    from redis.backoff import ConstantBackoff
    from redis.cluster import ClusterNode, RedisCluster
    from redis.exceptions import RedisClusterException
    from redis.retry import Retry
except ImportError as exc:  # the optional `server` extra
    raise ImportError(
        "the FalkorDB backend needs the server extra: pip install 'lcg[server]'"
    ) from exc

from lcg.config import Settings
from lcg.errors import StorageError
from lcg.models import EmbeddingRow, Entity, Episode, Fact
from lcg.storage.backend import Commit, GroupMovedError, NameRow, NotDurableError
from lcg.storage.falkordb import cypher as cy
from lcg.storage.falkordb.keys import (
    META_KEY,
    from_micros,
    graph_key,
    group_of_graph,
    params_header,
    stream_key,
    to_micros,
)
from lcg.storage.history import time_clause
from lcg.storage.rows import provenance_of
from lcg.storage.search_rows import (
    EntityColumns,
    EpisodeColumns,
    FactColumns,
    Micros,
    TemporalTables,
)
from lcg.timefilter import TimeFilter
from lcg.timeutil import now, to_wal
from lcg.wal.fold import FoldedGroup, fold
from lcg.wal.reader import parse_line
from lcg.wal.records import Op, WalRecord, encode_batch

__all__ = ["FalkorBackend", "FalkorReader", "FalkorWriter"]

Rows = list[list[Any]]
_EMPTY_KEY = "empty key"  # FalkorDB's error for a query on a graph that does not exist
_MOVED = "LCGMOVED"
# The stream append of a commit: only when the stream ends just before the batch (its top
# entry's `last` + 1 == the batch's first seq, or an empty stream and seq 0). An explicit XADD
# id alone refuses only ids at or below the top, so a writer that believed the group further
# along than it is would leave a gap in the stream. (Scripts may call XADD, not GRAPH.QUERY:
# docs/server-mode-design.md §1; the graph side has its own guard.)
_APPEND = """
local top = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
local at = 0
if #top > 0 then
  local fields = top[1][2]
  for i = 1, #fields, 2 do
    if fields[i] == 'last' then at = tonumber(fields[i + 1]) + 1 end
  end
end
if at ~= tonumber(ARGV[1]) then
  return redis.error_reply('LCGMOVED the stream is at ' .. at)
end
return redis.call('XADD', KEYS[1], ARGV[2], 'first', ARGV[1], 'last', ARGV[3], 'lines', ARGV[4])
"""


# Replies that mean "this node does not serve the slot now": the EXEC is aborted (nothing
# applied) and the unit can be sent again after the slot map is refreshed.
_REROUTE = (
    redis.exceptions.AskError,
    redis.exceptions.ClusterDownError,
    redis.exceptions.TryAgainError,
)
_ROUTE_ATTEMPTS = 6


def _cluster_enabled(client: redis.Redis) -> bool:
    """Whether the one node given is part of a Redis Cluster (`INFO cluster`)."""
    return bool(int(client.info("cluster").get("cluster_enabled", 0)))


def _cluster_client(seeds: Sequence[str], kwargs: dict[str, Any]) -> RedisCluster:
    """A cluster client that knows every seed. Its retry is explicit and short: redis-py's
    default backoff retries a dead primary for seconds (docs/server-mode-design.md §3); 15
    tries 0.2 s apart outlast an automatic failover (node timeout 1.5 s: ~3-4 s measured)."""
    nodes = []
    for url in seeds:
        parts = urlsplit(url)
        if parts.hostname is None:
            raise StorageError(f"a FalkorDB URL names a host: {url!r}")
        node: Any = ClusterNode  # redis-py leaves its constructor untyped
        nodes.append(node(parts.hostname, parts.port or 6379))
    return RedisCluster(
        startup_nodes=nodes,
        ssl=urlsplit(seeds[0]).scheme == "rediss",
        retry=Retry(ConstantBackoff(0.2), 15),
        **kwargs,
    )


def _scalar(value: list[Any]) -> Any:
    """One value of a `--compact` reply: [type, value] (FalkorDB's ResultSetScalarTypes)."""
    kind, raw = int(value[0]), value[1]
    if kind == 1:
        return None
    if kind == 2:
        return raw
    if kind == 3:
        return int(raw)
    if kind == 4:
        return raw == "true"
    if kind == 5:
        return float(raw)
    if kind == 6:
        return [_scalar(v) for v in raw]
    if kind == 10:
        return {raw[i]: _scalar(raw[i + 1]) for i in range(0, len(raw), 2)}
    raise StorageError(f"unexpected FalkorDB value type {kind} (lcg reads scalars only)")


def _rows(reply: Any) -> Rows:
    """The rows of a `--compact` GRAPH.QUERY reply ([header, rows, stats], or [stats])."""
    if not isinstance(reply, list) or len(reply) < 3:
        return []
    return [[_scalar(v) for v in row] for row in reply[1]]


def _stat(reply: Any, name: str) -> float:
    """A statistic (`Nodes created`, `Properties set`, ...) of a GRAPH.QUERY reply."""
    stats = reply[-1] if isinstance(reply, list) and reply else []
    for line in stats:
        text = line if isinstance(line, str) else str(line)
        if text.startswith(name + ":"):
            return float(text.split(":", 1)[1].split()[0])
    return 0.0


def _command(client: Any, *args: Any) -> Any:
    """`client.execute_command(*args)` (a client or a pipeline)."""
    return client.execute_command(*args)


def _order_key(value: Any) -> tuple[bool, Any]:
    """Kuzu's and FalkorDB's order: nulls after every value."""
    return (value is None, value if value is not None else 0)


def _top(rows: Rows, col: int, limit: int | None, *, desc: bool = False) -> Rows:
    ordered = sorted(rows, key=lambda r: _order_key(r[col]), reverse=desc)
    return ordered if limit is None else ordered[:limit]


class FalkorReader:
    """`GraphReader` over a FalkorDB server (one graph per group)."""

    def __init__(self, backend: FalkorBackend) -> None:
        self._b = backend

    # -- plumbing -------------------------------------------------------------------------

    def _graphs(self, groups: Sequence[str] | None) -> list[str]:
        return self._b.groups() if groups is None else list(dict.fromkeys(groups))

    def _query(self, group_id: str, query: str, params: dict[str, Any] | None = None) -> Rows:
        return self._fan([group_id], query, params)[group_id]

    def _fan(
        self, groups: Sequence[str] | None, query: str, params: dict[str, Any] | None = None
    ) -> dict[str, Rows]:
        """`query` on the graph of each group (None: every group), in one round trip; a group
        without a graph answers no rows."""
        names = self._graphs(groups)
        if not names:
            return {}
        text = params_header(params) + query
        pipe = self._b.client.pipeline(transaction=False)
        for g in names:
            _command(pipe, "GRAPH.RO_QUERY", graph_key(g), text, "--compact")
        try:
            replies = pipe.execute(raise_on_error=False)
        except redis.RedisError as exc:
            raise StorageError(f"FalkorDB read failed: {exc}") from exc
        out: dict[str, Rows] = {}
        for g, reply in zip(names, replies, strict=True):
            if isinstance(reply, redis.ResponseError) and _EMPTY_KEY in str(reply):
                out[g] = []
            elif isinstance(reply, Exception):
                raise StorageError(f"FalkorDB refused a read of group {g!r}: {reply}") from reply
            else:
                out[g] = _rows(reply)
        return out

    def _all(
        self, groups: Sequence[str] | None, query: str, params: dict[str, Any] | None = None
    ) -> Rows:
        return [row for rows in self._fan(groups, query, params).values() for row in rows]

    # -- point and batch reads ------------------------------------------------------------

    def entity_by_uuid(self, uuid: str) -> Entity | None:
        return self.entities_by_uuids([uuid]).get(uuid)

    def entities_by_uuids(self, uuids: Iterable[str]) -> dict[str, Entity]:
        keys = list(dict.fromkeys(uuids))
        if not keys:
            return {}
        rows = self._all(
            None,
            f"UNWIND $keys AS u MATCH (e:Entity {{uuid: u}}) RETURN {cy.ENTITY_COLS}",
            {"keys": keys},
        )
        return {row[0]: cy.entity(row) for row in rows}

    def facts_by_uuids(self, uuids: Iterable[str]) -> dict[str, Fact]:
        keys = list(dict.fromkeys(uuids))
        if not keys:
            return {}
        rows = self._all(
            None,
            f"UNWIND $keys AS u MATCH (f:Fact {{uuid: u}}) RETURN {cy.FACT_COLS}",
            {"keys": keys},
        )
        return {row[0]: cy.fact(row) for row in rows}

    def episodes_by_uuids(self, uuids: Iterable[str]) -> dict[str, Episode]:
        keys = list(dict.fromkeys(uuids))
        if not keys:
            return {}
        rows = self._all(
            None,
            f"UNWIND $keys AS u MATCH (ep:Episode {{uuid: u}}) RETURN {cy.EPISODE_COLS}",
            {"keys": keys},
        )
        return {row[0]: cy.episode(row) for row in rows}

    def entities_of_hits(self, groups: Sequence[str], uuids: Sequence[str]) -> dict[str, Entity]:
        rows = self._of_hits(groups, uuids, f"(e:Entity {{uuid: u}}) RETURN {cy.ENTITY_COLS}")
        return {row[0]: cy.entity(row) for row in rows}

    def facts_of_hits(self, groups: Sequence[str], uuids: Sequence[str]) -> dict[str, Fact]:
        rows = self._of_hits(groups, uuids, f"(f:Fact {{uuid: u}}) RETURN {cy.FACT_COLS}")
        return {row[0]: cy.fact(row) for row in rows}

    def episodes_of_hits(self, groups: Sequence[str], uuids: Sequence[str]) -> dict[str, Episode]:
        rows = self._of_hits(groups, uuids, f"(ep:Episode {{uuid: u}}) RETURN {cy.EPISODE_COLS}")
        return {row[0]: cy.episode(row) for row in rows}

    def _of_hits(self, groups: Sequence[str], uuids: Sequence[str], match: str) -> Rows:
        """`UNWIND`ed uuid lookups on the graphs of `groups` only (`*_of_hits`)."""
        keys = list(dict.fromkeys(uuids))
        if not keys or not groups:
            return []
        return self._all(
            list(dict.fromkeys(groups)), f"UNWIND $keys AS u MATCH {match}", {"keys": keys}
        )

    def episode_groups(self, uuids: Sequence[str]) -> dict[str, str]:
        keys = list(dict.fromkeys(uuids))
        if not keys:
            return {}
        rows = self._all(
            None,
            "UNWIND $keys AS u MATCH (ep:Episode {uuid: u}) RETURN ep.uuid, ep.group_id",
            {"keys": keys},
        )
        return {row[0]: row[1] for row in rows}

    def entities_in_groups(
        self, groups: Sequence[str] | None, limit: int | None = None
    ) -> list[Entity]:
        tail, params = "", {}
        if limit is not None:
            tail, params = " ORDER BY e.uuid DESC LIMIT $limit", {"limit": limit}
        rows = self._all(groups, f"MATCH (e:Entity) RETURN {cy.ENTITY_COLS}{tail}", params)
        if limit is not None:
            rows = _top(rows, 0, limit, desc=True)
        return [cy.entity(r) for r in rows]

    def facts_with_hops(
        self,
        groups: Sequence[str] | None = None,
        uuids: Sequence[str] | None = None,
        limit: int | None = None,
    ) -> list[Fact]:
        params: dict[str, Any] = {}
        if uuids is not None:
            params["uuids"] = list(uuids)
            query = f"UNWIND $uuids AS u MATCH {cy.HOPS} WHERE f.uuid = u"
        else:
            query = f"MATCH {cy.HOPS}"
        tail = ""
        if limit is not None:
            tail = " ORDER BY f.uuid DESC LIMIT $limit"
            params["limit"] = limit
        rows = self._all(groups, f"{query} RETURN {cy.FACT_COLS}{tail}", params)
        if limit is not None:
            rows = _top(rows, 0, limit, desc=True)
        return [cy.fact(r) for r in rows]

    def find_active_fact(
        self, group_id: str, source: str, predicate: str, target: str
    ) -> Fact | None:
        rows = self._query(
            group_id,
            "MATCH (a:Entity {uuid: $s})-[:RELATES_TO]->(f:Fact) WHERE f.target_uuid = $t "
            "AND f.group_id = $g AND f.name = $p AND f.invalid_at IS NULL "
            f"RETURN {cy.FACT_COLS} ORDER BY f.created_at, f.uuid LIMIT 1",
            {"s": source, "t": target, "g": group_id, "p": predicate},
        )
        return cy.fact(rows[0]) if rows else None

    def neighbor_facts(
        self,
        center: str,
        groups: Sequence[str] | None,
        limit: int,
        where: str = "",
        where_params: dict[str, Any] | None = None,
    ) -> list[Fact]:
        """`graph.neighbor_facts`: outgoing facts (uuid desc, limited), then incoming ones."""
        params: dict[str, Any] = {"c": center, "limit": limit, **(where_params or {})}
        extra = f"AND {where}" if where else ""
        out = self._all(
            groups,
            f"MATCH (a:Entity {{uuid: $c}})-[:RELATES_TO]->(f:Fact)-[:RELATES_TO]->(b:Entity) "
            f"WHERE f.source_uuid = $c {extra} RETURN {cy.FACT_COLS} "
            "ORDER BY f.uuid DESC LIMIT $limit",
            params,
        )
        inc = self._all(
            groups,
            f"MATCH (a:Entity)-[:RELATES_TO]->(f:Fact)-[:RELATES_TO]->(b:Entity {{uuid: $c}}) "
            f"WHERE f.target_uuid = $c {extra} RETURN {cy.FACT_COLS} "
            "ORDER BY f.uuid DESC LIMIT $limit",
            params,
        )
        rows = _top(out, 0, limit, desc=True) + _top(inc, 0, limit, desc=True)
        return [cy.fact(r) for r in rows[:limit]]

    def provenance(
        self, entity_uuids: Iterable[str], groups: Sequence[str] | None
    ) -> dict[str, list[tuple[str, str]]]:
        keys = list(dict.fromkeys(entity_uuids))
        if not keys:
            return {}
        rows = self._all(
            groups,
            "UNWIND $keys AS u MATCH (ep:Episode)-[:MENTIONS]->(e:Entity {uuid: u}) "
            "RETURN e.uuid, ep.uuid, ep.source_description, ep.created_at",
            {"keys": keys},
        )
        return provenance_of(rows)

    def entities_by_source(
        self, source: str, groups: Sequence[str] | None, limit: int
    ) -> list[Entity]:
        rows = self._all(
            groups,
            "MATCH (ep:Episode)-[:MENTIONS]->(e:Entity) WHERE ep.source_description CONTAINS $src "
            f"WITH DISTINCT e RETURN {cy.ENTITY_COLS} ORDER BY e.uuid LIMIT $limit",
            {"src": source, "limit": limit},
        )
        return [cy.entity(r) for r in _top(rows, 0, limit)]

    def episodes_recent(self, group_id: str, last_n: int) -> list[Episode]:
        rows = self._query(
            group_id,
            f"MATCH (ep:Episode) RETURN {cy.EPISODE_COLS} "
            "ORDER BY ep.created_at DESC, ep.uuid DESC LIMIT $n",
            {"n": last_n},
        )
        return [cy.episode(r) for r in rows]

    def episode_mentions(self, episode_uuids: Sequence[str]) -> dict[str, list[str]]:
        keys = list(episode_uuids)
        if not keys:
            return {}
        rows = self._all(
            None,
            "UNWIND $uuids AS u MATCH (ep:Episode {uuid: u})-[:MENTIONS]->(e:Entity) "
            "RETURN ep.uuid, e.uuid",
            {"uuids": keys},
        )
        out: dict[str, list[str]] = defaultdict(list)
        for ep, ent in sorted(rows, key=lambda r: r[1]):
            out[ep].append(ent)
        return out

    def episodes_matching(
        self,
        groups: Sequence[str],
        *,
        source_file: str | None = None,
        chunk_id: str | None = None,
    ) -> list[tuple[str, str]]:
        params: dict[str, Any] = {}
        if source_file is not None:
            cond = "(ep.source_description = $sf OR ep.source_description STARTS WITH $prefix)"
            params.update({"sf": source_file, "prefix": source_file + ":"})
        else:
            cond = "ep.name = $cid"
            params["cid"] = chunk_id
        rows = self._all(
            groups,
            f"MATCH (ep:Episode) WHERE {cond} RETURN ep.uuid, ep.group_id, ep.created_at",
            params,
        )
        rows.sort(key=lambda r: (_order_key(r[2]), r[0]))
        return [(row[0], row[1]) for row in rows]

    def name_rows(self) -> list[NameRow]:
        return [
            (row[0], row[1] or "", row[2], from_micros(row[3]), "Merged" in (row[4] or ()))
            for row in self._all(
                None, "MATCH (e:Entity) RETURN e.group_id, e.name, e.uuid, e.created_at, e.labels"
            )
        ]

    def stored_text_hashes(self, keys: Sequence[str]) -> dict[str, str]:
        unique = list(dict.fromkeys(keys))
        if not unique:
            return {}
        rows = self._all(
            None,
            "UNWIND $keys AS u MATCH (v:Embedding {key: u}) RETURN v.key, v.text_hash",
            {"keys": unique},
        )
        return {row[0]: row[1] for row in rows}

    # -- temporal reads -------------------------------------------------------------------

    @staticmethod
    def _time(time: TimeFilter, at: datetime) -> tuple[str, dict[str, Any]]:
        """`history.time_clause`, with its instants as stored (microseconds)."""
        when, params = time_clause("f", time, at)
        return when, {k: to_micros(v) if isinstance(v, datetime) else v for k, v in params.items()}

    def facts_at(
        self,
        groups: Sequence[str] | None,
        time: TimeFilter,
        at: datetime,
        limit: int | None = None,
    ) -> list[Fact]:
        when, params = self._time(time, at)
        tail = ""
        if limit is not None:
            tail = " ORDER BY f.uuid DESC LIMIT $limit"
            params["limit"] = limit
        where = f"WHERE {when}" if when else ""
        rows = self._all(groups, f"MATCH {cy.HOPS} {where} RETURN {cy.FACT_COLS}{tail}", params)
        if limit is not None:
            rows = _top(rows, 0, limit, desc=True)
        return [cy.fact(r) for r in rows]

    def neighbor_facts_at(
        self,
        center: str,
        groups: Sequence[str] | None,
        limit: int,
        time: TimeFilter,
        at: datetime,
    ) -> list[Fact]:
        when, params = self._time(time, at)
        return self.neighbor_facts(center, groups, limit, when, params)

    def fact_changes(
        self,
        groups: Sequence[str] | None,
        since: datetime,
        until: datetime,
        entity_uuid: str | None = None,
    ) -> list[Fact]:
        params: dict[str, Any] = {"s": to_micros(since), "u": to_micros(until)}
        window = " OR ".join(
            f"(f.{col} >= $s AND f.{col} < $u)"
            for col in ("valid_at", "invalid_at", "created_at", "expired_at")
        )
        entity = ""
        if entity_uuid is not None:
            params["e"] = entity_uuid
            entity = "(a.uuid = $e OR b.uuid = $e) AND "
        rows = self._all(
            groups, f"MATCH {cy.HOPS} WHERE {entity}({window}) RETURN {cy.FACT_COLS}", params
        )
        return [cy.fact(r) for r in rows]

    def facts_around(
        self, entity_uuids: Iterable[str], groups: Sequence[str] | None = None
    ) -> list[Fact]:
        keys = list(dict.fromkeys(entity_uuids))
        if not keys:
            return []
        rows: Rows = []
        for hop in (
            "(:Entity {uuid: u})-[:RELATES_TO]->(f:Fact)",
            "(f:Fact)-[:RELATES_TO]->(:Entity {uuid: u})",
        ):
            rows += self._all(
                groups, f"UNWIND $keys AS u MATCH {hop} RETURN {cy.FACT_COLS}", {"keys": keys}
            )
        seen: dict[str, Fact] = {}
        for row in rows:
            seen.setdefault(row[0], cy.fact(row))
        return list(seen.values())

    # -- whole groups ---------------------------------------------------------------------

    def group_ids(self) -> list[str]:
        """Groups that hold an entity, fact or episode, sorted (`dump.dump_groups`)."""
        found = self._fan(
            None,
            "MATCH (x) WHERE x:Entity OR x:Fact OR x:Episode RETURN x.group_id LIMIT 1",
        )
        return sorted(g for g, rows in found.items() if rows)

    def entity_columns(self, group_id: str) -> EntityColumns:
        rows = self._query(group_id, "MATCH (e:Entity) RETURN e.uuid, e.name, e.summary, e.labels")
        return EntityColumns(
            uuid=[r[0] for r in rows],
            name=[r[1] or "" for r in rows],
            summary=[r[2] or "" for r in rows],
            labels=[tuple(r[3] or ()) for r in rows],
        )

    def fact_columns(self, group_id: str, never: int, always: int) -> FactColumns:
        rows = self._query(
            group_id,
            "MATCH (f:Fact) RETURN f.uuid, f.name, f.fact, f.relation_type, f.source_uuid, "
            "f.target_uuid, f.valid_at, f.invalid_at, f.created_at, f.expired_at",
        )

        def micros(col: int, missing: int) -> Micros:
            return np.asarray([missing if r[col] is None else r[col] for r in rows], dtype=np.int64)

        return FactColumns(
            uuid=[r[0] for r in rows],
            name=[r[1] or "" for r in rows],
            fact=[r[2] or "" for r in rows],
            relation_type=[r[3] for r in rows],
            source_uuid=[r[4] or "" for r in rows],
            target_uuid=[r[5] or "" for r in rows],
            valid_at=micros(6, always),
            invalid_at=micros(7, never),
            created_at=micros(8, always),
            expired_at=micros(9, never),
        )

    def episode_columns(self, group_id: str) -> EpisodeColumns:
        rows = self._query(group_id, "MATCH (ep:Episode) RETURN ep.uuid, ep.content")
        return EpisodeColumns(uuid=[r[0] for r in rows], content=[r[1] or "" for r in rows])

    def _pages(self, label: str, alias: str, cols: str, group_id: str, size: int) -> Iterator[Rows]:
        after = ""
        while True:
            rows = self._query(
                group_id,
                f"MATCH ({alias}:{label}) WHERE {alias}.uuid > $after "
                f"RETURN {cols} ORDER BY {alias}.uuid LIMIT $n",
                {"after": after, "n": size},
            )
            if not rows:
                return
            yield rows
            if len(rows) < size:
                return
            after = str(rows[-1][0])

    def entity_pages(self, group_id: str, size: int = 500) -> Iterator[list[Entity]]:
        for rows in self._pages("Entity", "e", cy.ENTITY_COLS, group_id, size):
            yield [cy.entity(r) for r in rows]

    def fact_pages(self, group_id: str, size: int = 500) -> Iterator[list[Fact]]:
        for rows in self._pages("Fact", "f", cy.FACT_COLS, group_id, size):
            yield [cy.fact(r) for r in rows]

    def episode_pages(self, group_id: str, size: int = 500) -> Iterator[list[Episode]]:
        for rows in self._pages("Episode", "ep", cy.EPISODE_COLS, group_id, size):
            yield [cy.episode(r) for r in rows]

    def mention_pages(
        self, group_id: str, size: int = 500
    ) -> Iterator[list[tuple[str, list[str]]]]:
        after = ""
        while True:
            eps = self._query(
                group_id,
                "MATCH (ep:Episode)-[:MENTIONS]->(:Entity) WHERE ep.uuid > $after "
                "RETURN DISTINCT ep.uuid ORDER BY ep.uuid LIMIT $n",
                {"after": after, "n": size},
            )
            if not eps:
                return
            uuids = [str(r[0]) for r in eps]
            rows = self._query(
                group_id,
                "UNWIND $uuids AS u MATCH (ep:Episode {uuid: u})-[:MENTIONS]->(e:Entity) "
                "RETURN ep.uuid, e.uuid ORDER BY ep.uuid, e.uuid",
                {"uuids": uuids},
            )
            linked: dict[str, list[str]] = {}
            for ep, ent in rows:
                linked.setdefault(ep, []).append(ent)
            page = [(u, linked[u]) for u in uuids if u in linked]
            if page:
                yield page
            if len(eps) < size:
                return
            after = uuids[-1]

    # -- status and meta ------------------------------------------------------------------

    def _count(self, groups: Sequence[str] | None, label: str) -> int:
        return sum(
            int(rows[0][0]) if rows else 0
            for rows in self._fan(groups, f"MATCH (x:{label}) RETURN count(x)").values()
        )

    def counts(self) -> dict[str, Any]:
        spans = [
            rows[0]
            for rows in self._fan(
                None, "MATCH (ep:Episode) RETURN min(ep.created_at), max(ep.created_at)"
            ).values()
            if rows
        ]
        firsts = [r[0] for r in spans if r[0] is not None]
        lasts = [r[1] for r in spans if r[1] is not None]
        return {
            "entities": self._count(None, "Entity"),
            "facts": self._count(None, "Fact"),
            "episodes": self._count(None, "Episode"),
            "first_episode": from_micros(min(firsts)) if firsts else None,
            "last_episode": from_micros(max(lasts)) if lasts else None,
        }

    def group_counts(self, group_id: str) -> dict[str, int]:
        return {
            "entities": self._count([group_id], "Entity"),
            "episodes": self._count([group_id], "Episode"),
            "edges": self._count([group_id], "Fact"),
        }

    def get_meta(self, key: str, group_id: str | None = None) -> str | None:
        if group_id is None:
            try:
                value = self._b.client.hget(META_KEY, key)
            except redis.RedisError as exc:
                raise StorageError(f"FalkorDB read failed: {exc}") from exc
            return value if isinstance(value, str) else None
        rows = self._query(group_id, "MATCH (m:Meta {key: $k}) RETURN m.value", {"k": key})
        return rows[0][0] if rows and isinstance(rows[0][0], str) else None

    def meta_with_prefix(self, prefix: str, group_id: str | None = None) -> dict[str, str]:
        """Entries whose key starts with `prefix`: of the group, or (None) everywhere."""
        out: dict[str, str] = {}
        if group_id is None:
            try:
                everything = self._b.client.hgetall(META_KEY)
            except redis.RedisError as exc:
                raise StorageError(f"FalkorDB read failed: {exc}") from exc
            entries = {str(k): str(v) for k, v in everything.items()}  # decode_responses=True
            out.update({k: v for k, v in entries.items() if k.startswith(prefix)})
        rows = self._all(
            None if group_id is None else [group_id],
            "MATCH (m:Meta) WHERE m.key STARTS WITH $p RETURN m.key, m.value",
            {"p": prefix},
        )
        out.update({row[0]: row[1] for row in rows})
        return out

    def position(self, group_id: str) -> int:
        """How many WAL lines the group's graph holds (0 for a group without a graph)."""
        rows = self._query(group_id, f"MATCH (p:{cy.POSITION_NODE}) RETURN p.pos")
        return int(rows[0][0]) if rows else 0

    # -- curation, embeddings, raw statements (the engine's areas, lcg.engine) ---------------

    def pointer_facts(self) -> list[Fact]:
        marker = '"cross_group_pointers"'  # lcg.storage.crossgroup.POINTER_KEY, as stored
        facts = self.facts_with_hops(None)
        return sorted(
            (f for f in facts if f.invalid_at is None and marker in f.attributes),
            key=lambda f: f.uuid,
        )

    def active_facts_touching(self, entity_uuids: Iterable[str]) -> list[Fact]:
        rows = self._all(
            None,
            "MATCH (f:Fact) WHERE f.invalid_at IS NULL AND "
            "(f.source_uuid IN $u OR f.target_uuid IN $u) RETURN f.uuid",
            {"u": list(entity_uuids)},
        )
        found = self.facts_by_uuids([r[0] for r in rows])
        return [found[u] for u in sorted(found)]

    def episodes_mentioning(self, entity_uuids: Iterable[str], group_id: str) -> list[str]:
        rows = self._query(
            group_id,
            "UNWIND $u AS x MATCH (ep:Episode)-[:MENTIONS]->(e:Entity {uuid: x}) "
            "RETURN DISTINCT ep.uuid",
            {"u": list(entity_uuids)},
        )
        return sorted(r[0] for r in rows)

    def embedding_hashes(self, group_id: str, limit: int | None = None) -> dict[str, str]:
        tail = "" if limit is None else f" LIMIT {int(limit)}"
        rows = self._query(group_id, "MATCH (v:Embedding) RETURN v.key, v.text_hash" + tail)
        return {r[0]: r[1] for r in rows}

    def embedding_counts(self) -> dict[str, int]:
        counted = self._fan(None, "MATCH (v:Embedding) RETURN count(v)")
        return {g: int(rows[0][0]) for g, rows in counted.items() if rows and rows[0][0]}

    def rows(self, query: str, params: Mapping[str, Any] | None = None) -> Rows:
        return self._all(None, query, dict(params) if params is not None else None)

    def facts_with_hops_by_uuid(self, uuids: Sequence[str]) -> dict[str, Fact]:
        """One query per group graph, pipelined: the keys' facts matched by their uuid index,
        then their hops."""
        keys = list(dict.fromkeys(uuids))
        if not keys:
            return {}
        rows = self._all(
            None,
            "UNWIND $keys AS u MATCH (f:Fact {uuid: u}) "
            "MATCH (:Entity)-[:RELATES_TO]->(f)-[:RELATES_TO]->(:Entity) "
            f"WITH DISTINCT f RETURN {cy.FACT_COLS}",
            {"keys": keys},
        )
        return {row[0]: cy.fact(row) for row in rows}

    def endpoint_provenance(self, entity_uuids: Sequence[str]) -> dict[str, list[tuple[str, str]]]:
        """`provenance(entity_uuids, None)`: one `UNWIND` over the uuid index per group graph
        already reads them in one round trip each."""
        return self.provenance(entity_uuids, None)

    def temporal_tables(self) -> TemporalTables | None:
        return None  # other processes write the server: its reads stay on the server


class FalkorWriter(FalkorReader):
    """`GraphWriter` of one `FalkorBackend.transaction()`: statements are collected per group
    and sent at the end, one MULTI/EXEC per group (global meta in one more). Reads through it
    see the server's committed state, not the pending statements."""

    def __init__(self, backend: FalkorBackend) -> None:
        super().__init__(backend)
        self.pending: dict[str, list[cy.Statement]] = defaultdict(list)
        self.global_meta: dict[str, str | None] = {}

    def apply_ops(self, group_id: str, ops: Sequence[Op], new: Collection[str] = ()) -> None:
        # `new` is a hint for stores that look rows up before writing; these statements MERGE.
        self.pending[group_id] += cy.op_statements(group_id, ops)

    def put_embeddings(
        self,
        rows: Sequence[EmbeddingRow],
        stored: Collection[str] | None = None,
        new: Collection[str] = (),
    ) -> None:
        by_group: dict[str, list[EmbeddingRow]] = defaultdict(list)
        for r in rows:
            by_group[r.group_id].append(r)
        for group_id, group_rows in by_group.items():
            self.pending[group_id] += cy.embedding_statements(group_rows)

    def delete_embeddings(self, keys: Sequence[str], group_id: str | None = None) -> None:
        for g in self._graphs(None if group_id is None else [group_id]):
            self.pending[g] += cy.delete_embeddings(keys)

    def set_meta(self, key: str, value: str | None, group_id: str | None = None) -> None:
        if group_id is None:
            self.global_meta[key] = value
        else:
            self.pending[group_id].append(cy.set_meta(key, value))

    def load_folded(self, folded: FoldedGroup, embeddings: Sequence[EmbeddingRow]) -> None:
        """Create every row of `folded` (the group must hold none yet), 100 rows a statement."""
        g = folded.group_id
        out = self.pending[g]
        out += cy.create("Episode", [cy.episode_row(e) for e in folded.episodes.values()])
        out += cy.create("Entity", [cy.entity_row(e) for e in folded.entities.values()])
        out += cy.create("Fact", [cy.fact_row(f) for f in folded.facts.values()])
        vectors = [
            {
                "key": r.key,
                "owner": r.owner,
                "kind": r.kind,
                "group_id": r.group_id,
                "text_hash": r.text_hash,
            }
            for r in embeddings
        ]
        out += cy.create("Embedding", vectors)
        hops = [{"s": f.source_uuid, "f": f.uuid, "t": f.target_uuid} for f in folded.hops()]
        for i in range(0, len(hops), 100):
            out.append(
                (
                    "UNWIND $rows AS r MATCH (a:Entity {uuid: r.s}), (x:Fact {uuid: r.f}), "
                    "(b:Entity {uuid: r.t}) CREATE (a)-[:RELATES_TO]->(x)-[:RELATES_TO]->(b)",
                    {"rows": hops[i : i + 100]},
                )
            )
        pairs = [{"ep": p[0], "e": p[1]} for p in folded.mention_pairs()]
        for i in range(0, len(pairs), 100):
            out.append(
                (
                    "UNWIND $rows AS r MATCH (ep:Episode {uuid: r.ep}), (e:Entity {uuid: r.e}) "
                    "CREATE (ep)-[:MENTIONS]->(e)",
                    {"rows": pairs[i : i + 100]},
                )
            )

    def purge_group(self, group_id: str) -> None:
        self.pending[group_id] += cy.op_statements(group_id, [Op("group.purge", {})])

    def rewire_hops(self) -> None:
        """Nothing: cross-group hops are not kept on this backend (module docstring)."""

    def drop_dangling_facts(self) -> list[str]:
        """None to drop: `cypher.exec`, the raw statement that can delete an entity under its
        facts, is refused on this backend; the fact upserts a replay sends are filtered
        before the transaction (lcg.engine.replay)."""
        return []

    def flush(self) -> None:
        for group_id, statements in self.pending.items():
            if statements:
                self._b.ensure_group(group_id)
                self._b.execute_group(group_id, statements)
        if self.global_meta:
            self._b.write_global_meta(self.global_meta)
        self.pending.clear()
        self.global_meta.clear()


class FalkorBackend:
    """`GraphBackend` on one FalkorDB server (`redis://` or `rediss://` URL).

    `replicas` >= 1: a commit is acknowledged only once that many replicas confirmed it
    (`WAIT`, on the connection that wrote, within `wait_timeout_ms`).
    """

    backend = "falkordb"
    keeps_wal = True

    def __init__(
        self,
        url: str,
        *,
        password: str | None = None,
        replicas: int = 0,
        wait_timeout_ms: int = 1000,
        socket_timeout: float = 30.0,
    ) -> None:
        seeds = [u.strip() for u in url.split(",") if u.strip()]
        schemes = {urlsplit(u).scheme for u in seeds}
        if not seeds or not schemes <= {"redis", "rediss"}:
            raise StorageError(f"a FalkorDB URL starts with redis:// or rediss://, not {url!r}")
        if len(schemes) > 1:
            raise StorageError("the seed nodes of one cluster share one scheme (redis or rediss)")
        self.url = url
        self.seeds = seeds
        self.replicas = replicas
        self.wait_timeout_ms = wait_timeout_ms
        kwargs: dict[str, Any] = {
            "decode_responses": True,
            "socket_timeout": socket_timeout,
            "socket_connect_timeout": min(socket_timeout, 2.0),
            "retry_on_timeout": False,
        }
        if password is not None:
            kwargs["password"] = password
        first = urlsplit(seeds[0])
        try:
            single = redis.Redis.from_url(seeds[0], **kwargs)
            cluster_mode = _cluster_enabled(single)
            if len(seeds) > 1 and not cluster_mode:
                single.close()
                raise StorageError(
                    f"the FalkorDB URL names {len(seeds)} seed nodes, but "
                    f"{first.hostname}:{first.port} is not part of a Redis Cluster "
                    "(cluster_enabled:0): give one redis:// URL for a single server"
                )
            self.client: redis.Redis | RedisCluster = single
            if cluster_mode:
                single.close()
                kwargs.pop("retry_on_timeout")  # RedisCluster's retry covers timeouts itself
                self.client = _cluster_client(seeds, kwargs)
            self.client.ping()
        except (redis.RedisError, RedisClusterException) as exc:
            raise StorageError(
                f"cannot reach FalkorDB at {first.hostname}:{first.port}"
                f"{f' (or the other {len(seeds) - 1} seed nodes)' if len(seeds) > 1 else ''}: "
                f"{exc}"
            ) from exc
        self.cluster = cluster_mode
        # Commits run on one connection of their own: WAIT counts the replicas that have *this
        # connection's* writes (docs/server-mode-design.md §3), which a pool cannot promise.
        self._commit_lock = threading.Lock()
        self._known: set[str] = set()

    @classmethod
    def from_settings(cls, settings: Settings) -> FalkorBackend:
        """The backend `LCG_FALKORDB_URL`, `LCG_FALKORDB_PASSWORD` and `LCG_FALKORDB_REPLICAS`
        name (what `open_engine` opens: lcg.storage.select)."""
        if not settings.falkordb_url:
            raise StorageError("LCG_FALKORDB_URL is not set")
        return cls(
            settings.falkordb_url,
            password=settings.falkordb_password,
            replicas=settings.falkordb_replicas,
        )

    # -- groups ---------------------------------------------------------------------------

    def groups(self) -> list[str]:
        """Every group with a graph on the server."""
        try:
            names = [n for node in self._primaries() for n in _command(node, "GRAPH.LIST")]
        except (redis.RedisError, RedisClusterException) as exc:
            raise StorageError(f"FalkorDB read failed: {exc}") from exc
        return sorted(g for g in (group_of_graph(n) for n in names) if g is not None)

    def _primaries(self) -> list[redis.Redis]:
        """A client of each primary (the one server, or every cluster primary)."""
        if isinstance(self.client, RedisCluster):
            cluster: Any = self.client  # redis-py leaves the node getters untyped
            return [cluster.get_redis_connection(n) for n in cluster.get_primaries()]
        return [self.client]

    def placement(self) -> dict[str, str]:
        """group -> `host:port` of the primary that holds it now (the one server's address
        outside a cluster)."""
        if isinstance(self.client, RedisCluster):
            cluster: Any = self.client  # redis-py leaves the node getters untyped
            return {g: cluster.get_node_from_key(graph_key(g)).name for g in self.groups()}
        parts = urlsplit(self.url)
        return dict.fromkeys(self.groups(), f"{parts.hostname}:{parts.port or 6379}")

    def _pool(self, key: str) -> redis.ConnectionPool:
        """The connection pool of the primary owning `key`'s slot (as last known)."""
        if isinstance(self.client, RedisCluster):
            cluster: Any = self.client  # redis-py leaves the node getters untyped
            pool: redis.ConnectionPool = cluster.get_redis_connection(
                cluster.get_node_from_key(key)
            ).connection_pool
            return pool
        return self.client.connection_pool

    def _reroute(self) -> None:
        """Refresh the cluster's slot map (after MOVED, CLUSTERDOWN or a dead node)."""
        if isinstance(self.client, RedisCluster):
            with contextlib.suppress(redis.RedisError, RedisClusterException):
                self.client.nodes_manager.initialize()

    def ensure_group(self, group_id: str) -> None:
        """Create the group's graph (position 0, indexes) if it does not exist yet."""
        if group_id in self._known:
            return
        key = graph_key(group_id)
        try:
            _command(self.client, "GRAPH.QUERY", key, cy.ENSURE_POSITION)
            for statement in cy.INDEXES:
                try:
                    _command(self.client, "GRAPH.QUERY", key, statement)
                except redis.ResponseError as exc:
                    if "already indexed" not in str(exc):
                        raise
        except redis.RedisError as exc:
            raise StorageError(f"cannot create the graph of group {group_id!r}: {exc}") from exc
        self._known.add(group_id)

    def drop_group(self, group_id: str) -> None:
        """Delete the group's graph and stream (and FalkorDB's telemetry copy with the graph)."""
        try:
            with contextlib.suppress(redis.ResponseError):
                _command(self.client, "GRAPH.DELETE", graph_key(group_id))
            self.client.delete(stream_key(group_id))
        except redis.RedisError as exc:
            raise StorageError(f"cannot delete group {group_id!r}: {exc}") from exc
        self._known.discard(group_id)

    # -- writes ---------------------------------------------------------------------------

    def _exec(self, key: str, commands: list[tuple[Any, ...]]) -> list[Any]:
        """Send MULTI ... EXEC (+ WAIT) on one connection to the primary owning `key`, in one
        write; the replies, with errors as exception values.

        A redirect (MOVED, ASK) or a cluster that is down for the slot (CLUSTERDOWN, TRYAGAIN)
        makes Redis refuse the queued commands and abort the EXEC, so nothing was applied: the
        slot map is refreshed and the whole unit sent again, up to `_ROUTE_ATTEMPTS` times. A
        lost connection is different: the EXEC may or may not have run, so it is raised
        (`StorageError`, outcome unknown) and never retried here."""
        reason: Exception | None = None
        for attempt in range(_ROUTE_ATTEMPTS):
            replies = self._send(key, commands)
            reason = next((r for r in replies if isinstance(r, _REROUTE)), None)
            if reason is None:
                return replies
            self._reroute()
            time.sleep(min(0.05 * 2**attempt, 1.0))
        raise StorageError(
            f"FalkorDB kept redirecting the write of {key!r} ({reason}); nothing was applied"
        )

    def _send(self, key: str, commands: list[tuple[Any, ...]]) -> list[Any]:
        with self._commit_lock:
            try:
                pool = self._pool(key)
                conn = pool.get_connection()
            except (redis.RedisError, RedisClusterException) as exc:
                self._reroute()
                raise StorageError(f"FalkorDB write failed (nothing sent): {exc}") from exc
            try:
                packed = conn.pack_commands(commands)  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
                conn.send_packed_command(packed)  # type: ignore[no-untyped-call]  # likewise
                replies: list[Any] = []
                for _ in commands:
                    try:
                        replies.append(conn.read_response())
                    except redis.ResponseError as exc:
                        replies.append(exc)
            except redis.RedisError as exc:
                conn.disconnect()  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
                self._reroute()
                raise StorageError(f"FalkorDB write failed (outcome unknown): {exc}") from exc
            finally:
                pool.release(conn)
        return replies

    def execute_group(self, group_id: str, statements: Sequence[cy.Statement]) -> None:
        """Run statements on the group's graph in one MULTI/EXEC (no seq check)."""
        key = graph_key(group_id)
        commands: list[tuple[Any, ...]] = [("MULTI",)]
        commands += [("GRAPH.QUERY", key, params_header(p) + q) for q, p in statements]
        commands.append(("EXEC",))
        replies = self._exec(key, commands)
        results = replies[-1]
        if isinstance(results, Exception) or not isinstance(results, list):
            raise StorageError(f"FalkorDB refused the write to group {group_id!r}: {results}")
        for reply in results:
            if isinstance(reply, Exception):
                raise StorageError(f"FalkorDB refused a statement of group {group_id!r}: {reply}")

    def _rewind(self, group_id: str, position: int) -> None:
        """Set the group's position back to `position` if it is past it (`cy.REWIND`): after
        a MULTI/EXEC in which a statement failed and the advance still ran. Any commit made
        meanwhile at the later position is applied again by catch-up (its operations are
        upserts and deletes by uuid, in stream order)."""
        self.execute_group(group_id, [(cy.REWIND, {"lcg_pos": position})])

    def write_global_meta(self, entries: dict[str, str | None]) -> None:
        try:
            pipe = self.client.pipeline(transaction=True)
            for key, value in entries.items():
                if value is None:
                    pipe.hdel(META_KEY, key)
                else:
                    pipe.hset(META_KEY, key, value)
            pipe.execute()
        except redis.RedisError as exc:
            raise StorageError(f"FalkorDB write failed: {exc}") from exc

    def commit(self, commits: Sequence[Commit]) -> None:
        """Each group's commit atomically (see the module docstring); groups one after another
        (they may live on different servers, so there is no atomicity across groups)."""
        for c in commits:
            if c.ops:  # a batch of no operation is nothing, as in the engine's commit
                self._commit_one(c)

    def _commit_one(self, c: Commit) -> None:
        statements = cy.op_statements(c.group_id, c.ops)  # ValueError before anything is sent
        statements += cy.embedding_statements(c.put)
        statements += cy.delete_embeddings(c.delete)
        statements += [cy.set_meta(k, v) for k, v in c.meta.items()]
        lines = c.lines or encode_batch(c.first_seq, to_wal(now()) or "", list(c.ops))
        self.ensure_group(c.group_id)
        key = graph_key(c.group_id)
        position = c.first_seq
        advance = (cy.ADVANCE, {"lcg_pos": position, "lcg_next": c.last_seq + 1})
        commands: list[tuple[Any, ...]] = [
            ("MULTI",),
            (
                "EVAL",
                _APPEND,
                1,
                stream_key(c.group_id),
                c.first_seq,
                f"{position + 1}-0",
                c.last_seq,
                b"".join(lines),
            ),
        ]
        for q, p in statements:
            q, p = cy.guarded((q, p), position)
            commands.append(("GRAPH.QUERY", key, params_header(p) + q))
        commands.append(("GRAPH.QUERY", key, params_header(advance[1]) + advance[0]))
        commands.append(("EXEC",))
        if self.replicas > 0:
            commands.append(("WAIT", self.replicas, self.wait_timeout_ms))
        replies = self._exec(key, commands)
        results = replies[len(commands) - (2 if self.replicas > 0 else 1)]
        if isinstance(results, Exception) or not isinstance(results, list):
            raise StorageError(f"FalkorDB refused the commit of group {c.group_id!r}: {results}")
        xadd, *queries = results
        if isinstance(xadd, Exception):
            if _MOVED in str(xadd):
                raise GroupMovedError(c.group_id, position, FalkorReader(self).position(c.group_id))
            raise StorageError(f"FalkorDB refused the WAL append of {c.group_id!r}: {xadd}")
        failed = [q for q in queries if isinstance(q, Exception)]
        if failed and _stat(queries[-1], "Properties set") >= 1:
            # EXEC ran the statements after the one that failed, the advance included:
            # the graph would claim seqs whose rows it lacks, and catch-up would start
            # after them. Set it back, so catch-up applies the batch again.
            self._rewind(c.group_id, c.first_seq)
            raise StorageError(
                f"group {c.group_id!r}: a statement of seqs {c.first_seq}..{c.last_seq} "
                f"failed ({failed[0]}); the WAL stream holds them and the graph's position "
                f"is set back to {c.first_seq}: FalkorBackend.catch_up applies them again"
            )
        if failed or _stat(queries[-1], "Properties set") < 1:
            # The stream took the lines and the graph did not (all of them): not acknowledged.
            reason = failed[0] if failed else "the graph was not at the stream's position"
            raise StorageError(
                f"group {c.group_id!r}: the WAL stream holds seqs {c.first_seq}..{c.last_seq} "
                f"but the graph did not apply them ({reason}); FalkorBackend.catch_up repairs it"
            )
        if self.replicas > 0:
            acked = replies[-1]
            confirmed = 0 if isinstance(acked, Exception) else int(acked)
            if confirmed < self.replicas:
                raise NotDurableError(c.group_id, confirmed, self.replicas, self.wait_timeout_ms)

    # -- the stream: the group's WAL -------------------------------------------------------

    def stream_records(self, group_id: str, position: int = 0) -> list[WalRecord]:
        """The group's WAL lines from seq `position` on (one stream entry per commit, whose id
        is its first seq + 1). A line that does not parse is a `StorageError`: the stream is
        written by this backend only."""
        try:
            entries = self.client.xrange(stream_key(group_id), f"{position + 1}-0", "+")
        except (redis.RedisError, RedisClusterException) as exc:
            raise StorageError(f"cannot read the WAL stream of {group_id!r}: {exc}") from exc
        return self._records(group_id, entries or [])

    def stream_bounds(self, group_id: str) -> dict[str, Any] | None:
        """The group's stream: its key, entries, bytes (`MEMORY USAGE`) and last seq (from its
        last entry's last line; None when it has none)."""
        key = stream_key(group_id)
        try:
            entries = int(self.client.xlen(key))
            last = self.client.xrevrange(key, "+", "-", count=1) if entries else []
            size = self.client.memory_usage(key) if entries else 0
        except (redis.RedisError, RedisClusterException) as exc:
            raise StorageError(f"cannot read the WAL stream of {group_id!r}: {exc}") from exc
        records = self._records(group_id, last or [])
        return {
            "stream": key,
            "entries": entries,
            "byte_size": int(size or 0),
            "max_seq": records[-1].seq if records else None,
        }

    def follow(self, group_id: str, position: int, block_ms: int = 1000) -> list[WalRecord]:
        """The group's WAL lines from seq `position` on, waiting up to `block_ms` for the
        first commit after it when there is none yet (a blocking `XREAD` on the stream: how
        another process learns of a commit without polling); [] when none came."""
        try:
            reply = self.client.xread(
                {stream_key(group_id): f"{position}-0"}, block=block_ms, count=None
            )
        except (redis.RedisError, RedisClusterException) as exc:
            raise StorageError(f"cannot follow the WAL stream of {group_id!r}: {exc}") from exc
        if isinstance(reply, dict):  # RESP3 shape
            entries = [e for batches in reply.values() for e in batches[0]]
        else:
            entries = [e for _, batch in reply or [] for e in batch]
        return self._records(group_id, entries)

    def follow_many(
        self, positions: Mapping[str, int], block_ms: int = 1000
    ) -> dict[str, list[WalRecord]]:
        """`follow` over several groups at once: one blocking `XREAD` of all their streams,
        by group (only the groups that had lines). On a cluster one `XREAD` cannot span hash
        slots: each group is read without blocking, and `block_ms` is waited out in polls of
        at most 20 ms."""
        if not positions:
            return {}
        group_of = {stream_key(g): g for g in positions}
        streams: dict[Any, Any] = {stream_key(g): f"{p}-0" for g, p in positions.items()}
        deadline = time.monotonic() + block_ms / 1000
        try:
            while True:
                if isinstance(self.client, RedisCluster):
                    replies = [self.client.xread({k: v}, count=None) for k, v in streams.items()]
                else:
                    replies = [self.client.xread(streams, block=block_ms, count=None)]
                out: dict[str, list[Any]] = defaultdict(list)
                for reply in replies:
                    if isinstance(reply, dict):  # RESP3 shape
                        pairs = [(k, batches[0]) for k, batches in reply.items()]
                    else:
                        pairs = [(k, batch) for k, batch in reply or []]
                    for key, batch in pairs:
                        out[group_of[key if isinstance(key, str) else key.decode()]] += batch
                left = deadline - time.monotonic()
                if out or not isinstance(self.client, RedisCluster) or left <= 0:
                    return {g: self._records(g, entries) for g, entries in out.items()}
                time.sleep(min(0.02, left))
        except (redis.RedisError, RedisClusterException) as exc:
            raise StorageError(
                f"cannot follow the WAL streams of {sorted(positions)}: {exc}"
            ) from exc

    @staticmethod
    def _records(group_id: str, entries: Iterable[Any]) -> list[WalRecord]:
        out: list[WalRecord] = []
        for entry_id, fields in entries:
            text = (fields or {}).get("lines", "")
            for line in (text if isinstance(text, str) else text.decode()).splitlines():
                record = parse_line(line.encode())
                if record is None:
                    raise StorageError(f"group {group_id!r}: unreadable line in entry {entry_id!r}")
                out.append(record)
        return out

    def catch_up(self, group_id: str) -> int:
        """Apply the stream's lines the graph does not hold yet (after a commit whose Cypher
        failed once its append had succeeded, or another process's commit the graph lost),
        entry by entry, each guarded like a commit; return how many lines were applied."""
        self.ensure_group(group_id)
        position = FalkorReader(self).position(group_id)
        records = self.stream_records(group_id, position)
        batches: dict[int, list[WalRecord]] = defaultdict(list)
        for r in records:
            batches[r.seq - r.at if r.at is not None else r.seq].append(r)
        applied = 0
        for first in sorted(batches):
            batch = batches[first]
            if first != position:
                raise StorageError(
                    f"group {group_id!r}: the stream has a gap (graph at {position}, next "
                    f"entry at {first})"
                )
            ops = [Op(r.op, r.data) for r in batch]
            statements = [cy.guarded(st, position) for st in cy.op_statements(group_id, ops)]
            nxt = batch[-1].seq + 1
            statements.append((cy.ADVANCE, {"lcg_pos": position, "lcg_next": nxt}))
            try:
                self.execute_group(group_id, statements)
            except StorageError:  # the advance may have run after the statement that failed
                self._rewind(group_id, position)
                raise
            applied += len(batch)
            position = nxt
        return applied

    def replay_tail(self, group_id: str, from_seq: int) -> int:
        """The stream's lines from `from_seq` on, applied to the graph again in one MULTI/EXEC,
        every statement guarded at the graph's position, which must be the stream's end (the
        operations are upserts and deletes by uuid: applied again in order, they leave the rows
        they touch as the stream says). A last guarded statement stamps the position node, so
        its "Properties set" says whether the guard held."""
        self.ensure_group(group_id)
        position = FalkorReader(self).position(group_id)
        records = self.stream_records(group_id, from_seq)
        if records and records[-1].seq + 1 != position:
            raise StorageError(
                f"group {group_id!r}: its graph holds {position} lines and its stream "
                f"{records[-1].seq + 1}: FalkorBackend.catch_up first"
            )
        if not records:
            return 0
        ops = [Op(r.op, r.data) for r in records]
        statements = [cy.guarded(st, position) for st in cy.op_statements(group_id, ops)]
        statements.append(
            cy.guarded(
                (f"MATCH (p:{cy.POSITION_NODE}) SET p.replayed = $t", {"t": time.time_ns()}),
                position,
            )
        )
        key = graph_key(group_id)
        commands: list[tuple[Any, ...]] = [("MULTI",)]
        commands += [("GRAPH.QUERY", key, params_header(p) + q) for q, p in statements]
        commands.append(("EXEC",))
        results = self._exec(key, commands)[-1]
        if isinstance(results, Exception) or not isinstance(results, list):
            raise StorageError(f"FalkorDB refused the replay of group {group_id!r}: {results}")
        failed = [r for r in results if isinstance(r, Exception)]
        if failed:
            raise StorageError(f"FalkorDB refused a replayed line of {group_id!r}: {failed[0]}")
        if _stat(results[-1], "Properties set") < 1:
            raise GroupMovedError(group_id, position, FalkorReader(self).position(group_id))
        return len(records)

    def rebuild(self, group_id: str, embeddings: Sequence[EmbeddingRow] = ()) -> FoldedGroup:
        """Re-derive the group's graph from its stream: fold every line (docs/design.md), drop the
        graph, bulk-load the folded rows (with `embeddings`, the caller's rows for them) and
        set the position after the last line. Readers see the group empty while it loads (no
        atomic swap yet). Returns the fold, whose counts say what was applied.

        The group's meta entries (`Commit.meta`, `GraphWriter.set_meta`: the embedding stamp)
        are no operations of the stream, so the fold cannot restore them: they are read before
        the drop and written back with the load, unchanged.

        Raises:
            StorageError: the stream cannot be read, or holds an operation this backend cannot
                run (`cypher.exec`); the graph is then left as it was.
        """
        folded = fold(group_id, self.stream_records(group_id))
        if folded.needs_statement_replay:
            raise StorageError(f"group {group_id!r}: its stream holds raw Cypher operations")
        meta = FalkorReader(self).meta_with_prefix("", group_id)  # not in the stream: keep it
        try:
            _command(self.client, "GRAPH.DELETE", graph_key(group_id))
        except redis.ResponseError as exc:
            if _EMPTY_KEY not in str(exc) and "does not exist" not in str(exc):
                raise StorageError(f"cannot drop the graph of {group_id!r}: {exc}") from exc
        except redis.RedisError as exc:
            raise StorageError(f"cannot drop the graph of {group_id!r}: {exc}") from exc
        self._known.discard(group_id)
        if folded.last_seq is None:
            return folded  # no stream: no graph either
        writer = FalkorWriter(self)
        writer.load_folded(folded, embeddings)
        position = 0 if folded.last_seq is None else folded.last_seq + 1
        writer.pending[group_id].append(
            (f"MATCH (p:{cy.POSITION_NODE}) SET p.pos = $pos", {"pos": position})
        )
        for key, value in sorted(meta.items()):
            writer.set_meta(key, value, group_id)
        writer.flush()
        return folded

    # -- the protocol ---------------------------------------------------------------------

    @contextlib.contextmanager
    def read(self) -> Iterator[FalkorReader]:
        yield FalkorReader(self)

    @contextlib.contextmanager
    def read_for_write(self) -> Iterator[FalkorReader]:
        yield FalkorReader(self)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[FalkorWriter]:
        writer = FalkorWriter(self)
        yield writer
        writer.flush()

    def status(self) -> dict[str, Any]:
        if isinstance(self.client, RedisCluster):
            return self._cluster_status(self.client)
        try:
            info = self.client.info("replication")
            server = self.client.info("server")
        except redis.RedisError as exc:
            raise StorageError(f"FalkorDB status failed: {exc}") from exc
        parts = urlsplit(self.url)
        return {
            "backend": "falkordb",
            "server": f"{parts.scheme}://{parts.hostname}:{parts.port or 6379}",
            "role": info.get("role"),
            "connected_replicas": info.get("connected_slaves", 0),
            "master_link_status": info.get("master_link_status"),  # a replica's link, else None
            "redis_version": server.get("redis_version"),
            "replicas_required": self.replicas,
        }

    def _cluster_status(self, client: Any) -> dict[str, Any]:
        """A cluster: every node as `CLUSTER NODES` describes it (failed ones included)."""
        try:
            described = client.cluster_nodes()
        except (redis.RedisError, RedisClusterException) as exc:
            raise StorageError(f"FalkorDB status failed: {exc}") from exc
        ids = {d["node_id"]: addr for addr, d in described.items()}
        nodes: list[dict[str, Any]] = []
        for address, d in sorted(described.items()):
            flags = set(str(d["flags"]).split(","))
            nodes.append(
                {
                    "address": address,
                    "role": "primary" if "master" in flags else "replica",
                    "replica_of": ids.get(d["master_id"]),
                    "failed": bool(flags & {"fail", "fail?"}) or not d["connected"],
                    "slots": [[int(x) for x in r] for r in d["slots"]],
                }
            )
        scheme = urlsplit(self.seeds[0]).scheme
        return {
            "backend": "falkordb",
            "server": ",".join(
                f"{scheme}://{urlsplit(u).hostname}:{urlsplit(u).port or 6379}" for u in self.seeds
            ),
            "role": "cluster",
            "primaries": sum(1 for n in nodes if n["role"] == "primary" and not n["failed"]),
            "nodes": nodes,
            "replicas_required": self.replicas,
        }

    def checkpoint(self) -> bool:
        return False  # the server persists on its own terms (its append-only file)

    def close(self) -> None:
        self.client.close()
