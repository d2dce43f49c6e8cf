"""`lcg demo`: ingest 20 short articles with whatever extractor is configured, then query them.

The articles (examples/demo/articles.jsonl: a fictional software company and its Atlas project,
written for lcg and shipped with it; examples/demo/README.md) go through the real ingestion
pipeline (`knowledge_process_chunk`): the configured LLM when one is configured
(LCG_EXTRACTOR=llm with a provider), else the offline heuristic extractor — no API key, no
server. Then it prints what the graph holds, three searches, what changed in spring 2025
(`knowledge_get_changes`), the time views of a short dated changelog (lcg.cli.demo_time), and
deletes the database to show the WAL rebuilding it identically.

The embedder is chosen once for both engines (a fallback warning is printed once), text from
the articles is printed literally (no Rich markup), and the closing hint names `lcg` the way
this shell can run it (`.venv/bin/lcg` when the venv is not activated).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from lcg.cli.demo_time import example_file, show_time
from lcg.config import Settings, load_settings
from lcg.embedding.select import select_embedder
from lcg.engine import Engine, open_engine
from lcg.extraction.select import describe_llm, plan_llm
from lcg.service.registry import REGISTRY, dispatch
from lcg.storage.store import delete_database_files

__all__ = ["run_demo"]

ARTICLES = 20
GROUP = "fernhill"
SOURCE = "examples/demo/articles.jsonl"
# Articles carry no date of their own: written after the events they tell, they are stamped a
# day apart from here.
FIRST_REFERENCE = datetime(2025, 7, 1, tzinfo=UTC)
SEARCHES = (
    ("knowledge_find_entities", "Platform Team", "entities"),
    ("knowledge_find_relationships", "moved to the Lisbon office", "facts"),
    ("knowledge_search_passages", "security review of the sync command", "passages"),
)
# What the articles say became true or ended in this span (knowledge_get_changes): the Atlas
# project changing hands, among other things.
CHANGES = ("2025-03-01", "2025-05-01")


def _articles(limit: int) -> list[dict[str, Any]]:
    lines = example_file(SOURCE).read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines if line.strip()]
    return [r for r in rows if not r.get("_header")][:limit]


# Never let the user's variables point the demo (which deletes its database) elsewhere.
_PLACES = ("HOME", "DB_PATH", "WAL_DIR", "SOCKET_PATH")


def _settings(directory: Path, **overrides: Any) -> Settings:
    """The user's configuration (extractor, embedder, ...) in the demo's own workspace."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k.removeprefix("LCG_").removeprefix("GRAPHITI_") not in _PLACES
    }
    return load_settings(env=env, overrides={"home": str(directory.resolve()), **overrides})


def _extractor_line(engine: Engine) -> str:
    if engine.settings.extractor == "heuristic":
        return "heuristic extractor (offline: no model, no API key)"
    llm = describe_llm(engine)
    return f"LLM extractor {llm['provider']}:{llm['model']} ({llm['source']})"


async def _ingest(engine: Engine, articles: list[dict[str, Any]], console: Console) -> float:
    started = time.perf_counter()
    columns = (
        TextColumn("[bold]ingesting"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.description}"),
    )
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task("", total=len(articles))
        for i, article in enumerate(articles):
            progress.update(task, description=escape(article["title"][:40]))
            await dispatch(
                engine,
                "knowledge_process_chunk",
                {
                    "chunk_text": article["prose"],
                    "chunk_id": article["title"],
                    "source_file": SOURCE,
                    "group_id": GROUP,
                    "reference_time": (FIRST_REFERENCE + timedelta(days=i)).isoformat(),
                },
            )
            progress.advance(task)
    return time.perf_counter() - started


def _first_list(result: dict[str, Any]) -> list[dict[str, Any]]:
    return next((v for v in result.values() if isinstance(v, list)), [])


def _label(item: dict[str, Any]) -> str:
    """One line for an entity (its name), a fact (predicate: sentence) or a passage."""
    if "fact" in item:
        text = f"{item.get('name', '')}: {item['fact']}"
    elif "content" in item:
        text = f"{item.get('name', '')}: {item['content']}"
    else:
        text = str(item.get("name", ""))
    return " ".join(text.split())


