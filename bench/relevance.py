"""Relevance of search on the Apollo corpus, per embedder; prints one JSON object.

    python bench/relevance.py [--embedders hash,onnx] [--articles 228] [--calibrate]
        [--extraction scripted|heuristic] [--serve-rss] [--floors 0.3,0.35,0.4]

Each embedder runs in its own child process (so resident memory is its own): the articles of
examples/apollo are ingested with `knowledge_process_chunk` through the real LLM extraction path
against the scripted OpenAI-compatible server (lcg.testing.scripted_llm), which answers with a
scripted extraction: for the 70 articles the judged queries touch, the entities and facts of
bench/relevance_extraction.json (written by reading the articles, as a good extractor would
return them); for the others, what the heuristic responder finds (distractors).
`--extraction heuristic` ingests with the offline heuristic extractor instead (the benchmark's
first version). Then the judged queries of bench/relevance_judgments.py (written by reading the
articles) run against
`knowledge_find_entities` and `knowledge_search_passages` (10 results each). Reported per
embedder and search:

- recall@10 (the share of a query's judged items found in its top 10, averaged over answerable
  queries; an item judged under alternative names, "A|B", counts once, found by either) and MRR (1 / rank of the first judged item), overall and per query kind;
- for no-answer queries, the mean number of results (all of them noise);
- ingest time per episode, the embedding cost per entity/fact text (a fresh, uncached batch of
  the graph's own texts), and resident memory (current and peak) after ingest and queries.

`--serve-rss` then closes the engine and starts `lcg serve` on the ingested workspace (same
embedder), runs every judged query through its socket (knowledge_find_entities and
knowledge_search_passages), and reports the server's resident memory (VmRSS after the queries,
VmHWM its high-water mark).

`onnx` needs a model: `LCG_EMBEDDING_MODEL_PATH` (a directory), or one pulled with `lcg models
pull`. `--calibrate` adds, per embedder, the distribution of cosine similarities between each
answerable query and its judged entities (relevant pairs) and every other entity (random
pairs), and the best similarity of each no-answer query: the data the vector floor
(lcg.search.floor) is chosen from. `--floors` reruns the judged queries under each vector
floor, for all queries and for the queries at even and at odd positions separately (choose on
one half, check on the other).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import numpy as np

from common import peak_rss_mb, rss_kb, rss_mb
from relevance_judgments import QUERIES, Query

CORPUS = Path(__file__).resolve().parent.parent / "examples" / "apollo" / "corpus_prose.jsonl"
EXTRACTION = Path(__file__).resolve().parent / "relevance_extraction.json"
CHUNK_CHARS = 8000
KINDS = ("exact", "paraphrase", "relation", "none")


def _articles(limit: int) -> list[dict[str, Any]]:
    out = []
    with CORPUS.open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            if not row.get("_header"):
                out.append(row)
    return out[:limit]


def _norm(name: str) -> str:
    return " ".join(name.lower().split())


def _score(ranked: list[str], judged: tuple[str, ...]) -> tuple[float, float]:
    """(recall@10, reciprocal rank) of a ranked list of names against the judged items; an item
    may be judged under alternative names ("Jim Lovell|James Arthur Lovell Jr."): it is found
    when any of them is."""
    items = [{_norm(name) for name in j.split("|")} for j in judged]
    got = [_norm(r) for r in ranked[:10]]
    found = sum(1 for names in items if names.intersection(got))
    wanted = set().union(*items)
    first = next((i for i, r in enumerate(got) if r in wanted), None)
    return found / len(items), 0.0 if first is None else 1.0 / (first + 1)


def _summarise(per_query: list[tuple[Query, list[str]]], judged: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    answerable = [(q, r) for q, r in per_query if q.kind != "none"]
    for label, subset in [("all", answerable)] + [
        (k, [(q, r) for q, r in answerable if q.kind == k]) for k in KINDS[:3]
    ]:
        scores = [_score(r, getattr(q, judged)) for q, r in subset]
        out[label] = {
            "queries": len(scores),
            "recall_at_10": round(float(np.mean([s[0] for s in scores])), 3),
            "mrr": round(float(np.mean([s[1] for s in scores])), 3),
        }
    none = [len(r) for q, r in per_query if q.kind == "none"]
    out["none"] = {"queries": len(none), "mean_results": round(float(np.mean(none)), 2)}
    out["misses"] = [q.text for q, r in answerable if _score(r, getattr(q, judged))[1] == 0.0]
    return out


async def _ingest(engine: Any, articles: list[dict[str, Any]]) -> int:
    from lcg.service.registry import dispatch

    start = datetime(1969, 7, 16, tzinfo=UTC)
    for i, art in enumerate(articles):
        await dispatch(
            engine,
            "knowledge_process_chunk",
            {
                "chunk_text": art["prose"][:CHUNK_CHARS],
                "chunk_id": str(art["revision_id"]),
                "source_file": f"{art['title']}.md",
                "group_id": "apollo",
                "reference_time": (start + timedelta(days=i)).isoformat(),
            },
        )
    return len(articles)


async def _queries(engine: Any) -> dict[str, list[tuple[Query, list[str]]]]:
    from lcg.service.registry import dispatch

    entities, passages = [], []
    titles = _episode_titles(engine)
    for q in QUERIES:
        found = await dispatch(engine, "knowledge_find_entities", {"query": q.text})
        entities.append((q, [n["name"] for n in found["nodes"]]))
        found = await dispatch(engine, "knowledge_search_passages", {"query": q.text})
        passages.append((q, [titles.get(p["uuid"], "?") for p in found["passages"]]))
    return {"entities": entities, "passages": passages}


def _episode_titles(engine: Any) -> dict[str, str]:
    """Episode uuid -> the title of the article it came from (its source file, less `.md`)."""
    with engine.reader() as conn:
        return {
            str(u): str(f).removesuffix(".md")
            for u, f in conn.rows("MATCH (e:Episode) RETURN e.uuid, e.source_file")
        }


def _calibrate(engine: Any) -> dict[str, Any]:
    """Cosine similarity of queries to judged (relevant) and all other (random) entities."""
    index = engine.parts.search
    views = index.views("entity", ["apollo"])
    with engine.reader() as conn:
        names = {
            str(u): _norm(str(n)) for u, n in conn.rows("MATCH (e:Entity) RETURN e.uuid, e.name")
        }
    relevant: list[float] = []
    random_: list[float] = []
    none_best: list[float] = []
    for q in QUERIES:
        vector = index.embed_query(q.text)
        wanted = {_norm(j) for j in q.entities}
        for _, view in views:
            sims = np.full(view.n, -np.inf)
            for kind in ("entity_name", "entity_summary"):
                kind_sims = view.vectors[kind].scan(vector)
                sims = np.maximum(
                    sims, np.where(view.has_vector[kind][: view.n], kind_sims, -np.inf)
                )
            live = view.live() & np.isfinite(sims)
            for doc in np.flatnonzero(live):
                (relevant if names.get(view.uuids[doc]) in wanted else random_).append(
                    float(sims[doc])
                ) if q.kind != "none" else None
            if q.kind == "none" and live.any():
                none_best.append(float(sims[live].max()))

    def pct(values: list[float], qs: tuple[float, ...]) -> dict[str, float]:
        if not values:
            return {}
        return {f"p{q:g}": round(float(np.percentile(values, q)), 3) for q in qs}

    return {
        "relevant_pairs": len(relevant),
        "relevant": pct(relevant, (5, 10, 25, 50)),
        "random_pairs": len(random_),
        "random": pct(random_, (50, 90, 99, 99.9)),
        "none_query_best": sorted(round(v, 3) for v in none_best),
    }


def _embedding_cost(engine: Any) -> dict[str, Any]:
    """ms per text embedding the graph's entity names and fact sentences, fresh, in batches."""
    inner = engine.parts.embedder.inner
    with engine.reader() as conn:
        texts = [str(r[0]) for r in conn.rows("MATCH (e:Entity) RETURN e.name LIMIT 1000")]
        texts += [str(r[0]) for r in conn.rows("MATCH (f:Fact) RETURN f.fact LIMIT 1000")]
    batch = 64
    started = time.perf_counter()
    for i in range(0, len(texts), batch):
        inner.embed(texts[i : i + batch])
    elapsed = time.perf_counter() - started
    return {
        "texts": len(texts),
        "batch": batch,
        "ms_per_text": round(1000 * elapsed / len(texts), 3),
    }


