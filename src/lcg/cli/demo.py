"""`lcg demo`: build a small bi-temporal graph from examples/apollo13.json and show what it knows.

It uses the embedded defaults only (Kuzu on disk, hash embedder, no model, no network): the
episodes carry hand-written extraction results and go through the engine's atomic episode
commit, one of them superseding an earlier fact. Then it answers "what is true now", "what was
true on a date" and "what superseded what", deletes the database and shows the WAL rebuild it
identically.
"""

from __future__ import annotations

import json
import shutil
import time
import uuid
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any

import anyio
from rich.console import Console
from rich.table import Table

from lcg.config import Settings
from lcg.engine import Engine, EpisodeCommit, Invalidation, open_engine
from lcg.models import Entity, Episode, Fact, normalize_labels
from lcg.storage.store import delete_database_files
from lcg.timeutil import now, parse_timestamp

__all__ = ["run_demo"]


def _example_path() -> Path:
    here = Path(__file__).resolve()
    for parent in here.parents:
        candidate = parent / "examples" / "apollo13.json"
        if candidate.is_file():
            return candidate
    packaged = resources.files("lcg").joinpath("examples/apollo13.json")
    return Path(str(packaged))


async def _ingest(engine: Engine, data: dict[str, Any]) -> dict[str, str]:
    group = data["group_id"]
    fact_ids: dict[str, str] = {}
    for item in data["episodes"]:
        when = parse_timestamp(item["reference_time"])
        entities: dict[str, Entity] = {}
        for spec in item["entities"]:
            existing = await engine.entity_by_name(group, spec["name"])
            summary = spec["summary"]
            if existing is not None:
                merged = " ".join(s for s in (summary, existing.summary) if s)  # newest first
                entities[spec["name"]] = Entity(
                    uuid=existing.uuid,
                    group_id=group,
                    name=existing.name,
                    labels=normalize_labels([*existing.labels, *spec["labels"]]),
                    summary=merged[:400],
                    attributes=existing.attributes,
                    created_at=existing.created_at,
                )
            else:
                entities[spec["name"]] = Entity(
                    uuid=str(uuid.uuid4()),
                    group_id=group,
                    name=spec["name"],
                    labels=normalize_labels(spec["labels"]),
                    summary=summary,
                    created_at=when,
                )
        episode = Episode(
            uuid=str(uuid.uuid4()),
            group_id=group,
            name=item["name"],
            content=item["content"],
            source="text",
            source_description=f"examples/apollo13.json:{item['name']}",
            source_file="examples/apollo13.json",
            chunk_id=item["name"],
            created_at=when,
            valid_at=when,
        )
        facts, invalidations = [], []
        for spec in item["facts"]:
            fact = Fact(
                uuid=str(uuid.uuid4()),
                group_id=group,
                source_uuid=entities[spec["source"]].uuid,
                target_uuid=entities[spec["target"]].uuid,
                name=spec["predicate"],
                fact=spec["fact"],
                relation_type=spec["predicate"],
                episodes=(episode.uuid,),
                valid_at=when,
                created_at=now(),
            )
            facts.append(fact)
            fact_ids[spec["id"]] = fact.uuid
            invalidations += [
                Invalidation(fact_ids[old], when, now()) for old in spec.get("supersedes", [])
            ]
        await engine.commit_episode(
            EpisodeCommit(
                group,
                episode,
                list(entities.values()),
                facts,
                invalidations,
                [e.uuid for e in entities.values()],
            )
        )
    return fact_ids


def _valid_at(edge: dict[str, Any], at: datetime) -> bool:
    start = parse_timestamp(edge["valid_at"]) if edge["valid_at"] else None
    end = parse_timestamp(edge["invalid_at"]) if edge["invalid_at"] else None
    return (start is None or start <= at) and (end is None or at < end)