async def _queries(engine: Engine, console: Console) -> None:
    for method, query, what in SEARCHES:
        if method not in REGISTRY:
            continue
        params: dict[str, Any] = {"query": query, "group_ids": [GROUP], "num_results": 3}
        if method == "knowledge_search_passages":
            params["min_score"] = 0.0
        result = await dispatch(engine, method, params)
        console.print(f"\n[bold]{method}[/] {escape(repr(query))} — top {what}:")
        for item in _first_list(result)[:3]:
            console.print(f"  • {escape(_label(item))}", no_wrap=True, overflow="ellipsis")
    if "knowledge_get_changes" in REGISTRY:
        since, until = CHANGES
        changes = await dispatch(
            engine,
            "knowledge_get_changes",
            {
                "since": f"{since}T00:00:00Z",
                "until": f"{until}T00:00:00Z",
                "group_ids": [GROUP],
                "num_results": 10,
            },
        )
        console.print(
            f"\n[bold]knowledge_get_changes[/] what became true or ended from {since} to {until}:"
        )
        for entry in changes["changes"]:
            console.print(
                escape(f"  {entry['at'][:10]} {entry['kind']:<8} {_label(entry['fact'])}"),
                no_wrap=True,
                overflow="ellipsis",
            )
    else:
        edges = await dispatch(engine, "knowledge_get_edges_by_group", {"group_ids": [GROUP]})
        ended = [e for e in edges["edges"] if e["invalid_at"]]
        console.print(f"\n{len(ended)} facts superseded (kept as history, not deleted)")


async def _snapshot(engine: Engine) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    nodes = await dispatch(engine, "knowledge_get_nodes_by_group", {"group_ids": [GROUP]})
    edges = await dispatch(engine, "knowledge_get_edges_by_group", {"group_ids": [GROUP]})
    episodes = await dispatch(engine, "knowledge_get_episodes", {"group_id": GROUP, "last_n": 1000})
    return nodes, edges, episodes


def _same(a: dict[str, Any], b: dict[str, Any], key: str) -> bool:
    return sorted(map(json.dumps, a[key])) == sorted(map(json.dumps, b[key]))


def _relative(path: Path) -> str:
    """`path` as a user would type it here: relative to the working directory when inside it."""
    try:
        return str(path.absolute().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def lcg_command() -> str:
    """How this shell can run lcg again: `lcg` when that name resolves to the running script,
    else the script's own path (`.venv/bin/lcg` after `make demo` without an activated venv),
    else `python -m lcg.cli` with this interpreter."""
    script = Path(sys.argv[0])
    found = shutil.which("lcg")
    if script.name == "lcg":
        if found is not None and Path(found).resolve() == script.resolve():
            return "lcg"
        return _relative(script)
    if found is not None:
        return "lcg"
    return f"{_relative(Path(sys.executable))} -m lcg.cli"


_STORE_NAMES = {"ladybug": "LadybugDB", "kuzu": "Kuzu"}


def run_demo(directory: Path, console: Console, *, articles: int = ARTICLES) -> None:
    """Reset `directory`, ingest the first `articles` demo articles there, show the graph."""
    if directory.exists():
        shutil.rmtree(directory)
    settings = _settings(directory)
    if settings.extractor == "llm" and plan_llm(settings) is None:
        # Nothing configured: the demo still runs, offline, and says so.
        settings = _settings(directory, extractor="heuristic")
    # Chosen once for both engines below: a second choice would load (and warn) again.
    embedder = select_embedder(settings)
    engine = open_engine(settings, embedder=embedder)
    try:
        console.print(
            f"[bold]lcg demo[/] — workspace {escape(str(directory))}/: "
            f"{_STORE_NAMES.get(settings.embedded_store, settings.embedded_store)} + JSONL WAL, "
            f"{escape(engine.parts.embedder.identity.model)} embeddings, "
            f"{escape(_extractor_line(engine))}"
        )
        took = anyio.run(_ingest, engine, _articles(articles), console)
        nodes, edges, episodes = anyio.run(_snapshot, engine)
        current = sum(1 for e in edges["edges"] if e["invalid_at"] is None)
        table = Table(title=f"group '{GROUP}' after {took:.1f} s", title_justify="left")
        for col in ("episodes", "entities", "facts", "currently valid facts"):
            table.add_column(col, justify="right")
        table.add_row(
            str(episodes["count"]), str(nodes["count"]), str(edges["count"]), str(current)
        )
        console.print(table)
        anyio.run(_queries, engine, console)
        anyio.run(show_time, engine, console)
    finally:
        engine.close()

    console.print("\n[bold]The WAL is the source of truth:[/] deleting the database, reopening ...")
    delete_database_files(settings.db_path)
    started = time.perf_counter()
    engine = open_engine(settings, embedder=embedder)
    try:
        reopened = time.perf_counter() - started
        nodes2, edges2, episodes2 = anyio.run(_snapshot, engine)
    finally:
        engine.close()
    same = (
        _same(nodes, nodes2, "nodes")
        and _same(edges, edges2, "edges")
        and _same(episodes, episodes2, "episodes")
    )
    verdict = "[green]identical[/]" if same else "[red]DIFFERENT[/]"
    console.print(
        f"rebuilt {nodes2['count']} entities, {edges2['count']} facts, {episodes2['count']} "
        f"episodes from the WAL in {reopened:.1f} s: {verdict}"
    )
    if not same:
        raise SystemExit(1)
    lcg = lcg_command()
    console.print(
        escape(
            f"\nTry: {lcg} --home {directory} status   |   LCG_HOME={directory} {lcg} mcp   "
            f"(the articles: examples/demo/README.md)"
        ),
        highlight=False,
    )
