"""The reliability suite: faults injected into real `lcg` processes, and what each one did.

    python bench/reliability.py [--quick] [--table] [--kills N] [--flips N] [--seed S]
                                [--only NAME,NAME...]

Every scenario runs `lcg serve` (or `lcg mcp`, `lcg ingest`) as a subprocess on a workspace of
its own under /tmp, talks to it over its Unix socket (HTTP where the scenario is about HTTP),
injects one kind of fault, and counts what was injected, detected (reported in
`knowledge_status.wal_problems`, a health state that is not `healthy`, a refusal), repaired (the
graph served afterwards is the one before the fault) and lost. Scenarios:

- `kill_during_writes`: SIGKILL of `lcg serve` during a write, `--kills` times (100; 8 with
  `--quick`), cycling through episodes of 1, 10, 64 and 300 new facts (`knowledge_add_facts`)
  mixed with single-entity writes. After each restart: acknowledged writes lost, partial
  episodes (an episode whose WAL batch is not all in the database, or a batch of which only
  some rows are), seqs that two WAL lines carry.
- `wal_bit_flips`, `wal_truncated_tail`, `wal_deleted_middle_file`, `wal_deleted_first_file`,
  `wal_dropped_line`: damage
  to a stopped workspace's WAL (`--flips` single-bit flips at seeded positions), the database
  deleted (so the WAL is all there is, except for the truncated tail: there the database keeps
  the write the WAL lost). Detected, the graph served unchanged (repaired), facts served whose
  endpoints are missing (dangling), and for the tail, a seq given again.
- `snapshot_damage`: well-formed edits of the derived snapshots next to the database (the
  search index's vocabulary and arrays, the name index): wrong answers served, health state.
- `wal_lock_theft`: the WAL lock file deleted while serve runs, then a second serve on the same
  WAL directory: seqs written twice. `wal_bounds_flip`: a bit flip in `.wal-bounds.json` and the
  database deleted: a seq given again.
- `second_local_user`: uid 65534 (`setpriv`, when running as root; skipped otherwise) against
  the socket and the HTTP port with no token: let in or refused.
- `symlink_out_of_folder`: `lcg ingest` of a folder holding a file and a directory symlinked
  from outside it: followed or not.
- `huge_chunk`, `huge_mcp_line`, `huge_num_results`: a 15 MB chunk (health_check's latency
  meanwhile), a 50 MB MCP line (the process's peak RSS), `num_results` 10^9 (the answer's size).
  Measurements: reported, never a verdict of their own.

A surface that does not exist yet (a `wal_problems` kind, a refusal) counts as "not detected";
nothing the harness cannot parse stops the run. Prints one JSON object (bench/common.py's
envelope), and with `--table` a Markdown table on stderr. Exits 1 when a count that must be 0
is not: acknowledged writes lost, partial episodes, seqs reused, dangling facts served, a
second user let in, a symlink followed.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import itertools
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import envelope, latency_ms, rss_kb, timed
from lcg.config import Settings
from lcg.service.rpc.client import RpcClient, RpcError, ServiceGoneError

SIZES = (1, 10, 64, 300)  # new facts per episode: the write size classes
GROUP = "rel"
READY_S = 120.0
# The counts that must be 0 in every scenario that has them.
MUST_BE_ZERO = (
    "acknowledged_lost",
    "partial_episodes",
    "seqs_reused",
    "dangling_served",
    "second_user_let_in",
    "symlink_followed",
)


@dataclass
class Scenario:
    """One fault's outcome: the counts of the table, and what else was seen."""

    name: str
    injected: int = 0
    detected: int = 0
    repaired: int = 0
    lost: int = 0
    zero: dict[str, int] = field(default_factory=dict)  # counts that must stay 0
    # Counts that should be 0 and are reported, but do not fail the run (damage not detected,
    # wrong answers from a damaged snapshot, a slow health answer).
    gaps: dict[str, int] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    skipped: str | None = None
    measurement: bool = False
    error: str | None = None

    @property
    def verdict(self) -> str:
        if self.skipped:
            return "skipped"
        if self.error:
            return "error"
        if any(self.zero.values()):
            return "FAIL"
        if any(self.gaps.values()):
            return "gaps"
        return "measured" if self.measurement else "pass"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "injected": self.injected,
            "detected": self.detected,
            "repaired": self.repaired,
            "lost": self.lost,
            "must_be_zero": self.zero,
            "gaps": self.gaps,
            "verdict": self.verdict,
            "skipped": self.skipped,
            "error": self.error,
            "details": self.details,
        }


# -- workspaces and processes ------------------------------------------------------------


def _base_env(home: Path) -> dict[str, str]:
    """The environment of every lcg process: the caller's, without its LCG_ settings (except
    the choice of embedded engine), on `home`, offline (hash embedder, heuristic extractor)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LCG_", "GRAPHITI_"))}
    if "LCG_EMBEDDED_STORE" in os.environ:
        env["LCG_EMBEDDED_STORE"] = os.environ["LCG_EMBEDDED_STORE"]
    env.update(
        {
            "LCG_HOME": str(home),
            "LCG_EMBEDDER": "hash",
            "LCG_EXTRACTOR": "heuristic",
            "LCG_KUZU_BUFFER_POOL_MB": "128",
            "LCG_WAL_MAX_EVENTS_PER_FILE": "120",
        }
    )
    return env


class Workspace:
    """A directory under /tmp (short enough for a socket path) holding `.lcg/`."""

    def __init__(self, root: Path, name: str) -> None:
        self.dir = root / name
        self.dir.mkdir(parents=True)
        self.home = self.dir / ".lcg"
        self.socket = self.dir / "s.sock"

    @property
    def wal(self) -> Path:
        return self.home / "wal"

    def copy(self, root: Path, name: str) -> Workspace:
        """A new workspace holding a copy of this one's `.lcg/` (the source stopped)."""
        other = Workspace(root, name)
        shutil.copytree(self.home, other.home, symlinks=True)
        for stale in other.home.glob("*.sock"):
            stale.unlink()
        return other


