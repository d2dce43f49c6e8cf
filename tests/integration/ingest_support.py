"""Helpers for ingestion tests: scripted answers, WAL snapshots, graph reads."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from lcg import Engine
from lcg.engine import exclusive
from lcg.service.registry import dispatch
from lcg.testing.heuristic_llm import prompt_parts


def entities(*items: dict[str, Any]) -> str:
    return json.dumps({"entities": list(items)})


def facts(*items: dict[str, Any]) -> str:
    return json.dumps({"facts": list(items)})


def fact(source: str, predicate: str, target: str, text: str, **more: Any) -> dict[str, Any]:
    return {"source": source, "predicate": predicate, "target": target, "fact": text, **more}


def existing_index(body: dict[str, Any], needle: str) -> int:
    """The index the facts prompt gave the existing fact whose line contains `needle`."""
    _, user = prompt_parts(body)
    section = user.split("EXISTING FACTS:\n", 1)[1].split("\nREFERENCE TIME:", 1)[0]
    for line in section.splitlines():
        m = re.match(r"\[(\d+)\] (.*)", line)
        if m and needle in m.group(2):
            return int(m.group(1))
    raise AssertionError(f"no existing fact with {needle!r} in the prompt:\n{section}")


# A one-sentence episode and the model's answer to it, as the entities and facts calls return it.
ARMSTRONG_TEXT = "Neil Armstrong commanded Apollo 11."
ARMSTRONG_ENTITIES = entities(
    {"name": "Neil Armstrong", "type": "Person", "summary": "Commander of Apollo 11."},
    {"name": "Apollo 11", "type": "Mission", "summary": "First crewed Moon landing."},
)
ARMSTRONG_FACTS = facts(
    fact(
        "Neil Armstrong",
        "COMMANDED",
        "Apollo 11",
        ARMSTRONG_TEXT,
        valid_at="1969-07-16T13:32:00Z",
    )
)


def wal_bytes(engine: Engine) -> dict[str, bytes]:
    root = engine.settings.wal_dir
    if not root.exists():
        return {}
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.jsonl"))}


def wal_ops(engine: Engine, group: str = "liminis") -> list[dict[str, Any]]:
    """The group's WAL lines as JSON: its files, or the server's stream (server mode)."""
    store = exclusive.store(engine)
    if store.keeps_wal:
        return [
            {"seq": r.seq, "ts": r.ts, "op": r.op, "data": r.data}
            for r in store.stream_records(group)
        ]
    out: list[dict[str, Any]] = []
    directory: Path = engine.settings.wal_dir / group
    for path in sorted(directory.glob("*.jsonl")):
        out += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return out


async def graph(
    engine: Engine, group: str = "liminis"
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(entities by name, all edges) of a group."""
    nodes = await dispatch(engine, "knowledge_get_nodes_by_group", {"group_ids": [group]})
    edges = await dispatch(engine, "knowledge_get_edges_by_group", {"group_ids": [group]})
    return {n["name"]: n for n in nodes["nodes"]}, edges["edges"]


def chunk(text: str, chunk_id: str, when: str, **more: Any) -> dict[str, Any]:
    return {
        "chunk_text": text,
        "chunk_id": chunk_id,
        "source_file": "notes.md",
        "reference_time": when,
        **more,
    }