def _facts_table(title: str, edges: list[dict[str, Any]], names: dict[str, str]) -> Table:
    table = Table(title=title, title_justify="left")
    for col in ("subject", "predicate", "object", "valid from", "valid until"):
        table.add_column(col)
    for e in sorted(edges, key=lambda e: e["valid_at"] or ""):
        table.add_row(
            names[e["source_node_uuid"]],
            e["name"],
            names[e["target_node_uuid"]],
            (e["valid_at"] or "")[:10],
            (e["invalid_at"] or "-")[:10],
        )
    return table


async def _snapshot(
    engine: Engine, group: str
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    nodes = await engine.get_nodes_by_group([group])
    edges = await engine.get_edges_by_group([group])
    episodes = await engine.get_episodes(group, 100)
    return nodes, edges, episodes


def run_demo(directory: Path, console: Console) -> None:
    """Reset `directory`, build the example graph in it, and print what the graph answers."""
    data = json.loads(_example_path().read_text(encoding="utf-8"))
    group = data["group_id"]
    if directory.exists():
        shutil.rmtree(directory)
    settings = Settings.for_home(directory.resolve())
    console.print(
        f"[bold]lcg demo[/] — workspace {directory}/ (Kuzu + JSONL WAL, hash embedder, no LLM)"
    )

    engine = open_engine(settings)
    try:
        started = time.perf_counter()
        anyio.run(_ingest, engine, data)
        took = time.perf_counter() - started
        nodes, edges, episodes = anyio.run(_snapshot, engine, group)
        status = anyio.run(engine.status)
    finally:
        engine.close()
    names = {n["uuid"]: n["name"] for n in nodes["nodes"]}
    console.print(
        f"ingested {episodes['count']} episodes in {took * 1000:.0f} ms: "
        f"{nodes['count']} entities, {edges['count']} facts; "
        f"WAL group '{group}' at seq {status['wal_groups'][group]['max_seq']} "
        f"({status['wal_groups'][group]['hydration_status']})"
    )

    current = [e for e in edges["edges"] if e["invalid_at"] is None]
    console.print(_facts_table("What is true now", current, names))
    on = parse_timestamp("1970-01-01T00:00:00Z")
    console.print(
        _facts_table(
            "What was true on 1970-01-01", [e for e in edges["edges"] if _valid_at(e, on)], names
        )
    )
    superseded = [e for e in edges["edges"] if e["invalid_at"] is not None]
    console.print(_facts_table("Superseded (kept as history, not deleted)", superseded, names))
    for old in superseded:
        for new in current:
            if new["target_node_uuid"] == old["target_node_uuid"] and new["name"] == old["name"]:
                console.print(
                    f"  '{old['fact']}' was superseded on {old['invalid_at'][:10]} by '{new['fact']}'"
                )

    console.print(
        "\n[bold]The WAL is the source of truth:[/] deleting the database and reopening ..."
    )
    delete_database_files(settings.db_path)
    started = time.perf_counter()
    engine = open_engine(settings)
    try:
        reopened = time.perf_counter() - started
        nodes2, edges2, episodes2 = anyio.run(_snapshot, engine, group)
    finally:
        engine.close()
    same = (
        sorted(map(json.dumps, nodes2["nodes"])) == sorted(map(json.dumps, nodes["nodes"]))
        and sorted(map(json.dumps, edges2["edges"])) == sorted(map(json.dumps, edges["edges"]))
        and sorted(map(json.dumps, episodes2["episodes"]))
        == sorted(map(json.dumps, episodes["episodes"]))
    )
    verdict = "[green]identical[/]" if same else "[red]DIFFERENT[/]"
    console.print(
        f"rebuilt {nodes2['count']} entities, {edges2['count']} facts, "
        f"{episodes2['count']} episodes from the WAL in {reopened * 1000:.0f} ms: {verdict}"
    )
    if not same:
        raise SystemExit(1)
    console.print(
        f"\nTry: lcg --home {directory} status   |   lcg --home {directory} cypher "
        '"MATCH (a:Entity)-[:RELATES_TO]->(f:Fact)-[:RELATES_TO]->(b:Entity) RETURN a.name, f.name, b.name"'
    )
