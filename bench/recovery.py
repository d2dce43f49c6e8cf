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

Row counts after each recovery must equal the built graph's (`"identical": true`).
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


def _counts(engine: Any) -> dict[str, int]:
    with engine.store.read() as conn:
        return {
            table: int(conn.scalar(f"MATCH (x:{table}) RETURN count(*)"))
            for table in ("Episode", "Entity", "Fact", "Embedding")
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--articles", type=int, default=200)
    args = parser.parse_args()
    os.environ["LCG_EXTRACTOR"] = "heuristic"
    os.environ["LCG_EMBEDDER"] = "hash"
    from lcg import open_engine
    from lcg.config import load_settings
    from lcg.storage.store import delete_database_files
    from lcg.waladmin import dump_wal

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
        built = _counts(engine)
        engine.close()
        wal_bytes = sum(p.stat().st_size for p in settings.wal_dir.rglob("*.jsonl"))

        timings: dict[str, float] = {}
        identical = True
        for label, drop_cache in (("recovery_warm_s", False), ("recovery_cold_s", True)):
            delete_database_files(settings.db_path)
            if drop_cache:
                shutil.rmtree(settings.home / "embeddings", ignore_errors=True)
            started = time.perf_counter()
            engine = open_engine(settings)
            timings[label] = round(time.perf_counter() - started, 3)
            identical = identical and _counts(engine) == built
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
        "rows": built,
        "wal_bytes": wal_bytes,
        **timings,
        "dump_wal_lines": dumped["lines_written"],
        "identical": identical,
        "python": sys.version.split()[0],
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
