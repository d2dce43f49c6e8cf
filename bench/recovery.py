"""Benchmark recovery of a workspace whose database was deleted; prints one JSON object.

    python bench/recovery.py [--articles 200]

Builds a workspace from the first `--articles` articles of examples/apollo/corpus_prose.jsonl,
each ingested by `knowledge_process_chunk` with the heuristic extractor (`LCG_EXTRACTOR=heuristic`)
and the hash embedder. If the ingestion pipeline is not available, it falls back to synthetic
episodes written with `Engine.commit_episode` (`"source": "synthetic"` in the output). Then:

- `recovery_warm_s`: delete the database, open the workspace (the startup replays every group
  from the WAL); the embedding cache is kept, so nothing is re-embedded;
- `recovery_cold_s`: the same with `<home>/embeddings` deleted too (every text re-embedded);
- `dump_wal_s`: `knowledge_dump_wal` of every group into a fresh directory.

After each recovery the rows must be the built graph's, column for column: every Episode,
Entity, Fact and Embedding row and every RELATES_TO and MENTIONS edge (`rows_differing` counts
the rows found on one side only, per table; `"identical": true` when all are 0).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "examples" / "apollo" / "corpus_prose.jsonl"


def _articles(limit: int) -> list[dict[str, Any]]:
    out = []
    with CORPUS.open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            if row.get("_header"):
                continue
            out.append(row)
            if len(out) == limit:
                break
    return out


async def _ingest(engine: Any, articles: list[dict[str, Any]]) -> None:
    from lcg.service.registry import dispatch

    start = datetime(1969, 7, 16, tzinfo=UTC)
    for i, art in enumerate(articles):
        await dispatch(
            engine,
            "knowledge_process_chunk",
            {
                "chunk_text": art["prose"][:8000],
                "chunk_id": f"{art['revision_id']}",
                "source_file": f"{art['title']}.md",
                "group_id": "apollo",
                "reference_time": (start + timedelta(days=i)).isoformat(),
            },
        )


async def _synthetic(engine: Any, count: int) -> None:
    from lcg import Entity, Episode, EpisodeCommit, Fact

    known: dict[str, str] = {}
    start = datetime(1969, 7, 16, tzinfo=UTC)
    for i in range(count):
        when = start + timedelta(hours=i)
        names = (f"Astronaut {i % 40}", f"Mission {i % 25}", f"Spacecraft {i % 15}")
        fresh = []
        for name in names:
            if name not in known:
                known[name] = str(uuid.uuid4())
                fresh.append(Entity(known[name], "apollo", name, created_at=when))
        ep = Episode(
            str(uuid.uuid4()),
            "apollo",
            f"note-{i}",
            f"{names[0]} flew {names[1]} aboard {names[2]} " * 20,
            created_at=when,
        )
        facts = [
            Fact(
                str(uuid.uuid4()),
                "apollo",
                known[a],
                known[b],
                pred,
                f"{a} {pred.lower()} {b} (note {i})",
                episodes=(ep.uuid,),
                created_at=when,
            )
            for a, pred, b in ((names[0], "FLEW", names[1]), (names[1], "USED", names[2]))
        ]
        await engine.commit_episode(
            EpisodeCommit("apollo", ep, fresh, facts, mentions=[known[n] for n in names])
        )


# Every column of every table, and both relationship tables by their ends: the rows compared.
_QUERIES = {
    "Episode": "MATCH (x:Episode) RETURN x.uuid, x.group_id, x.name, x.content, x.source, "
    "x.source_description, x.source_file, x.chunk_id, x.created_at, x.valid_at",
    "Entity": "MATCH (x:Entity) RETURN x.uuid, x.group_id, x.name, x.labels, x.summary, "
    "x.attributes, x.created_at, x.merged_into",
    "Fact": "MATCH (x:Fact) RETURN x.uuid, x.group_id, x.source_uuid, x.target_uuid, x.name, "
    "x.fact, x.relation_type, x.attributes, x.episodes, x.valid_at, x.invalid_at, x.created_at, "
    "x.expired_at",
    "Embedding": "MATCH (x:Embedding) RETURN x.key, x.owner, x.kind, x.group_id, x.text_hash",
    "RELATES_TO": "MATCH (a)-[:RELATES_TO]->(b) RETURN a.uuid, b.uuid",
    "MENTIONS": "MATCH (a:Episode)-[:MENTIONS]->(b:Entity) RETURN a.uuid, b.uuid",
}


def _rows(engine: Any) -> dict[str, list[str]]:
    """Each table's rows (every column), as sorted JSON lines: equal means the same rows."""
    with engine.reader() as conn:
        return {
            table: sorted(json.dumps(row, default=str) for row in conn.rows(query))
            for table, query in _QUERIES.items()
        }


