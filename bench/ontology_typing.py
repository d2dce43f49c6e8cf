"""Benchmark the typing maintenance passes on one group of N facts.

    python bench/ontology_typing.py [--facts 2000]

Builds a group of N facts between N/5 entities (one WAL batch, hash embedder), with an ontology
of six relation types, then times `knowledge_canonicalize_relations` (dry run, then applied),
`knowledge_reprocess_relation_types` and `knowledge_reprocess_entity_types` (an in-process
scripted LlmClient answering instantly, so the time is lcg's own: reads, batching, WAL writes),
and a rebuild of the group from its WAL. Prints one JSON object: seconds per pass, facts/s, and
the WAL lines each pass wrote.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio

from lcg import Engine, Entity, Episode, EpisodeCommit, Fact, Settings, open_engine
from lcg.admin import rebuild
from lcg.extraction.llm import LlmRequest, LlmResponse
from lcg.service.registry import dispatch

ONTOLOGY = """
mode: open
entity_types: [{name: Person}, {name: Place}, {name: Document}]
relation_types:
  - {name: AUTHORED, description: a person wrote a document, aliases: [WROTE]}
  - {name: LIVES_IN, description: a person lives in a place, cardinality: one}
  - {name: VISITED, keywords: [visit]}
  - {name: KNOWS, description: two people know each other}
  - {name: CITES, aliases: [REFERENCES]}
  - {name: LOCATED_IN, description: a place is inside another place}
"""
PREDICATES = ("WROTE", "LIVES_IN", "visited", "KNOWS", "REFERENCES", "LIKES", "A → B")
GROUP = "bench"


class InstantTypes:
    """Answers every numbered item with a fixed type, immediately."""

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.calls = 0

    @property
    def name(self) -> str:
        return "bench:instant"

    async def complete(self, request: LlmRequest) -> LlmResponse:
        self.calls += 1
        ids = [json.loads(x)["id"] for x in request.user.splitlines() if x.startswith('{"id"')]
        data = {"classifications": [{"id": i, "type": self.answer} for i in ids]}
        return LlmResponse(data=data, text="", model="instant")


def build(engine: Engine, facts: int) -> None:
    when = datetime(2026, 1, 1, tzinfo=UTC)
    people = [
        Entity(str(uuid.uuid4()), GROUP, f"Person {i}", created_at=when)
        for i in range(max(2, facts // 5))
    ]
    rows = [
        Fact(
            str(uuid.uuid4()),
            GROUP,
            people[i % len(people)].uuid,
            people[(i * 7 + 1) % len(people)].uuid,
            PREDICATES[i % len(PREDICATES)],
            f"Person {i % len(people)} and fact number {i}",
            created_at=when,
        )
        for i in range(facts)
    ]
    episode = Episode(str(uuid.uuid4()), GROUP, "seed", "seed", created_at=when, valid_at=when)
    anyio.run(engine.commit_episode, EpisodeCommit(GROUP, episode, people, rows))


async def timed(engine: Engine, method: str, params: dict[str, Any]) -> dict[str, Any]:
    before = engine.parts.wal.bounds(GROUP).max_seq or 0
    start = time.perf_counter()
    result = await dispatch(engine, method, {"group_id": GROUP, **params})
    seconds = time.perf_counter() - start
    after = engine.parts.wal.bounds(GROUP).max_seq or 0
    return {"seconds": round(seconds, 3), "wal_lines": after - before, "result": result}


async def passes(engine: Engine, facts: int, llm: InstantTypes) -> dict[str, Any]:
    """The passes, `llm` being the model `engine` was opened with."""
    out: dict[str, Any] = {}
    dry = await timed(engine, "knowledge_canonicalize_relations", {"dry_run": True})
    out["canonicalize_dry_run"] = {k: dry[k] for k in ("seconds", "wal_lines")}
    applied = await timed(engine, "knowledge_canonicalize_relations", {})
    out["canonicalize"] = {
        "seconds": applied["seconds"],
        "wal_lines": applied["wal_lines"],
        "facts_per_s": round(facts / applied["seconds"]),
        "mapped_pct": applied["result"]["mapped_pct"],
    }
    again = await timed(engine, "knowledge_canonicalize_relations", {})
    out["canonicalize_rerun"] = {k: again[k] for k in ("seconds", "wal_lines")}
    llm.answer, llm.calls = "KNOWS", 0
    rel = await timed(engine, "knowledge_reprocess_relation_types", {"scope": "all"})
    out["reprocess_relation_types"] = {
        "seconds": rel["seconds"],
        "wal_lines": rel["wal_lines"],
        "llm_calls": llm.calls,
        "facts_per_s": round(facts / rel["seconds"]),
    }
    llm.answer = "Person"
    ent = await timed(engine, "knowledge_reprocess_entity_types", {"scope": "all"})
    out["reprocess_entity_types"] = {
        "seconds": ent["seconds"],
        "wal_lines": ent["wal_lines"],
        "reclassified": ent["result"]["reclassified_count"],
    }
    start = time.perf_counter()
    await rebuild.rebuild_from_wal(engine, GROUP, force_clear=True)
    out["rebuild_seconds"] = round(time.perf_counter() - start, 3)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / ".lcg"
        home.mkdir()
        (home / "ontology.yaml").write_text(ONTOLOGY, encoding="utf-8")
        llm = InstantTypes("KNOWS")
        engine = open_engine(Settings.for_home(home, embedder="hash"), llm=llm)
        try:
            build(engine, args.facts)
            result = anyio.run(passes, engine, args.facts, llm)
        finally:
            engine.close()
    print(json.dumps({"facts": args.facts, **result}))


if __name__ == "__main__":
    main()