def scripted_responder(articles: list[dict[str, Any]]) -> Callable[[dict[str, Any]], str]:
    """The scripted server's answer to one extraction request: the fixture's entities and facts
    for an article it covers (recognised by the episode text), else the heuristic responder's."""
    from lcg.testing.heuristic_llm import heuristic_responder, prompt_parts

    fixture = json.loads(EXTRACTION.read_text(encoding="utf-8"))["articles"]
    by_text = {
        art["prose"][:CHUNK_CHARS].strip(): fixture[art["title"]]
        for art in articles
        if art["title"] in fixture
    }

    def respond(body: dict[str, Any]) -> str:
        _, user = prompt_parts(body)
        episode = user.split("<episode>\n", 1)[-1].rsplit("\n</episode>", 1)[0].strip()
        found = by_text.get(episode)
        if found is None or ("EXISTING:" in user and "NEW:" in user):
            return heuristic_responder(body)
        if user.startswith("ENTITIES:"):  # the facts call
            return json.dumps({"facts": found["facts"]})
        if user.startswith("EXISTING FACTS:"):  # the single call
            return json.dumps(found)
        return json.dumps({"entities": found["entities"]})

    return respond


def _serve_rss(home: Path) -> dict[str, Any]:
    """`lcg serve` on `home` (the child's embedder settings): RSS after every judged query."""
    from fixtures import Conn

    sock_dir = Path(tempfile.mkdtemp(dir="/tmp", prefix="lcg-rel-"))
    sock = sock_dir / "s.sock"
    env = {**os.environ, "LCG_HOME": str(home), "LCG_EXTRACTOR": "heuristic"}
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "lcg.cli", "serve", "--socket", str(sock)],
        cwd=home.parent,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 600
        while True:
            try:
                conn = Conn(sock)
                if conn.call("health_check", {})["result"]["state"] == "healthy":
                    break
                conn.close()
            except (OSError, KeyError, ValueError):
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit("lcg serve did not become healthy")
            time.sleep(0.1)
        healthy_s = time.perf_counter() - started
        rss_healthy = rss_kb(proc.pid)
        for q in QUERIES:
            conn.call("knowledge_find_entities", {"query": q.text})
            conn.call("knowledge_search_passages", {"query": q.text})
        conn.close()
        rss = rss_kb(proc.pid)
        return {
            "healthy_after_s": round(healthy_s, 2),
            "rss_mb_healthy": round(rss_healthy.get("VmRSS", 0) / 1024, 1),
            "rss_mb_after_queries": round(rss.get("VmRSS", 0) / 1024, 1),
            "rss_mb_high_water": round(rss.get("VmHWM", 0) / 1024, 1),
        }
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def _count(engine: Any, label: str) -> int:
    with engine.reader() as conn:
        return int(conn.rows(f"MATCH (n:{label}) RETURN count(*)")[0][0])