def _differences(built: dict[str, list[str]], found: dict[str, list[str]]) -> dict[str, int]:
    """Per table, how many rows are in one snapshot and not the other (0 everywhere: same)."""
    out = {}
    for table, rows in built.items():
        a, b = Counter(rows), Counter(found[table])
        out[table] = sum((a - b).values()) + sum((b - a).values())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--articles", type=int, default=200)
    args = parser.parse_args()
    os.environ["LCG_EXTRACTOR"] = "heuristic"
    os.environ["LCG_EMBEDDER"] = "hash"
    from lcg import open_engine
    from lcg.admin.waladmin import dump_wal
    from lcg.config import load_settings
    from lcg.storage.store import delete_database_files

    with tempfile.TemporaryDirectory(prefix="lcg-bench-recovery-") as tmp:
        settings = load_settings(overrides={"home": str(Path(tmp) / ".lcg")})
        engine = open_engine(settings)
        source = "apollo"
        note = ""
        started = time.perf_counter()
        try:
            anyio.run(_ingest, engine, _articles(args.articles))
        except Exception as exc:  # any pipeline failure: report it, fall back to synthetic
            note = f"knowledge_process_chunk unavailable ({type(exc).__name__}: {exc})"
            engine.close()
            shutil.rmtree(settings.home)
            engine = open_engine(settings)
            source = "synthetic"
            started = time.perf_counter()
            anyio.run(_synthetic, engine, args.articles)
        build_s = time.perf_counter() - started
        built = _rows(engine)
        engine.close()
        wal_bytes = sum(p.stat().st_size for p in settings.wal_dir.rglob("*.jsonl"))

        timings: dict[str, float] = {}
        differing: dict[str, dict[str, int]] = {}
        for label, drop_cache in (("recovery_warm_s", False), ("recovery_cold_s", True)):
            delete_database_files(settings.db_path)
            if drop_cache:
                shutil.rmtree(settings.home / "embeddings", ignore_errors=True)
            started = time.perf_counter()
            engine = open_engine(settings)
            timings[label] = round(time.perf_counter() - started, 3)
            differing[label.removesuffix("_s")] = _differences(built, _rows(engine))
            engine.close()

        engine = open_engine(settings)
        try:
            started = time.perf_counter()
            dumped = anyio.run(dump_wal, engine, None, str(Path(tmp) / "dump"))
            timings["dump_wal_s"] = round(time.perf_counter() - started, 3)
        finally:
            engine.close()

    result = {
        "benchmark": "recovery",
        "source": source,
        "articles": args.articles,
        "note": note or None,
        "embedder": "hash",
        "extractor": "heuristic" if source == "apollo" else None,
        "build_s": round(build_s, 3),
        "rows": {table: len(rows) for table, rows in built.items()},
        "wal_bytes": wal_bytes,
        **timings,
        "dump_wal_lines": dumped["lines_written"],
        # Rows (every column) present in the built graph or the recovered one but not both.
        "rows_differing": differing,
        "identical": all(n == 0 for diff in differing.values() for n in diff.values()),
        "python": sys.version.split()[0],
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
