"""Benchmark `lcg ingest` on a folder: the 228 Apollo articles as dated Markdown files.

    python bench/folder_ingest.py [--articles 228] [--latency 1.0] [--concurrency 8]

The LLM is a real OpenAI-compatible HTTP server (lcg.testing.scripted_llm) answering from the
heuristic extractor, with a simulated latency per call; the embedder is `hash`. Each run is the
real command in its own process (`python -m lcg.cli ingest ... --json`), so times include
process start and database open, as a user sees them. Prints one JSON object: wall time and
episodes/s of the first run, and the wall time of a re-run with nothing changed (target: < 5 s
for 228 files) — which must make no extraction call.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lcg.testing.heuristic_llm import heuristic_responder
from lcg.testing.scripted_llm import ScriptedLlmServer

CORPUS = Path(__file__).resolve().parents[1] / "examples" / "apollo" / "corpus_prose.jsonl"


def write_folder(root: Path, limit: int) -> int:
    lines = CORPUS.read_text(encoding="utf-8").splitlines()[1 : limit + 1]
    for i, line in enumerate(lines):
        article = json.loads(line)
        slug = "".join(c if c.isalnum() else "-" for c in article["title"]).strip("-").lower()
        day = 1 + i % 28
        text = f"---\ntitle: {json.dumps(article['title'])}\ndate: 1969-07-{day:02d}\n---\n"
        (root / f"{i:03d}-{slug}.md").write_text(
            text + f"# {article['title']}\n\n" + article["prose"]
        )
    return len(lines)


def ingest(home: Path, folder: Path, url: str, concurrency: int) -> tuple[float, dict[str, Any]]:
    env = {**os.environ, "LCG_EXTRACTION_URL": url, "LCG_EMBEDDER": "hash"}
    command = [
        sys.executable,
        "-m",
        "lcg.cli",
        "--home",
        str(home),
        "ingest",
        str(folder),
        "--concurrency",
        str(concurrency),
        "--json",
    ]
    started = time.monotonic()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"lcg ingest failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return seconds, json.loads(done.stdout[done.stdout.index("{\n") :])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--articles", type=int, default=228)
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "apollo"
        folder.mkdir()
        files = write_folder(folder, args.articles)
        with ScriptedLlmServer(heuristic_responder, latency_s=args.latency) as server:
            first_s, first = ingest(Path(tmp) / ".lcg", folder, server.url, args.concurrency)
            calls_first = server.count
            rerun_s, rerun = ingest(Path(tmp) / ".lcg", folder, server.url, args.concurrency)
            rerun_calls = server.count - calls_first
    print(
        json.dumps(
            {
                "files": files,
                "llm_latency_s": args.latency,
                "concurrency": args.concurrency,
                "first_run_s": round(first_s, 2),
                "episodes": first["episodes"],
                "episodes_per_s": round(first["episodes"] / first_s, 2),
                "llm_requests_first_run": calls_first,
                "entities": first["entities"],
                "facts": first["facts"],
                "files_failed": first["files_failed"],
                "rerun_no_change_s": round(rerun_s, 2),
                "rerun_files_skipped": rerun["files_skipped"],
                "rerun_llm_requests": rerun_calls,
                "rerun_target_s": 5.0,
            }
        )
    )


if __name__ == "__main__":
    main()