def _floor_sweep(engine: Any, floors: list[float]) -> dict[str, Any]:
    """The judged queries again under each vector floor, for all queries and for two halves
    (even and odd positions in bench/relevance_judgments.py): a floor chosen on one half is
    checked on the other. Entities: recall@10 and no-answer mean results; passages likewise."""
    index = engine.search_index
    kept = index.vector_floor
    out: dict[str, Any] = {}
    try:
        for floor in floors:
            index.vector_floor = floor
            results = anyio.run(_queries, engine)
            row: dict[str, Any] = {}
            for half, keep in (
                ("all", lambda i: True),
                ("even", lambda i: i % 2 == 0),
                ("odd", lambda i: i % 2 == 1),
            ):
                for search, judged in (("entities", "entities"), ("passages", "passages")):
                    picked = [r for i, r in enumerate(results[search]) if keep(i)]
                    got = _summarise(picked, judged)
                    row[f"{half}_{search}"] = [
                        got["all"]["recall_at_10"],
                        got["none"]["mean_results"],
                    ]
            out[f"{floor:g}"] = row
    finally:
        index.vector_floor = kept
    out["columns"] = "[recall_at_10 of answerable queries, mean results of no-answer queries]"
    return out


def child(
    embedder: str,
    articles: int,
    calibrate: bool,
    extraction: str,
    serve_rss: bool = False,
    floors: list[float] | None = None,
) -> dict[str, Any]:
    os.environ["LCG_EXTRACTOR"] = "heuristic" if extraction == "heuristic" else "llm"
    os.environ["LCG_EMBEDDER"] = embedder
    from lcg import open_engine
    from lcg.config import load_settings
    from lcg.extraction.providers.openai_compat import OpenAICompatProvider
    from lcg.testing.scripted_llm import ScriptedLlmServer

    corpus = _articles(articles)
    with (
        tempfile.TemporaryDirectory(prefix="lcg-bench-relevance-") as tmp,
        ScriptedLlmServer(scripted_responder(corpus)) as server,
    ):
        settings = load_settings(overrides={"home": str(Path(tmp) / ".lcg")})
        scripted = OpenAICompatProvider(base_url=server.url, model="scripted")
        started = time.perf_counter()
        engine = open_engine(settings, llm=scripted if extraction == "scripted" else None)
        open_s = time.perf_counter() - started
        try:
            started = time.perf_counter()
            episodes = anyio.run(_ingest, engine, corpus)
            ingest_s = time.perf_counter() - started
            rss_after_ingest = rss_mb()
            results = anyio.run(_queries, engine)
            out: dict[str, Any] = {
                "embedder": embedder,
                "model": engine.parts.embedder.identity.model,
                "open_s": round(open_s, 3),
                "episodes": episodes,
                "entities_in_graph": _count(engine, "Entity"),
                "facts_in_graph": _count(engine, "Fact"),
                "ingest_ms_per_episode": round(1000 * ingest_s / episodes, 1),
                "entities": _summarise(results["entities"], "entities"),
                "passages": _summarise(results["passages"], "passages"),
                "embedding_cost": _embedding_cost(engine),
                "rss_mb_after_ingest": rss_after_ingest,
                "rss_mb_end": rss_mb(),
                "rss_mb_peak": round(peak_rss_mb(), 1),
            }
            if calibrate:
                out["calibration"] = _calibrate(engine)
            if floors:
                out["floor_sweep"] = _floor_sweep(engine, floors)
        finally:
            engine.close()
        if serve_rss:
            out["serve"] = _serve_rss(settings.home)
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--embedders", default="hash,onnx")
    parser.add_argument("--articles", type=int, default=228)
    parser.add_argument("--calibrate", action="store_true")
    parser.add_argument("--extraction", choices=("scripted", "heuristic"), default="scripted")
    parser.add_argument("--serve-rss", action="store_true")
    parser.add_argument(
        "--floors", default="", help="comma list of vector floors to sweep (see _floor_sweep)"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(
            json.dumps(
                child(
                    args.child,
                    args.articles,
                    args.calibrate,
                    args.extraction,
                    args.serve_rss,
                    [float(f) for f in args.floors.split(",") if f],
                )
            )
        )
        return
    runs = []
    for name in args.embedders.split(","):
        cmd = [sys.executable, __file__, "--child", name, "--articles", str(args.articles)]
        cmd += ["--extraction", args.extraction] + (["--serve-rss"] if args.serve_rss else [])
        if args.calibrate:
            cmd.append("--calibrate")
        if args.floors:
            cmd += ["--floors", args.floors]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            runs.append({"embedder": name, "error": done.stderr.strip().splitlines()[-3:]})
            continue
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    print(
        json.dumps(
            {
                "benchmark": "relevance",
                "queries": {k: sum(q.kind == k for q in QUERIES) for k in KINDS},
                "articles": args.articles,
                "extraction": args.extraction,
                "loadavg": os.getloadavg(),
                "runs": runs,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
