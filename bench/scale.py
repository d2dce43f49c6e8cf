"""Benchmark lcg at 10k / 100k / 1M facts side by side; prints one JSON object.

    python bench/scale.py [--sizes 10000] [--embedder hash|synthetic] [--cache DIR]
                          [--articles 30] [--queries 100] [--only PARTS]

A size N is a workspace of one group (`scale`) with N/2 entities, N facts (a tenth of them
superseded: the old fact ended when its successor, same subject and predicate, began) and N/10
episodes mentioning 4 entities each, over ten years of valid time. It is written as WAL files in
the engine's record format (words from bench/search.py's Zipf vocabulary) and built by a cold
open, i.e. a bulk replay with no database: that build is the "rebuild from the WAL" figure
(operations/s end to end, embedding every text included). Built workspaces are cached under
`--cache` (default /work/scale-cache, outside the repository) and reused by later runs: the 1M
build is the expensive part. `--embedder synthetic` uses dense 384-dimension vectors (the hash
embedder's vectors through a fixed random rotation, not lexical-only) to stand in for a model's.

Each size is then measured in a fresh process (so its memory is its own):
- `open_s`: open of the existing workspace until `knowledge_health` says healthy (catch-up, name
  index, search index warm), and RSS after it;
- ingest: `--articles` Apollo articles through `knowledge_process_chunk` into a group of their
  own (`apollo-<run>`), the scripted LLM in its own process as bench/ingest.py; engine time
  (lcg's `timings.engine_s`) of the first episode after open, median and p95;
- p50/p95 of `knowledge_find_entities`, `knowledge_find_relationships` (queries of 1-3 words of
  the vocabulary), `knowledge_get_context` (budget 4000, hops 1 and 2), and the temporal reads:
  `knowledge_list_relationships` `as_of` and `knowledge_get_changes` over one week, a page of
  `PAGE` (100) results each, and `knowledge_get_entity_timeline` of random entities;
- RSS at the end and the process's peak RSS.
With `--serve`, `lcg serve` is also started on each workspace (hash embedder only) and on one of
the 228 Apollo articles (ingested once, cached): its RSS once healthy and after a few reads.

With `--rebuild keep|none`, no measurement runs: each workspace's WAL is copied into a fresh home
with no database (`keep`: with the workspace's embedding cache too, the common "rebuild the
database" case, where every vector is reused; `none`: no cache, every text embedded), and the open
to `healthy` is timed in a fresh process: WAL operations/s, CPU s, peak RSS, and how much of it
the replay took (the rest is the name and search indexes).

The machine's load average is printed: the figures assume an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import numpy as np

from common import peak_rss_mb, percentile, percentile_ms, rss_kb, rss_mb, store_settings
from fixtures import Conn, SyntheticEmbedder, Text, articles, chunk, llm_server, scripted_client
from lcg import Settings, open_engine
from lcg.admin import status as admin_status
from lcg.embedding.hashing import HashEmbedder
from lcg.engine.kernel import Engine
from lcg.models import Entity, Episode, Fact
from lcg.search.index import ALWAYS, NEVER
from lcg.service.registry import dispatch
from lcg.telemetry import ListSink
from lcg.wal.records import Op, entity_op, episode_op, fact_op
from lcg.wal.writer import Wal

GROUP = "scale"
BATCH = 2000
BASE = datetime(2016, 1, 1, tzinfo=UTC)
SPAN = timedelta(days=3650)
DEFAULT_CACHE = Path("/work/scale-cache")
PAGE = 100  # results per page of the temporal lists (`num_results`)
# `--only`: the parts measured (None: all). A read method's part is its family.
ONLY: set[str] | None = None
_PARTS = {"knowledge_get_context": "context", "knowledge_find_entities": "find"}
_PARTS["knowledge_find_relationships"] = "find"


def _wanted(part: str) -> bool:
    return ONLY is None or part in ONLY


def embedder_for(name: str) -> HashEmbedder | SyntheticEmbedder:
    return HashEmbedder() if name == "hash" else SyntheticEmbedder()


def entity_uuid(i: int) -> str:
    return str(uuid.UUID(int=(1 << 100) + i))


def _ops(n_facts: int, text: Text) -> Iterator[Op]:
    """The workspace's operations, generated lazily (a 1M build never holds them all)."""
    rng = text.rng
    n_entities = n_facts // 2
    for i in range(n_entities):
        yield entity_op(
            Entity(
                entity_uuid(i),
                GROUP,
                f"{' '.join(text.words_(2)).title()} {i}",
                ("Entity", rng.choice(["Person", "Place", "Thing", "Org"])),
                text.sentence(14),
                created_at=BASE,
            )
        )
    superseded = n_facts // 10
    base_facts = n_facts - superseded
    step = SPAN / base_facts
    serial = 0

    def fact(src: int, name: str, at: datetime, ended: datetime | None) -> Fact:
        nonlocal serial
        serial += 1
        return Fact(
            str(uuid.UUID(int=(2 << 100) + serial)),
            GROUP,
            entity_uuid(src),
            entity_uuid(rng.randrange(n_entities)),
            name,
            text.sentence(12),
            valid_at=at,
            invalid_at=ended,
            expired_at=ended,
            created_at=at,
        )

    every = max(1, base_facts // max(1, superseded))
    for i in range(base_facts):
        src = rng.randrange(n_entities)
        name = rng.choice(["WORKS_WITH", "LOCATED_IN", "PART_OF", "OWNS", "LEADS", "USES"])
        at = BASE + step * i
        if i % every == 0 and serial < 2 * superseded:
            later = at + timedelta(days=rng.randint(1, 60))
            yield fact_op(fact(src, name, at, later))
            yield fact_op(fact(src, name, later, None))
        else:
            yield fact_op(fact(src, name, at, None))
    n_episodes = n_facts // 10
    for i in range(n_episodes):
        at = BASE + SPAN * (i / n_episodes)
        ep = Episode(
            str(uuid.UUID(int=(3 << 100) + i)),
            GROUP,
            f"chunk-{i}",
            text.sentence(60),
            source_description=f"notes/{i}.md",
            created_at=at,
            valid_at=at,
        )
        yield episode_op(ep)
        mentioned = list(dict.fromkeys(entity_uuid(rng.randrange(n_entities)) for _ in range(4)))
        yield Op("mentions.add", {"episode": ep.uuid, "entities": mentioned})


def write_wal(settings: Settings, n_facts: int) -> int:
    """Write the workspace's WAL; the number of operations."""
    wal = Wal(settings.wal_dir, settings.wal_max_bytes_per_file, settings.wal_max_events_per_file)
    count = 0
    batch: list[Op] = []
    for op in _ops(n_facts, Text(random.Random(n_facts))):
        batch.append(op)
        if len(batch) == BATCH:
            wal.append(GROUP, batch)
            count += len(batch)
            batch = []
    if batch:
        wal.append(GROUP, batch)
        count += len(batch)
    wal.close()
    return count


def settings_for(home: Path) -> Settings:
    return Settings.for_home(home, embedder="hash", **store_settings())


def build(root: Path, n_facts: int, embedder: str) -> dict[str, Any]:
    """The cached workspace of `n_facts` (built now if absent): its build figures."""
    done = root / "build.json"
    if done.exists():
        return dict(json.loads(done.read_text()))
    if root.exists():
        raise SystemExit(f"{root}: an unfinished build (still running, or interrupted: delete it)")
    home = root / "home"
    settings = settings_for(home)
    started = time.perf_counter()
    ops = write_wal(settings, n_facts)
    wal_s = time.perf_counter() - started
    started, cpu = time.perf_counter(), time.process_time()
    engine = open_engine(settings, embedder=embedder_for(embedder))
    rebuild_s = time.perf_counter() - started
    rebuild_cpu_s = time.process_time() - cpu
    engine.close()
    figures = {
        "wal_operations": ops,
        "wal_write_s": round(wal_s, 1),
        "rebuild_s": round(rebuild_s, 1),
        "rebuild_ops_per_s": round(ops / rebuild_s),
        "rebuild_cpu_s": round(rebuild_cpu_s, 1),
        "rebuild_peak_rss_mb": round(peak_rss_mb()),
        "built": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    done.write_text(json.dumps(figures))
    return figures


def _stats(seconds: list[float]) -> dict[str, float]:
    return {"p50_ms": percentile_ms(seconds, 0.5), "p95_ms": percentile_ms(seconds, 0.95)}


async def _timed(engine: Engine, method: str, params: list[dict[str, Any]]) -> dict[str, float]:
    if not _wanted(_PARTS.get(method, "temporal")):
        return {}
    for p in params[:3]:  # warm-up
        await dispatch(engine, method, p)
    out, cpu = [], []
    for p in params:
        started, cpu_started = time.perf_counter(), time.process_time()
        await dispatch(engine, method, p)
        out.append(time.perf_counter() - started)
        cpu.append(time.process_time() - cpu_started)
    return {**_stats(out), "cpu_p50_ms": percentile_ms(cpu, 0.5)}  # CPU: the machine may be shared


async def _ingest(engine: Engine, group: str, count: int) -> dict[str, Any]:
    engine_s: list[float] = []
    cpu_s: list[float] = []  # the process's CPU per episode (the LLM server runs elsewhere)
    for i, article in enumerate(articles(count)):
        params = {**chunk(i, article), "group_id": group}
        started = time.process_time()
        result = await dispatch(engine, "knowledge_process_chunk", params)
        cpu_s.append(time.process_time() - started)
        engine_s.append(result["timings"]["engine_s"])
    return {
        "articles": len(engine_s),
        "first_ms": round(engine_s[0] * 1000, 2),
        "median_ms": round(statistics.median(engine_s) * 1000, 2),
        "p95_ms": round(percentile(engine_s, 0.95) * 1000, 2),
        "cpu_first_ms": round(cpu_s[0] * 1000, 2),
        "cpu_median_ms": round(statistics.median(cpu_s) * 1000, 2),
        "cpu_p95_ms": round(percentile(cpu_s, 0.95) * 1000, 2),
    }


async def _reads(engine: Engine, n_facts: int, queries: int) -> dict[str, Any]:
    text = Text(random.Random(7))
    rng = text.rng
    qs = [{"query": " ".join(text.words_(rng.randint(1, 3)))} for _ in range(queries)]
    out: dict[str, Any] = {}
    for method in ("knowledge_find_entities", "knowledge_find_relationships"):
        out[method] = await _timed(engine, method, qs)
    for hops in (1, 2):
        ps = [{**q, "token_budget": 4000, "hops": hops} for q in qs[: max(10, queries // 5)]]
        out[f"knowledge_get_context_hops{hops}"] = await _timed(engine, "knowledge_get_context", ps)

    def when(fraction: float) -> str:
        return (BASE + SPAN * fraction).isoformat()

    fractions = [rng.random() * 0.95 for _ in range(max(10, queries // 5))]
    groups = [GROUP]
    out["as_of_list"] = await _timed(
        engine,
        "knowledge_list_relationships",
        [{"group_ids": groups, "as_of": when(f), "num_results": PAGE} for f in fractions],
    )
    week = timedelta(days=7) / SPAN
    out["changes_one_week"] = await _timed(
        engine,
        "knowledge_get_changes",
        [
            {"group_ids": groups, "since": when(f), "until": when(f + week), "num_results": PAGE}
            for f in fractions
        ],
    )
    n_entities = n_facts // 2
    out["entity_timeline"] = await _timed(
        engine,
        "knowledge_get_entity_timeline",
        [{"entity_uuid": entity_uuid(rng.randrange(n_entities))} for _ in fractions],
    )
    return out


def vector_recall(engine: Engine, queries: int) -> dict[str, Any]:
    """Recall@10 and @30 of the vector half (lcg.search.vectors: int8 rows in large partitions)
    against exact float32 search over the same texts' vectors (from the embedding cache), per
    vector kind of the `scale` group: the share of the hits whose float32 cosine is at least the
    exact k-th one (ties count as found)."""
    index = engine.parts.search
    text = Text(random.Random(11))
    qvecs = np.stack(
        [index.embed_query(" ".join(text.words_(text.rng.randint(1, 3)))) for _ in range(queries)]
    )
    with engine.reader() as conn:
        e = conn.entity_columns(GROUP)
        f = conn.fact_columns(GROUP, NEVER, ALWAYS)
    sources = {
        ("entity", "entity_name"): (e.uuid, e.name),
        ("entity", "entity_summary"): (e.uuid, e.summary),
        ("fact", "fact"): (f.uuid, [t or n for n, t in zip(f.name, f.fact, strict=True)]),
    }
    out: dict[str, Any] = {}
    for (family, kind), (uuids, texts) in sources.items():
        [(_, view)] = index.views(family, [GROUP])
        store = view.vectors[kind]
        row = {u: i for i, u in enumerate(uuids)}
        order = [row[view.uuids[d]] for d in range(view.n)]
        exact = np.empty((queries, view.n), dtype=np.float32)
        for lo in range(0, view.n, 65_536):  # float32 vectors a chunk at a time
            chunk = [texts[i] for i in order[lo : lo + 65_536]]
            exact[:, lo : lo + len(chunk)] = qvecs @ index.embedder.embed(chunk).T
        eligible = view.live() & view.has_vector[kind]
        exact[:, ~eligible] = -np.inf
        figures: dict[str, Any] = {"layout": store.layout}
        for k in (10, 30):
            shares = []
            for qi in range(queries):
                docs, _ = store.top(qvecs[qi], k, eligible)
                kth = np.sort(exact[qi])[-k]
                shares.append(float(np.mean(exact[qi, docs] >= kth - 1e-6)) if len(docs) else 0.0)
            figures[f"recall_at_{k}"] = round(statistics.mean(shares), 3)
        out[kind] = figures
    return out


def measure(root: Path, n_facts: int, embedder: str, n_articles: int, queries: int) -> None:
    """One size, in this (fresh) process: prints its JSON."""
    settings = settings_for(root / "home")
    with llm_server(0.0) as server:  # the model `_ingest` extracts with
        started, cpu = time.perf_counter(), time.process_time()
        engine = open_engine(settings, embedder=embedder_for(embedder), llm=scripted_client(server))
        health = anyio.run(admin_status.health, engine)
        out: dict[str, Any] = {"open_s": round(time.perf_counter() - started, 2)}
        out["open_cpu_s"] = round(time.process_time() - cpu, 2)  # the machine is shared
        out["healthy"] = health["healthy"]
        out["rss_mb_after_open"] = rss_mb()
        try:
            if _wanted("ingest"):
                group = f"apollo-{os.getpid()}"
                out["ingest_engine"] = anyio.run(_ingest, engine, group, n_articles)
            reads = anyio.run(_reads, engine, n_facts, queries)
            out["reads"] = {k: v for k, v in reads.items() if v}
            status = anyio.run(admin_status.status, engine)
            out["graph"] = {
                "entities": status["entity_count"],
                "facts": status["relationship_count"],
                "episodes": status["episode_count"],
            }
            out["rss_mb_end"] = rss_mb()
            out["peak_rss_mb"] = round(peak_rss_mb(), 1)
            out["index_mb"] = round(engine.parts.search.nbytes() / 2**20, 1)
            if _wanted("recall"):
                out["vector_recall"] = vector_recall(engine, max(5, queries // 5))
        finally:
            engine.close()
    print(json.dumps(out))


def wal_lines(wal_dir: Path) -> int:
    """The WAL's operations: its lines, over every group."""
    count = 0
    for path in wal_dir.rglob("*.jsonl"):
        with path.open("rb") as fh:
            count += sum(1 for line in fh if line.strip())
    return count


def rebuild(root: Path, embedder: str, keep_cache: bool) -> None:
    """`--rebuild`, in this (fresh) process: copy the workspace's WAL (and, with `keep_cache`,
    its embedding cache) into a new home with no database, time the open to healthy; prints JSON."""
    home = Path(tempfile.mkdtemp(prefix="rebuild-", dir=root))
    try:
        shutil.copytree(root / "home" / "wal", home / "wal")
        if keep_cache:
            shutil.copytree(root / "home" / "embeddings", home / "embeddings")
        ops = wal_lines(home / "wal")
        events = ListSink()
        started, cpu = time.perf_counter(), time.process_time()
        engine = open_engine(settings_for(home), embedder=embedder_for(embedder), events=events)
        try:
            health = anyio.run(admin_status.health, engine)
            wall = time.perf_counter() - started
            out: dict[str, Any] = {
                "embedding_cache": "kept" if keep_cache else "none",
                "wal_operations": ops,
                "rebuild_s": round(wall, 2),
                "rebuild_ops_per_s": round(ops / wall),
                "rebuild_cpu_s": round(time.process_time() - cpu, 2),
                "replay_s": round(
                    sum(e["duration_seconds"] for e in events.of_type("wal_replay_complete")), 2
                ),
                "healthy": health["healthy"],
                "rss_mb_after": rss_mb(),
                "peak_rss_mb": round(peak_rss_mb()),
            }
        finally:
            engine.close()
    finally:
        shutil.rmtree(home, ignore_errors=True)
    print(json.dumps(out))


def apollo_home(cache: Path, count: int = 228) -> Path:
    """A cached workspace with the first `count` Apollo articles ingested (hash embedder)."""
    root = cache / f"apollo-{count}"
    if not (root / "built").exists():
        shutil.rmtree(root, ignore_errors=True)
        with llm_server(0.0) as server:
            engine = open_engine(settings_for(root / "home"), llm=scripted_client(server))
            try:
                anyio.run(_ingest, engine, "default", count)
            finally:
                engine.close()
        (root / "built").write_text("ok")
    return root / "home"


def serve_rss(home: Path) -> dict[str, Any]:
    """RSS of `lcg serve` on `home` once healthy, and after a few searches and context reads."""
    sock = Path(tempfile.mkdtemp(prefix="lcg-scale-")) / "s.sock"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LCG_")}
    env.update(LCG_HOME=str(home), LCG_EMBEDDER="hash")
    if "LCG_EMBEDDED_STORE" in os.environ:  # the engine this run measures
        env["LCG_EMBEDDED_STORE"] = os.environ["LCG_EMBEDDED_STORE"]
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "lcg.cli", "serve", "--socket", str(sock)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while True:
            try:
                conn = Conn(sock)
                if conn.call("health_check", {})["result"]["state"] == "healthy":
                    break
                conn.close()
            except (OSError, KeyError):
                pass
            if proc.poll() is not None or time.perf_counter() - started > 900:
                raise SystemExit("lcg serve did not become healthy")
            time.sleep(0.1)
        out: dict[str, Any] = {"healthy_s": round(time.perf_counter() - started, 2)}
        out["rss_mb_healthy"] = round(rss_kb(proc.pid)["VmRSS"] / 1024, 1)
        for query in ("lunar module crew", "launch guidance", "orbit"):
            conn.call("knowledge_find_entities", {"query": query})
            conn.call("knowledge_find_relationships", {"query": query})
            conn.call("knowledge_get_context", {"query": query, "token_budget": 4000})
        # A temporal list: its rows held in memory (lcg.search.factrows) are built by now.
        conn.call("knowledge_list_relationships", {"as_of": BASE.isoformat(), "num_results": PAGE})
        rss = rss_kb(proc.pid)
        out["rss_mb_after_reads"] = round(rss["VmRSS"] / 1024, 1)
        out["rss_mb_high_water"] = round(rss["VmHWM"] / 1024, 1)
        conn.close()
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    return out


def label(n: int) -> str:
    return f"{n // 1_000_000}M" if n % 1_000_000 == 0 else f"{n // 1000}k"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000", help="fact counts, comma-separated")
    parser.add_argument("--embedder", choices=["hash", "synthetic"], default="hash")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--articles", type=int, default=30)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--build-only", action="store_true", help="build the workspaces, no runs")
    parser.add_argument(
        "--only", help="comma-separated parts to measure: ingest, find, context, temporal, recall"
    )
    parser.add_argument(
        "--serve",
        action="store_true",
        help="also RSS of `lcg serve` on each workspace (hash embedder) and on 228 Apollo articles",
    )
    parser.add_argument(
        "--rebuild",
        choices=["keep", "none"],
        help="time a rebuild from each workspace's WAL with no database (keep: its embedding "
        "cache too; none: no cache), instead of the measurements",
    )
    parser.add_argument("--measure", type=int, help=argparse.SUPPRESS)  # the child process
    args = parser.parse_args()
    global ONLY
    ONLY = set(args.only.split(",")) if args.only else None
    if args.measure and args.rebuild:
        root = args.cache / f"{args.embedder}-{args.measure}"
        rebuild(root, args.embedder, args.rebuild == "keep")
        return
    if args.measure:
        root = args.cache / f"{args.embedder}-{args.measure}"
        measure(root, args.measure, args.embedder, args.articles, args.queries)
        return
    started = time.perf_counter()
    sizes: dict[str, Any] = {}
    for n in (int(s) for s in args.sizes.split(",")):
        root = args.cache / f"{args.embedder}-{n}"
        row: dict[str, Any] = {"build": build(root, n, args.embedder)}
        if args.rebuild:
            command = [sys.executable, __file__, "--measure", str(n), "--embedder", args.embedder]
            command += ["--cache", str(args.cache), "--rebuild", args.rebuild]
            row["rebuild"] = _child(command)
        elif not args.build_only:
            command = [sys.executable, __file__, "--measure", str(n), "--embedder", args.embedder]
            command += ["--cache", str(args.cache), "--articles", str(args.articles)]
            command += ["--only", args.only] if args.only else []
            row.update(_child([*command, "--queries", str(args.queries)]))
        if args.serve and args.embedder == "hash" and not args.rebuild:
            row["lcg_serve"] = serve_rss(root / "home")
        sizes[label(n)] = row
    if args.serve:
        sizes["apollo_228_articles"] = {"lcg_serve": serve_rss(apollo_home(args.cache))}
    print(
        json.dumps(
            {
                "bench": "scale",
                "embedder": args.embedder,
                "sizes": sizes,
                "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
                "total_s": round(time.perf_counter() - started, 1),
            },
            indent=2,
        )
    )


def _child(command: list[str]) -> dict[str, Any]:
    """The last JSON line a measuring child prints; on a failure, its stderr and exit status
    are written to this process's stderr before exiting (a traceback of the child's own, not
    `CalledProcessError`)."""
    child = subprocess.run(command, capture_output=True, text=True, check=False)
    if child.returncode != 0:
        sys.stderr.write(child.stderr)
        raise SystemExit(f"bench/scale.py: {' '.join(command)} exited with {child.returncode}")
    return dict(json.loads(child.stdout.strip().splitlines()[-1]))


if __name__ == "__main__":
    main()