class Serve:
    """`lcg serve` on a workspace's socket (and HTTP with `http_port`); stderr to a file."""

    def __init__(
        self,
        ws: Workspace,
        *,
        http_port: int | None = None,
        env: dict[str, str] | None = None,
        socket_path: Path | None = None,
    ) -> None:
        self.ws = ws
        self.socket = socket_path or ws.socket
        self.http_port = http_port
        self.env = {**_base_env(ws.home), **(env or {})}
        self.log = ws.dir / f"serve-{time.monotonic_ns()}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Serve:
        args = [sys.executable, "-m", "lcg.cli", "serve", "--socket", str(self.socket)]
        if self.http_port is not None:
            args += ["--http", "--port", str(self.http_port)]
        with self.log.open("ab") as err:
            self.proc = subprocess.Popen(
                args,
                cwd=self.ws.dir,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_ready(self, timeout: float = READY_S) -> dict[str, Any]:
        """health_check's answer once the service settled (healthy or degraded); `{"state":
        "exited"}` when the process ended first, `{"state": "timeout"}` after `timeout`."""
        deadline = time.monotonic() + timeout
        last: dict[str, Any] = {"state": "timeout"}
        while time.monotonic() < deadline:
            if not self.alive():
                return {
                    "state": "exited",
                    "returncode": self.proc.returncode if self.proc else None,
                }
            try:
                with RpcClient(self.socket, timeout=10) as client:
                    last = dict(client.call("health_check"))
            except (OSError, RpcError, ServiceGoneError, ValueError) as exc:
                last = {"state": "unreachable", "error": str(exc)}
            else:
                if last.get("state") != "initializing":
                    return last
            time.sleep(0.05)
        return last

    def client(self, timeout: float | None = 120.0) -> RpcClient:
        return RpcClient(self.socket, timeout=timeout)

    def kill(self) -> None:
        if self.alive():
            assert self.proc is not None
            os.kill(self.proc.pid, signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(60)

    def stop(self) -> int | None:
        """SIGTERM and wait (SIGKILL after a minute); the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(60)
        return self.proc.returncode

    def log_tail(self, chars: int = 1500) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""


@contextlib.contextmanager
def serving(ws: Workspace, **kwargs: Any) -> Iterator[Serve]:
    """A started `Serve`, stopped (SIGTERM) on the way out."""
    serve = Serve(ws, **kwargs).start()
    try:
        yield serve
    finally:
        serve.stop()


def _call(client: RpcClient, method: str, params: dict[str, Any] | None = None) -> Any:
    return client.call(method, params or {})


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def delete_database(ws: Workspace) -> None:
    """Remove the database and the derived snapshots beside it (its directory, `<home>/db/`
    in the default layout, whatever the embedded engine names its files); the WAL and
    everything else in the home stay."""
    db_path = Settings.for_home(ws.home).db_path
    folder = db_path.parent
    if folder.parent == ws.home.resolve() and folder != ws.wal.resolve():
        shutil.rmtree(folder, ignore_errors=True)
        return
    for path in folder.glob(db_path.name + "*"):
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()


# -- what the graph holds, and what the WAL says ------------------------------------------


def _cypher(client: RpcClient, query: str) -> list[list[str]]:
    rows: list[list[str]] = _call(client, "knowledge_query_cypher", {"query": query})["rows"]
    return rows


@dataclass
class Graph:
    """The rows a service serves: entities (uuid: name), facts (uuid: (source, target, text)),
    episodes (uuid: content) and MENTIONS edges."""

    entities: dict[str, str]
    facts: dict[str, tuple[str, str, str]]
    episodes: dict[str, str]
    mentions: set[tuple[str, str]]

    @classmethod
    def read(cls, client: RpcClient) -> Graph:
        return cls(
            entities={
                r[0]: r[1] for r in _cypher(client, "MATCH (e:Entity) RETURN e.uuid, e.name")
            },
            facts={
                r[0]: (r[1], r[2], r[3])
                for r in _cypher(
                    client, "MATCH (f:Fact) RETURN f.uuid, f.source_uuid, f.target_uuid, f.fact"
                )
            },
            episodes={
                r[0]: r[1] for r in _cypher(client, "MATCH (p:Episode) RETURN p.uuid, p.content")
            },
            mentions={
                (r[0], r[1])
                for r in _cypher(
                    client, "MATCH (p:Episode)-[:MENTIONS]->(e:Entity) RETURN p.uuid, e.uuid"
                )
            },
        )

    def dangling(self) -> int:
        """Facts served whose source or target entity is missing."""
        return sum(
            1 for s, t, _ in self.facts.values() if s not in self.entities or t not in self.entities
        )

    def missing_from(self, other: Graph) -> int:
        """Rows of `other` not here, or here with other content."""
        n = sum(1 for k, v in other.entities.items() if self.entities.get(k) != v)
        n += sum(1 for k, f in other.facts.items() if self.facts.get(k) != f)
        n += sum(1 for k, c in other.episodes.items() if self.episodes.get(k) != c)
        return n + len(other.mentions - self.mentions)

    def extra_over(self, other: Graph) -> int:
        """Rows here that `other` lacks."""
        n = len(self.entities.keys() - other.entities.keys())
        n += len(self.facts.keys() - other.facts.keys())
        n += len(self.episodes.keys() - other.episodes.keys())
        return n + len(self.mentions - other.mentions)


def parse_wal_line(raw: bytes) -> dict[str, Any] | None:
    """A WAL line's record: the JSON object it is, or the object it starts with (a line may
    carry more after it, such as a checksum); None when it is neither."""
    for text in (raw, raw[: raw.rfind(b"}") + 1]):
        with contextlib.suppress(ValueError):
            value = json.loads(text)
            if isinstance(value, dict):
                return value
    return None


def wal_lines_of(path: Path) -> list[dict[str, Any]]:
    """The records of one WAL file that parse (see `parse_wal_line`), in file order."""
    out = []
    for raw in path.read_bytes().split(b"\n"):
        record = parse_wal_line(raw) if raw.strip() else None
        if record is not None:
            out.append(record)
    return out


def wal_lines(group_wal: Path) -> list[dict[str, Any]]:
    """Every line of a group's stream that parses, files in the order of their first seq.

    Raises:
        RuntimeError: the stream has lines and none parses (the harness no longer reads the
            WAL's format, which would make every count below 0 for the wrong reason).
    """
    files = []
    raw_lines = 0
    for path in group_wal.glob("*.jsonl"):
        records = wal_lines_of(path)
        raw_lines += sum(1 for raw in path.read_bytes().split(b"\n") if raw.strip())
        first = next((r["seq"] for r in records if isinstance(r.get("seq"), int)), 0)
        files.append((first, path.name, records))
    out = [r for _, _, records in sorted(files) for r in records]
    if raw_lines > 3 and not any("seq" in r and "op" in r for r in out):
        raise RuntimeError(f"no line of {group_wal} reads as a WAL record")
    return out


def wal_batches(lines: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The lines grouped into batches by `at` (a line at 0, or without it, starts one)."""
    batches: list[list[dict[str, Any]]] = []
    for rec in lines:
        if not batches or not rec.get("at"):
            batches.append([])
        batches[-1].append(rec)
    return batches


def seqs_reused(group_wal: Path) -> int:
    """How many lines carry a seq another line of the stream carries too."""
    counts = Counter(r.get("seq") for r in wal_lines(group_wal) if isinstance(r.get("seq"), int))
    return sum(n - 1 for n in counts.values() if n > 1)


def partial_episodes(graph: Graph, group_wal: Path) -> dict[str, dict[str, int]]:
    """Episodes of which the database holds some rows of the WAL batch that wrote them but not
    all: the episode without all its entities, facts or mentions, or its facts without it. Per
    such episode, how many of each its batch wrote and how many the database lacks (or, for an
    absent episode, holds)."""
    out = {}
    for batch in wal_batches(wal_lines(group_wal)):
        episode = next((r["data"]["uuid"] for r in batch if r.get("op") == "episode.add"), None)
        if episode is None:
            continue
        entities = {r["data"]["uuid"] for r in batch if r.get("op") == "entity.upsert"}
        facts = {r["data"]["uuid"] for r in batch if r.get("op") == "fact.upsert"}
        mentions = {
            (episode, e)
            for r in batch
            if r.get("op") == "mentions.add"
            for e in r["data"].get("entities", [])
        }
        if episode in graph.episodes:
            gaps = {
                "entities_missing": len(entities - graph.entities.keys()),
                "facts_missing": len(facts - graph.facts.keys()),
                "mentions_missing": len(mentions - graph.mentions),
            }
        else:
            gaps = {"facts_without_episode": len(facts & graph.facts.keys())}
        if any(gaps.values()):
            out[episode] = {"batch_lines": len(batch), "facts": len(facts), **gaps}
    return out


def status(client: RpcClient) -> dict[str, Any]:
    try:
        return dict(_call(client, "knowledge_status"))
    except (RpcError, ServiceGoneError, OSError) as exc:
        return {"error": str(exc)}


def problems(st: dict[str, Any]) -> list[dict[str, Any]]:
    found = st.get("wal_problems") or []
    return [p for p in found if isinstance(p, dict)]


# -- writes --------------------------------------------------------------------------------


def _name(rng: random.Random) -> str:
    """An entity name no other resembles (so name resolution never merges two)."""
    return "Q" + "".join(rng.choice("bcdfghjklmnpqrstvwxz") for _ in range(12))


def episode_params(rng: random.Random, facts: int) -> dict[str, Any]:
    """`knowledge_add_facts` of one episode with `facts` new facts between new entities."""
    names = [_name(rng) for _ in range(facts + 1)]
    return {
        "group_id": GROUP,
        "reference_time": "2024-05-01",
        "name": f"ep-{uuid.UUID(int=rng.getrandbits(128))}",
        "body": ". ".join(f"{a} is linked to {b}" for a, b in itertools.pairwise(names)),
        "entities": [{"name": n, "summary": "an entity of the reliability suite"} for n in names],
        "facts": [
            {
                "source": names[i],
                "target": names[i + 1],
                "relation_type": "LINKED_TO",
                "fact": f"{names[i]} is linked to {names[i + 1]}",
            }
            for i in range(facts)
        ],
    }


@dataclass
class Write:
    """One write sent to the service and, once answered, what it acknowledged."""

    kind: str  # "episode" or "entity"
    params: dict[str, Any]
    result: dict[str, Any] | None = None
    seconds: float = 0.0


def send(client: RpcClient, write: Write) -> Write:
    start = time.perf_counter()
    if write.kind == "episode":
        write.result = dict(_call(client, "knowledge_add_facts", write.params))
    else:
        write.result = dict(_call(client, "knowledge_assert_entity", write.params))
    write.seconds = time.perf_counter() - start
    return write


def lost_writes(graph: Graph, acked: list[Write]) -> list[str]:
    """Acknowledged writes the graph does not hold whole."""
    names = set(graph.entities.values())
    out = []
    for w in acked:
        assert w.result is not None
        if w.kind == "entity":
            if w.result.get("entity_uuid") not in graph.entities:
                out.append(f"entity {w.params['name']}")
            continue
        episode = w.result.get("episode_uuid")
        facts = [u for u in w.result.get("fact_uuids") or [] if u]
        if (
            episode not in graph.episodes
            or any(u not in graph.facts for u in facts)
            or any(e["name"] not in names for e in w.params["entities"])
        ):
            out.append(f"episode {episode} ({len(w.params['facts'])} facts)")
    return out


def _settle(serve: Serve) -> tuple[dict[str, Any], dict[str, Any]]:
    """(health, status) once `serve` settled; status `{}` when it cannot answer."""
    health = serve.wait_ready()
    if health.get("state") in ("exited", "timeout", "unreachable"):
        return health, {}
    with serve.client() as client:
        return health, status(client)


def _read_graph(serve: Serve) -> Graph | None:
    try:
        with serve.client() as client:
            return Graph.read(client)
    except (RpcError, ServiceGoneError, OSError):
        return None


# -- (a) SIGKILL during writes -------------------------------------------------------------


def kill_during_writes(root: Path, rng: random.Random, kills: int) -> Scenario:
    """SIGKILL during a write of each size class in turn; check the graph after each restart."""
    sc = Scenario("kill_during_writes")
    ws = Workspace(root, "kills")
    serve = Serve(ws).start()
    acked: list[Write] = []
    lost: set[str] = set()
    partial: dict[str, dict[str, int]] = {}
    reused = 0
    # Per size class, the seconds a write took (the kill lands within that span).
    took: dict[int, list[float]] = {k: [0.05 + k * 0.002] for k in SIZES}
    in_flight_acked = in_flight_applied = restarts_failed = 0
    graph: Graph | None = None
    try:
        for n in range(kills):
            health = serve.wait_ready()
            if health.get("state") != "healthy":
                restarts_failed += 1
                sc.details.setdefault("unhealthy_restarts", []).append(
                    {**health, "log": serve.log_tail(600)}
                )
                serve.kill()
                serve = Serve(ws).start()
                continue
            with serve.client() as client:
                for _ in range(rng.randint(1, 3)):  # acknowledged writes before the kill
                    if rng.random() < 0.3:
                        w = Write("entity", {"name": _name(rng), "group_id": GROUP})
                    else:
                        size = rng.choice(SIZES)
                        w = Write("episode", episode_params(rng, size))
                    acked.append(send(client, w))
                    if w.kind == "episode":
                        took[len(w.params["facts"])].append(w.seconds)
            size = SIZES[n % len(SIZES)]
            victim = Write("episode", episode_params(rng, size))
            done = threading.Event()

            def run(w: Write = victim, ev: threading.Event = done, srv: Serve = serve) -> None:
                with (
                    contextlib.suppress(RpcError, ServiceGoneError, OSError, ValueError),
                    srv.client() as c,
                ):
                    send(c, w)
                ev.set()

            thread = threading.Thread(target=run, daemon=True)
            thread.start()
            recent = sorted(took[size][-5:])
            time.sleep(rng.uniform(0.0, recent[len(recent) // 2] * 1.2))
            serve.kill()
            sc.injected += 1
            thread.join(60)
            if victim.result is not None:
                in_flight_acked += 1
                acked.append(victim)
            serve = Serve(ws).start()
            health = serve.wait_ready()
            graph = _read_graph(serve)
            if graph is None:
                sc.details.setdefault("unreadable_after_kill", []).append(health)
                continue
            if victim.result is None and any(
                e["name"] in set(graph.entities.values()) for e in victim.params["entities"]
            ):
                in_flight_applied += 1
            missing = lost_writes(graph, acked)
            halves = partial_episodes(graph, ws.wal / GROUP)
            # Repaired: this restart lost nothing acknowledged and left no new partial episode.
            sc.repaired += not missing and not (halves.keys() - partial.keys())
            lost |= set(missing)
            partial.update(halves)
            reused = max(reused, seqs_reused(ws.wal / GROUP))
        sc.detected = sc.injected  # a SIGKILL is always seen: the restart recovers from it
        sc.details["partial_at_end"] = (
            len(partial_episodes(graph, ws.wal / GROUP)) if graph is not None else None
        )
    finally:
        serve.stop()
    sc.lost = len(lost)
    # A restart after a kill that crashed or never got healthy (the next start is tried).
    sc.gaps["restarts_not_healthy"] = restarts_failed
    sc.zero = {
        "acknowledged_lost": len(lost),
        "partial_episodes": len(partial),
        "seqs_reused": reused,
    }
    sc.details.update(
        {
            "kills_per_size": {
                str(k): sum(1 for i in range(kills) if SIZES[i % 4] == k) for k in SIZES
            },
            "acknowledged_writes": len(acked),
            "in_flight_acknowledged_before_kill": in_flight_acked,
            "in_flight_applied_unacknowledged": in_flight_applied,
            "restarts_not_healthy": restarts_failed,
            "lost_examples": sorted(lost)[:5],
            "partial_examples": dict(sorted(partial.items())[:5]),
            "write_seconds_median": {
                str(k): round(sorted(v)[len(v) // 2], 3) for k, v in took.items()
            },
        }
    )
    return sc


# -- a workspace to damage -----------------------------------------------------------------


@dataclass
class Base:
    """A stopped workspace with a known graph, to copy and damage."""

    ws: Workspace
    graph: Graph
    names: list[str]  # entity names written by single-entity writes
    max_seq: int


def build_base(root: Path, rng: random.Random) -> Base:
    """Episodes of 10 facts, single-entity writes between them, then facts linking those
    entities to the episodes' (so a lost entity line leaves facts without an endpoint); the WAL
    in files of 50 lines. Stopped with SIGTERM, so the snapshots are written."""
    ws = Workspace(root, "base")
    singles: list[str] = []
    with serving(ws, env={"LCG_WAL_MAX_EVENTS_PER_FILE": "50"}) as serve:
        serve.wait_ready()
        with serve.client() as client:
            episodes = []
            for i in range(12):
                p = episode_params(rng, 10)
                send(client, Write("episode", p))
                episodes.append(p)
                if i % 2 == 0:
                    singles.append(_name(rng))
                    send(client, Write("entity", {"name": singles[-1], "group_id": GROUP}))
            for k, name in enumerate(singles):
                other = episodes[(k * 5 + 3) % len(episodes)]["entities"][0]["name"]
                _call(
                    client,
                    "knowledge_assert_relationship",
                    {
                        "source_name": name,
                        "target_name": other,
                        "predicate": "LINKED_TO",
                        "fact": f"{name} is linked to {other}",
                        "group_id": GROUP,
                    },
                )
            graph = Graph.read(client)
            max_seq = int(status(client)["wal_groups"][GROUP]["max_seq"])
    return Base(ws, graph, singles, max_seq)


def _copy(base: Base, root: Path, name: str, *, with_db: bool) -> Workspace:
    ws = base.ws.copy(root, name)
    if not with_db:
        delete_database(ws)
    return ws


def _files(ws: Workspace) -> list[Path]:
    """The group's WAL files in seq order."""
    out = []
    for path in ws.wal.joinpath(GROUP).glob("*.jsonl"):
        first = next(iter(wal_lines_of(path)), {}).get("seq", 0)
        out.append((first, path.name, path))
    return [p for _, _, p in sorted(out)]


@dataclass
class Outcome:
    """What a damaged workspace served after its restart."""

    health: str
    problems: list[str]
    missing: int = 0
    extra: int = 0
    dangling: int = 0
    max_seq: int | None = None
    note: str = ""

    @property
    def detected(self) -> bool:
        return self.health != "healthy" or bool(self.problems)

    @property
    def unchanged(self) -> bool:
        return self.missing == 0 and self.extra == 0


def observe(ws: Workspace, base: Base, write_after: bool = False) -> Outcome:
    """Start serve on a damaged workspace; what it reports and serves (and, with
    `write_after`, the seq its next write gets)."""
    with serving(ws) as serve:
        health, st = _settle(serve)
        out = Outcome(
            health=str(health.get("state")),
            problems=[str(p.get("kind")) for p in problems(st)],
        )
        if health.get("state") in ("exited", "timeout", "unreachable"):
            out.note = serve.log_tail(600)
            return out
        graph = _read_graph(serve)
        if graph is not None:
            out.missing = graph.missing_from(base.graph)
            out.extra = graph.extra_over(base.graph)
            out.dangling = graph.dangling()
        if write_after:
            with (
                contextlib.suppress(RpcError, ServiceGoneError, OSError, KeyError),
                serve.client() as client,
            ):
                send(client, Write("entity", {"name": "Qafterdamage", "group_id": GROUP}))
                out.max_seq = int(status(client)["wal_groups"][GROUP]["max_seq"])
    return out


def _tally(sc: Scenario, outcomes: list[Outcome]) -> None:
    sc.injected = len(outcomes)
    sc.detected = sum(o.detected for o in outcomes)
    sc.repaired = sum(o.unchanged for o in outcomes)
    sc.lost = sum(o.missing for o in outcomes)
    sc.zero["dangling_served"] = sum(o.dangling for o in outcomes)
    sc.gaps["undetected_and_changed"] = sum(
        1 for o in outcomes if not o.detected and not o.unchanged
    )
    sc.details["outcomes"] = [
        {k: v for k, v in o.__dict__.items() if v not in ("", None)} for o in outcomes[:40]
    ]


# -- (b) WAL damage ------------------------------------------------------------------------


def wal_bit_flips(base: Base, root: Path, rng: random.Random, flips: int) -> Scenario:
    """Single-bit flips at seeded positions of the WAL files, database deleted."""
    sc = Scenario("wal_bit_flips")
    outcomes = []
    for i in range(flips):
        ws = _copy(base, root, f"flip{i}", with_db=False)
        files = _files(ws)
        sizes = [p.stat().st_size for p in files]
        pos = rng.randrange(sum(sizes))
        bit = rng.randrange(8)
        for path, size in zip(files, sizes, strict=True):
            if pos < size:
                data = bytearray(path.read_bytes())
                data[pos] ^= 1 << bit
                path.write_bytes(bytes(data))
                break
            pos -= size
        o = observe(ws, base)
        o.note = f"{path.name}@{pos} bit {bit}"
        outcomes.append(o)
        shutil.rmtree(ws.dir, ignore_errors=True)
    _tally(sc, outcomes)
    return sc


def wal_truncated_tail(base: Base, root: Path) -> Scenario:
    """The last WAL line cut in half, the database (which applied it) kept; then one write:
    its seq must be above the one the database had applied."""
    sc = Scenario("wal_truncated_tail")
    ws = _copy(base, root, "tail", with_db=True)
    last = _files(ws)[-1]
    data = last.read_bytes().rstrip(b"\n")
    cut = data.rfind(b"\n") + 1
    last.write_bytes(data[: cut + (len(data) - cut) // 2])
    o = observe(ws, base, write_after=True)
    _tally(sc, [o])
    sc.zero["seqs_reused"] = int(o.max_seq is not None and o.max_seq <= base.max_seq) + seqs_reused(
        ws.wal / GROUP
    )
    sc.details["max_seq_before"] = base.max_seq
    sc.details["max_seq_after_one_write"] = o.max_seq
    return sc


def wal_deleted_middle_file(base: Base, root: Path) -> Scenario:
    """The middle WAL file deleted, database deleted."""
    sc = Scenario("wal_deleted_middle_file")
    ws = _copy(base, root, "midfile", with_db=False)
    files = _files(ws)
    victim = files[len(files) // 2]
    victim.unlink()
    o = observe(ws, base)
    o.note = f"deleted {victim.name} of {len(files)} files"
    _tally(sc, [o])
    return sc


def wal_deleted_first_file(base: Base, root: Path) -> Scenario:
    """The first WAL file deleted, database deleted: no gap between two files shows it, the
    start record the writer keeps does (`wal_start_missing`)."""
    sc = Scenario("wal_deleted_first_file")
    ws = _copy(base, root, "firstfile", with_db=False)
    files = _files(ws)
    victim = files[0]
    victim.unlink()
    o = observe(ws, base)
    o.note = f"deleted {victim.name}, the first of {len(files)} files"
    _tally(sc, [o])
    return sc


def wal_dropped_line(base: Base, root: Path) -> Scenario:
    """One line taken out of the WAL — a single-entity write that a later fact points at — and
    the database deleted."""
    sc = Scenario("wal_dropped_line")
    ws = _copy(base, root, "dropline", with_db=False)
    target = base.names[len(base.names) // 2]
    for path in _files(ws):
        raw = path.read_bytes().split(b"\n")
        keep = [
            line
            for line in raw
            if not (b'"entity.upsert"' in line and f'"name":"{target}"'.encode() in line)
        ]
        if len(keep) != len(raw):
            path.write_bytes(b"\n".join(keep))
            break
    o = observe(ws, base)
    o.note = f"dropped the entity.upsert of {target}"
    _tally(sc, [o])
    return sc


# -- (c) snapshot damage -------------------------------------------------------------------


def _uuids(value: Any) -> list[str]:
    """Every `uuid`-named string of an answer, in order (what a search answered with)."""
    out: list[str] = []
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(v, str) and (k == "uuid" or k.endswith("_uuid")):
                out.append(v)
            else:
                out += _uuids(v)
    elif isinstance(value, list):
        for v in value:
            out += _uuids(v)
    return out


def _answers(serve: Serve, names: list[str]) -> list[list[str]]:
    """The answers a damaged snapshot could change: entity and fact searches by name, and the
    entity an existing name resolves to."""
    out = []
    with serve.client() as client:
        for name in names:
            for method in ("knowledge_find_entities", "knowledge_find_relationships"):
                try:
                    found = _call(
                        client, method, {"query": name, "group_ids": [GROUP], "num_results": 5}
                    )
                except RpcError as exc:
                    out.append([f"error {exc}"])
                else:
                    out.append(_uuids(found))
            try:
                resolved = _call(
                    client, "knowledge_assert_entity", {"name": name, "group_id": GROUP}
                )
            except RpcError as exc:
                out.append([f"error {exc}"])
            else:
                out.append([resolved.get("entity_uuid")])
    return out


def _swap_json_values(
    path: Path, pick: Callable[[Any], tuple[dict[str, Any] | list[Any], Any, Any]]
) -> None:
    doc = json.loads(path.read_text())
    holder, a, b = pick(doc)
    holder[a], holder[b] = holder[b], holder[a]  # type: ignore[index]  # dict or list, keys fit
    path.write_text(json.dumps(doc))


def snapshot_damage(base: Base, root: Path) -> Scenario:
    """Well-formed edits of the snapshots next to the database, then searches and name
    lookups compared with the undamaged workspace's answers."""
    sc = Scenario("snapshot_damage")
    probe = [base.names[0], base.names[-1], *(v for v in list(base.graph.entities.values())[:3])]
    ws = _copy(base, root, "snap-ref", with_db=True)
    with serving(ws) as serve:
        serve.wait_ready()
        expected = _answers(serve, probe)
    shutil.rmtree(ws.dir, ignore_errors=True)
    words = [n.lower() for n in probe]

    def vocab(doc: Any) -> tuple[dict[str, Any], Any, Any]:
        table = doc["vocab"]["words"]
        return table, words[0], words[2]

    def uuid_list(doc: Any) -> tuple[list[Any], Any, Any]:
        return doc, 0, len(doc) - 1

    def edit(kind: str, ws: Workspace) -> str:
        db_dirs = [p for p in ws.home.rglob("search-index") if p.is_dir()]
        names = [p for p in ws.home.rglob("name-index") if p.is_dir()]
        if kind == "search_vocabulary_swap" and db_dirs:
            _swap_json_values(db_dirs[0] / "index.json", vocab)
            return "two words' ids swapped in search-index/index.json"
        if kind == "search_partition_uuids_swap" and db_dirs:
            for path in sorted(db_dirs[0].glob("entity/*/uuids.json")):
                _swap_json_values(path, uuid_list)
                return f"first and last uuid swapped in {path.relative_to(ws.home)}"
        if kind == "name_index_uuids_swap" and names:
            import numpy as np  # the snapshot's own format; numpy is an lcg dependency

            path = names[0] / "names.npz"
            arrays = dict(np.load(path))
            blob, ends = arrays["uuid_blob"].copy(), arrays["uuid_ends"]
            starts = [0, *ends[:-1].tolist()]
            i, j = 0, len(ends) - 1
            a = blob[starts[i] : ends[i]].copy()
            blob[starts[i] : ends[i]] = blob[starts[j] : ends[j]]
            blob[starts[j] : ends[j]] = a
            arrays["uuid_blob"] = blob
            with path.open("wb") as handle:
                np.savez(handle, **arrays)
            return "first and last uuid swapped in name-index/names.npz"
        return ""

    outcomes = []
    for kind in ("search_vocabulary_swap", "search_partition_uuids_swap", "name_index_uuids_swap"):
        ws = _copy(base, root, f"snap-{kind}", with_db=True)
        try:
            what = edit(kind, ws)
        except (OSError, KeyError, ValueError, IndexError) as exc:
            what = f"could not edit: {exc}"
        if not what:
            sc.details.setdefault("not_found", []).append(kind)
            continue
        with serving(ws) as serve:
            health, st = _settle(serve)
            got = _answers(serve, probe) if health.get("state") not in ("exited", "timeout") else []
            after = serve.wait_ready()
        wrong = sum(1 for a, b in zip(expected, got, strict=False) if a != b)
        outcomes.append(
            {
                "kind": kind,
                "edit": what,
                "health": health.get("state"),
                "health_after_reads": after.get("state"),
                "problems": [p.get("kind") for p in problems(st)],
                "derived_damaged": _derived_damaged(st),
                "wrong_answers": wrong,
                "answers": len(expected),
            }
        )
        shutil.rmtree(ws.dir, ignore_errors=True)
    sc.injected = len(outcomes)
    sc.detected = sum(
        1
        for o in outcomes
        if o["health"] != "healthy"
        or o["health_after_reads"] != "healthy"
        or o["problems"]
        or o["derived_damaged"]
    )
    sc.repaired = sum(1 for o in outcomes if o["wrong_answers"] == 0)
    sc.lost = sum(o["wrong_answers"] for o in outcomes)
    sc.gaps["wrong_answers_served"] = sc.lost
    sc.details["outcomes"] = outcomes
    return sc


def _derived_damaged(st: dict[str, Any]) -> int:
    """What `knowledge_status.derived_indexes` counts as found damaged (0 when absent)."""
    found = st.get("derived_indexes") if isinstance(st, dict) else None
    if not isinstance(found, dict):
        return 0
    total = 0
    for key in ("search_snapshots_damaged", "temporal_rows_damaged", "name_index_damaged"):
        value = found.get(key)
        total += len(value) if isinstance(value, list) else int(value or 0)
    return total


# -- (d) the single-writer lock and the bounds file ----------------------------------------


def wal_lock_theft(root: Path) -> Scenario:
    """Delete the WAL lock file while serve runs; start a second serve (its own database) on
    the same WAL directory; both write the same group."""
    sc = Scenario("wal_lock_theft", injected=1)
    ws = Workspace(root, "lock-a")
    other = Workspace(root, "lock-b")
    with serving(ws) as first:
        first.wait_ready()
        with first.client() as client:
            send(client, Write("entity", {"name": "Qlockbefore", "group_id": GROUP}))
        removed = [p.name for p in ws.wal.glob("*.lock")] + [p.name for p in ws.wal.glob(".*lock*")]
        for path in {*ws.wal.glob("*.lock"), *ws.wal.glob(".*lock*")}:
            path.unlink()
        sc.details["lock_files_removed"] = sorted(set(removed))
        with serving(other, env={"LCG_WAL_DIR": str(ws.wal)}) as second:
            health = second.wait_ready()
            sc.details["second_writer_health"] = health.get("state")
            accepted = refused = 0
            if health.get("state") == "healthy":
                for i in range(6):
                    target = first if i % 2 == 0 else second
                    try:
                        with target.client() as client:
                            send(client, Write("entity", {"name": f"Qlock{i}x", "group_id": GROUP}))
                    except (RpcError, ServiceGoneError, OSError):
                        refused += target is second
                    else:
                        accepted += target is second
            sc.details["second_writer_writes_accepted"] = accepted
            sc.details["second_writer_writes_refused"] = refused
            sc.details["second_writer_log"] = (
                second.log_tail(400) if health.get("state") != "healthy" else ""
            )
    reused = seqs_reused(ws.wal / GROUP)
    sc.detected = int(sc.details["second_writer_health"] != "healthy" or accepted == 0)
    sc.repaired = int(reused == 0)
    sc.zero["seqs_reused"] = reused
    return sc


def wal_bounds_flip(base: Base, root: Path) -> Scenario:
    """One bit of `.wal-bounds.json`'s max_seq flipped (so it reads lower), database deleted,
    then one write: its seq must be one no line carries."""
    sc = Scenario("wal_bounds_flip", injected=1)
    ws = _copy(base, root, "bounds", with_db=False)
    path = ws.wal / GROUP / ".wal-bounds.json"
    if not path.exists():
        sc.skipped = "no .wal-bounds.json to flip"
        return sc
    text = path.read_bytes()
    key = text.find(b'"max_seq":')
    start = key + len(b'"max_seq":')
    while text[start : start + 1] in (b" ",):
        start += 1
    flipped = bytearray(text)
    for at in range(start, start + 12):  # the highest set bit of a digit, cleared: lower
        digit = text[at] - 0x30
        if not 0 <= digit <= 9:
            break
        lower = digit ^ (1 << (digit.bit_length() - 1)) if digit else 0
        if digit and (lower or at != start):  # a leading 0 would not be JSON
            flipped[at] ^= 1 << (digit.bit_length() - 1)
            break
    path.write_bytes(bytes(flipped))
    sc.details["bounds_max_seq"] = [
        json.loads(text).get("max_seq"),
        json.loads(bytes(flipped)).get("max_seq") if flipped != text else None,
    ]
    o = observe(ws, base, write_after=True)
    reused = seqs_reused(ws.wal / GROUP)
    sc.detected = int(o.detected)
    sc.repaired = int(reused == 0)
    sc.zero["seqs_reused"] = reused
    sc.details["health"] = o.health
    sc.details["problems"] = o.problems
    sc.details["max_seq_after_one_write"] = o.max_seq
    return sc


# -- (e) a second local user ---------------------------------------------------------------

# Run as the other user by the system's python3: plain stdlib, so it needs no access to this
# checkout. Prints what the socket and the HTTP port answered it.
INTRUDER = r"""
import http.client, json, socket, sys
sock_path, port = sys.argv[1], int(sys.argv[2])
out = {"uid": __import__("os").getuid()}
try:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(20)
    s.connect(sock_path)
    s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"knowledge_status","params":{}}\n')
    line = s.makefile("rb").readline()
    out["socket"] = "answered" if b'"result"' in line else "error:" + line[:200].decode("utf-8", "replace")
except OSError as exc:
    out["socket"] = "refused:" + type(exc).__name__
for method, body in (("knowledge_status", {}),
                     ("knowledge_assert_entity", {"name": "Qintruder", "group_id": "rel"})):
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
        c.request("POST", "/api/" + method, body=json.dumps(body),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        out["http_" + method] = r.status
    except OSError as exc:
        out["http_" + method] = "refused:" + type(exc).__name__
print(json.dumps(out))
"""


def _http_status(port: int, method: str, token: str | None = None) -> int | str:
    """The HTTP status of `POST /api/<method>` with `{}` (and a bearer token), or why none."""
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
        conn.request("POST", f"/api/{method}", body=b"{}", headers=headers)
        return conn.getresponse().status
    except OSError as exc:
        return f"refused:{type(exc).__name__}"


def _intrude(setpriv: str, python: str, serve: Serve, port: int) -> dict[str, Any]:
    """What uid 65534 got from the socket and the HTTP port."""
    done = subprocess.run(
        [
            setpriv,
            *("--reuid", "65534", "--regid", "65534", "--clear-groups"),
            *(python, "-c", INTRUDER, str(serve.socket), str(port)),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
    )
    try:
        seen: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError) as exc:
        raise RuntimeError(
            f"the other user's client printed nothing: {done.stderr[-400:]}"
        ) from exc
    return seen


def second_local_user(root: Path) -> Scenario:
    """uid 65534 against the socket (in a directory others may enter, so only lcg's own modes
    decide) and the loopback HTTP port, with no token: in lcg's default configuration, then
    with `LCG_API_TOKEN` set (where the owner's client sends that token and must get in)."""
    sc = Scenario("second_local_user")
    setpriv = shutil.which("setpriv")
    python = shutil.which("python3", path="/usr/bin:/bin") or sys.executable
    if os.geteuid() != 0 or setpriv is None:
        sc.skipped = "needs root and setpriv to act as uid 65534"
        return sc
    shared = root / "shared"
    shared.mkdir()
    for d in (root, shared):
        d.chmod(0o755)
    let_in = 0
    for config, token in (("default", None), ("token_set", uuid.uuid4().hex)):
        ws = Workspace(shared, config)
        ws.dir.chmod(0o755)
        port = _free_port()
        env = {"LCG_API_TOKEN": token} if token else {}
        with serving(ws, http_port=port, env=env) as serve:
            health = serve.wait_ready()
            # The owner reaches the port (any HTTP answer: after `lcg serve --http` makes its
            # own token, a tokenless owner gets 401), and with the token it set, gets in.
            owner = _http_status(port, "knowledge_status", token)
            if not isinstance(owner, int) or (token and owner != 200):
                raise RuntimeError(f"the owner could not use the HTTP port ({config}): {owner}")
            with serve.client() as client:
                before = status(client).get("entity_count")
            seen = _intrude(setpriv, python, serve, port)
            with serve.client() as client:
                after = status(client).get("entity_count")
        admitted = int(seen.get("socket") == "answered") + sum(
            1
            for k in ("http_knowledge_status", "http_knowledge_assert_entity")
            if isinstance(seen.get(k), int) and 200 <= seen[k] < 300
        )
        let_in += admitted
        sc.injected += 3
        sc.details[config] = {
            "owner_health": health.get("state"),
            "owner_http_status": owner,
            "seen": seen,
            "let_in": admitted,
            "entities_before_after": [before, after],
        }
    sc.detected = sc.repaired = sc.injected - let_in
    sc.zero["second_user_let_in"] = let_in
    return sc


# -- (f) a symlink out of an ingested folder -----------------------------------------------


def symlink_out_of_folder(root: Path) -> Scenario:
    """`lcg ingest` (through the running service) of a folder holding a document, a file
    symlinked from outside the folder and a directory symlinked from outside it."""
    sc = Scenario("symlink_out_of_folder", injected=2)
    ws = Workspace(root, "symlink")
    outside = ws.dir / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("Zorblaxquintrell leads Hushhushproject since 2020.\n")
    (outside / "nested").mkdir()
    (outside / "nested" / "deep.md").write_text("Vexmortain owns Quibbleton since 2021.\n")
    folder = ws.dir / "docs"
    folder.mkdir()
    (folder / "notes.md").write_text("Alice Smith works at Acme Corporation since 2019.\n")
    (folder / "leak.md").symlink_to(outside / "secret.md")
    (folder / "leakdir").symlink_to(outside / "nested")
    with serving(ws) as serve:
        serve.wait_ready()
        done = subprocess.run(
            [
                sys.executable,
                *("-m", "lcg.cli", "ingest", str(folder), "--group", GROUP),
                *("--socket", str(serve.socket), "--skip-preflight", "--json"),
            ],
            capture_output=True,
            text=True,
            timeout=300,
            env=serve.env,
            cwd=ws.dir,
        )
        sc.details["ingest_exit"] = done.returncode
        sc.details["ingest_stderr"] = done.stderr[-300:]
        graph = _read_graph(serve)
    if graph is None:
        sc.error = "graph unreadable after ingest"
        return sc
    text = " ".join([*graph.episodes.values(), *graph.entities.values()]).lower()
    followed_file, followed_dir = "zorblaxquintrell" in text, "vexmortain" in text
    followed = int(followed_file) + int(followed_dir)
    sc.details["followed"] = {"file_symlink": followed_file, "directory_symlink": followed_dir}
    sc.details["own_document_ingested"] = "alice" in text
    sc.detected = sc.repaired = sc.injected - followed
    sc.zero["symlink_followed"] = followed
    return sc


# -- (g) huge inputs -----------------------------------------------------------------------


def huge_chunk(root: Path, megabytes: int, window: float) -> Scenario:
    """A `megabytes` MB `knowledge_process_chunk` on one connection while health_check is
    asked every 0.1 s on fresh connections (5 s each at most): its latencies while the chunk
    runs, for at most `window` seconds (then the service is stopped)."""
    sc = Scenario("huge_chunk", injected=1, measurement=True)
    ws = Workspace(root, "hugechunk")
    sentence = "Alice Smith works at Acme Corporation in Berlin since 2019. "
    text = sentence * (megabytes * 1_000_000 // len(sentence))
    outcome: dict[str, Any] = {"answer": f"not answered within {window:.0f} s"}
    latencies: list[float] = []
    with serving(ws) as serve:
        serve.wait_ready()

        def big() -> None:
            start = time.perf_counter()
            try:
                with serve.client(timeout=None) as client:
                    _call(
                        client,
                        "knowledge_process_chunk",
                        {
                            "chunk_text": text,
                            "chunk_id": "huge",
                            "group_id": GROUP,
                            "source_file": "huge.md",
                        },
                    )
                outcome["answer"] = "ok"
            except RpcError as exc:
                outcome["answer"] = f"error: {str(exc)[:160]}"
            except (ServiceGoneError, OSError) as exc:
                outcome["answer"] = f"connection lost: {exc}"
            outcome["seconds"] = round(time.perf_counter() - start, 2)

        worker = threading.Thread(target=big, daemon=True)
        worker.start()
        deadline = time.monotonic() + window
        while worker.is_alive() and time.monotonic() < deadline:
            start = time.perf_counter()
            with (
                contextlib.suppress(RpcError, ServiceGoneError, OSError),
                serve.client(timeout=5) as probe,
            ):
                _call(probe, "health_check")
            latencies.append(time.perf_counter() - start)
            time.sleep(0.1)
        sc.details["server_rss_kb"] = rss_kb(serve.pid) if serve.alive() else None
        if worker.is_alive():
            serve.kill()
        worker.join(60)
    sc.details.update(
        {
            "chunk_mb": megabytes,
            "window_s": window,
            "chunk": outcome,
            "health_latency": {
                **latency_ms(latencies),
                "max_ms": round(max(latencies, default=0) * 1000, 1),
            },
            "health_over_1s": sum(1 for t in latencies if t > 1.0),
        }
    )
    sc.detected = int(bool(latencies) and max(latencies) <= 1.0)
    sc.gaps["health_answers_over_1s"] = sc.details["health_over_1s"]
    return sc


def huge_mcp_line(root: Path, megabytes: int, window: float) -> Scenario:
    """A `megabytes` MB line to `lcg mcp` (stdio): its answer (waited for at most `window`
    seconds), whether the next request is answered, and the process's peak RSS."""
    sc = Scenario("huge_mcp_line", injected=1, measurement=True)
    ws = Workspace(root, "hugemcp")
    proc = subprocess.Popen(
        [sys.executable, "-m", "lcg.cli", "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=_base_env(ws.home),
        cwd=ws.dir,
    )
    assert proc.stdin is not None and proc.stdout is not None
    answers: list[bytes] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            answers.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()

    def write(message: bytes) -> None:
        with contextlib.suppress(OSError):
            proc.stdin.write(message + b"\n")  # type: ignore[union-attr]  # asserted above
            proc.stdin.flush()  # type: ignore[union-attr]  # asserted above

    def ask(message: bytes, want: int, timeout: float) -> bool:
        # Written from a thread of its own: a pipe the process reads slowly blocks the writer.
        threading.Thread(target=write, args=(message,), daemon=True).start()
        deadline = time.monotonic() + timeout
        while len(answers) < want and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        return len(answers) >= want

    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2024-11-05",
            "capabilities": {},
            "clientInfo": {"name": "reliability", "version": "1"},
        },
    }
    try:
        ask(json.dumps(init).encode(), 1, 120)
        write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        before = rss_kb(proc.pid)
        huge = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {
                "name": "knowledge_find_entities",
                "arguments": {"query": "x" * (megabytes * 1_000_000)},
            },
        }
        start = time.perf_counter()
        answered = ask(json.dumps(huge).encode(), 2, window)
        seconds = time.perf_counter() - start
        peak = rss_kb(proc.pid) if proc.poll() is None else {}
        alive = answered and ask(b'{"jsonrpc":"2.0","id":3,"method":"tools/list"}', 3, 60)
    except (BrokenPipeError, OSError) as exc:
        answered, alive, seconds, before, peak = False, False, 0.0, {}, {}
        sc.details["pipe"] = str(exc)
    finally:
        if len(answers) < 3:  # still busy with the line (its writer may block): stopped
            proc.kill()
        with contextlib.suppress(OSError, ValueError):
            proc.stdin.close()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(60)
    sc.details.update(
        {
            "line_mb": megabytes,
            "window_s": window,
            "answered": answered,
            "answer_head": answers[1][:200].decode("utf-8", "replace")
            if len(answers) > 1
            else None,
            "seconds": round(seconds, 2),
            "next_request_answered": alive,
            "rss_before_mb": round(before.get("VmRSS", 0) / 1024, 1),
            "peak_rss_mb": round(peak.get("VmHWM", 0) / 1024, 1),
        }
    )
    sc.detected = int(answered and alive)
    sc.gaps["not_answered_within_window"] = int(not answered)
    return sc


def huge_num_results(base: Base, root: Path) -> Scenario:
    """`num_results` 10^9 to the search methods: error or answer, and the answer's size."""
    sc = Scenario("huge_num_results", measurement=True)
    ws = _copy(base, root, "numresults", with_db=True)
    out = {}
    with serving(ws) as serve:
        serve.wait_ready()
        with serve.client() as client:
            for method in (
                "knowledge_find_entities",
                "knowledge_find_relationships",
                "knowledge_search_passages",
                "knowledge_get_episodes",
            ):
                params: dict[str, Any] = {"group_ids": [GROUP], "num_results": 10**9}
                if method == "knowledge_get_episodes":
                    params = {"group_id": GROUP, "last_n": 10**9}
                else:  # a word every entity (summary), fact and episode of the base holds
                    params["query"] = "reliability" if "entities" in method else "linked"
                sc.injected += 1
                start = time.perf_counter()
                try:
                    answer = _call(client, method, params)
                except RpcError as exc:
                    out[method] = {"error": str(exc)[:160]}
                    sc.detected += 1
                else:
                    out[method] = {
                        "answer_bytes": len(json.dumps(answer)),
                        "items": max(
                            (len(v) for v in answer.values() if isinstance(v, list)), default=0
                        ),
                    }
                out[method]["seconds"] = round(time.perf_counter() - start, 3)
        sc.details["server_rss_kb"] = rss_kb(serve.pid)
    sc.details["answers"] = out
    return sc


# -- the run -------------------------------------------------------------------------------

NAMES = (
    "kill_during_writes",
    "wal_bit_flips",
    "wal_truncated_tail",
    "wal_deleted_middle_file",
    "wal_deleted_first_file",
    "wal_dropped_line",
    "snapshot_damage",
    "wal_lock_theft",
    "wal_bounds_flip",
    "second_local_user",
    "symlink_out_of_folder",
    "huge_chunk",
    "huge_mcp_line",
    "huge_num_results",
)


def table(scenarios: list[Scenario]) -> str:
    """The Markdown table: one row per scenario."""
    rows = [
        "| scenario | injected | detected | repaired | lost | must be 0 | should be 0 | verdict |",
        "| --- | ---: | ---: | ---: | ---: | --- | --- | --- |",
    ]
    for sc in scenarios:
        zero = ", ".join(f"{k} {v}" for k, v in sc.zero.items()) or "—"
        gaps = ", ".join(f"{k} {v}" for k, v in sc.gaps.items()) or "—"
        verdict = sc.verdict + (f" ({sc.skipped or sc.error})" if sc.skipped or sc.error else "")
        rows.append(
            f"| {sc.name} | {sc.injected} | {sc.detected} | {sc.repaired} | {sc.lost} | {zero} "
            f"| {gaps} | {verdict} |"
        )
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="CI size: 8 kills, 6 flips")
    parser.add_argument("--kills", type=int, default=None, help="SIGKILLs (100; quick 8)")
    parser.add_argument("--flips", type=int, default=None, help="WAL bit flips (30; quick 6)")
    parser.add_argument("--seed", type=int, default=20261207)
    parser.add_argument("--table", action="store_true", help="also a Markdown table on stderr")
    parser.add_argument("--only", default="", help="comma list of scenario names")
    args = parser.parse_args()
    kills = args.kills if args.kills is not None else (8 if args.quick else 100)
    flips = args.flips if args.flips is not None else (6 if args.quick else 30)
    only = [n for n in args.only.split(",") if n] or list(NAMES)
    unknown = sorted(set(only) - set(NAMES))
    if unknown:
        parser.error(f"unknown scenarios {unknown}; known: {', '.join(NAMES)}")
    rng = random.Random(args.seed)
    root = Path(tempfile.mkdtemp(dir="/tmp", prefix="lcg-rel-"))
    scenarios: list[Scenario] = []
    base: Base | None = None
    seconds: dict[str, float] = {}

    def needs_base() -> Base:
        nonlocal base
        if base is None:
            base = build_base(root, random.Random(args.seed + 1))
        return base

    runs: dict[str, Callable[[], Scenario]] = {
        "kill_during_writes": lambda: kill_during_writes(root, rng, kills),
        "wal_bit_flips": lambda: wal_bit_flips(needs_base(), root, rng, flips),
        "wal_truncated_tail": lambda: wal_truncated_tail(needs_base(), root),
        "wal_deleted_middle_file": lambda: wal_deleted_middle_file(needs_base(), root),
        "wal_deleted_first_file": lambda: wal_deleted_first_file(needs_base(), root),
        "wal_dropped_line": lambda: wal_dropped_line(needs_base(), root),
        "snapshot_damage": lambda: snapshot_damage(needs_base(), root),
        "wal_lock_theft": lambda: wal_lock_theft(root),
        "wal_bounds_flip": lambda: wal_bounds_flip(needs_base(), root),
        "second_local_user": lambda: second_local_user(root),
        "symlink_out_of_folder": lambda: symlink_out_of_folder(root),
        "huge_chunk": lambda: huge_chunk(root, 15, 10.0 if args.quick else 600.0),
        "huge_mcp_line": lambda: huge_mcp_line(root, 50, 20.0 if args.quick else 300.0),
        "huge_num_results": lambda: huge_num_results(needs_base(), root),
    }
    try:
        with timed() as total:
            for name in only:
                with timed() as t:
                    try:
                        sc = runs[name]()
                    except Exception as exc:  # a scenario that breaks is reported, not fatal
                        sc = Scenario(name, error=f"{type(exc).__name__}: {exc}"[:400])
                scenarios.append(sc)
                seconds[name] = round(t.seconds, 1)
                print(f"reliability: {name}: {sc.verdict} ({t.seconds:.1f} s)", file=sys.stderr)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    violations = {
        sc.name: {k: v for k, v in sc.zero.items() if v}
        for sc in scenarios
        if any(sc.zero.values())
    }
    errors = [sc.name for sc in scenarios if sc.error]
    results = {
        "must_be_zero_counts": list(MUST_BE_ZERO),
        "scenarios": [sc.to_dict() for sc in scenarios],
        "must_be_zero_violations": violations,
        "scenario_errors": errors,
        "ok": not violations and not errors,
        "seconds": {**seconds, "total": round(total.seconds, 1)},
    }
    params = {"quick": args.quick, "kills": kills, "flips": flips, "seed": args.seed, "only": only}
    print(json.dumps(envelope("reliability", results, params), indent=2, default=str))
    if args.table:
        print(table(scenarios), file=sys.stderr)
    return 0 if results["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
