"""Supersession precision and recall of the offline heuristic extractor; prints one JSON object.

    python bench/offline_extraction.py [--set examples/changelog/eval.jsonl] [--details]

The evaluation set is a hand-written dated changelog (examples/changelog/eval.jsonl): scenarios
in which people change roles, teams and managers, a service moves databases and clouds, a
repository changes owner and language, a deadline moves — and additive facts that must retire
nothing. Each scenario lists, by hand, the sentences whose facts must end and the date they end.
It is split into a `dev` part (the rules were written against it) and a `heldout` part (written
at the same time, not used to write the rules); both are reported.

Each scenario is ingested into its own group of a fresh workspace with `LCG_EXTRACTOR=heuristic`
(no model) through `knowledge_add_episode`, two ways: `per_entry`, one episode per entry with
`reference_time` = the entry's date; and `whole_text`, the scenario as one dated changelog text
(a `## YYYY-MM-DD` heading per entry) in one episode. A *predicted* supersession is a fact of
the group that ended (`invalid_at` set: retired by a later episode, or stored already ended by a
later fact of its own episode), keyed by (sentence, end date). Precision = correct / predicted,
recall = correct / expected, over all scenarios of a split.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from lcg import Settings, open_engine
from lcg.engine import Engine
from lcg.service.registry import dispatch

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SET = ROOT / "examples" / "changelog" / "eval.jsonl"


async def run_scenario(
    engine: Engine, group: str, scenario: dict[str, Any], whole: bool
) -> set[tuple[str, str]]:
    entries = scenario["entries"]
    if whole:
        text = "\n".join(f"## {e['date']}\n- {e['text']}" for e in entries)
        entries = [{"date": entries[-1]["date"], "text": text}]
    for i, entry in enumerate(entries):
        await dispatch(
            engine,
            "knowledge_add_episode",
            {
                "name": f"{scenario['scenario']} {i}",
                "episode_body": entry["text"],
                "reference_time": f"{entry['date']}T00:00:00Z",
                "group_id": group,
            },
        )
    rows = await dispatch(
        engine,
        "knowledge_query_cypher",
        {
            "query": f"MATCH (f:Fact) WHERE f.group_id = '{group}' AND f.invalid_at IS NOT NULL "
            "RETURN f.fact, f.invalid_at"
        },
    )
    return {(text, str(ended)[:10]) for text, ended in rows["rows"]}


def score(predicted: set[tuple[str, ...]], expected: set[tuple[str, ...]]) -> dict[str, Any]:
    correct = len(predicted & expected)
    return {
        "expected": len(expected),
        "predicted": len(predicted),
        "correct": correct,
        "precision": round(correct / len(predicted), 3) if predicted else None,
        "recall": round(correct / len(expected), 3) if expected else None,
    }


async def evaluate(
    engine: Engine, scenarios: list[dict[str, Any]], details: bool, whole: bool
) -> dict[str, Any]:
    splits: dict[str, tuple[set[tuple[str, ...]], set[tuple[str, ...]]]] = {}
    misses: list[dict[str, Any]] = []
    for n, scenario in enumerate(scenarios):
        predicted = await run_scenario(engine, f"eval-{'w' if whole else 'e'}{n}", scenario, whole)
        expected = {(x["fact"], x["ended"]) for x in scenario["expected_superseded"]}
        pred, exp = splits.setdefault(scenario["split"], (set(), set()))
        pred |= {(scenario["scenario"], *p) for p in predicted}
        exp |= {(scenario["scenario"], *e) for e in expected}
        if details and predicted != expected:
            misses.append(
                {
                    "split": scenario["split"],
                    "scenario": scenario["scenario"],
                    "missed": sorted(expected - predicted),
                    "wrong": sorted(predicted - expected),
                }
            )
    out: dict[str, Any] = {}
    for split, (pred, exp) in splits.items():
        out[split] = score(pred, exp)
    every: tuple[set[tuple[str, ...]], set[tuple[str, ...]]] = (set(), set())
    for pred, exp in splits.values():
        every[0].update(pred)
        every[1].update(exp)
    out["all"] = score(*every)
    if details:
        out["mismatches"] = misses
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", type=Path, default=DEFAULT_SET)
    parser.add_argument("--details", action="store_true", help="list each scenario's misses")
    parser.add_argument("--split", help="only this split (dev or heldout); default: both")
    args = parser.parse_args()
    lines = args.set.read_text(encoding="utf-8").splitlines()
    scenarios = [json.loads(line) for line in lines if line.strip()]
    scenarios = [s for s in scenarios if args.split in (None, s["split"])]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings.for_home(Path(tmp) / ".lcg", extractor="heuristic", embedder="hash")
        engine = open_engine(settings)
        try:
            per_entry = anyio.run(evaluate, engine, scenarios, args.details, False)
            whole_text = anyio.run(evaluate, engine, scenarios, args.details, True)
        finally:
            engine.close()
    result = {
        "bench": "offline_extraction",
        "extractor": "heuristic",
        "set": str(args.set.relative_to(ROOT) if args.set.is_relative_to(ROOT) else args.set),
        "scenarios": len(scenarios),
        "per_entry": per_entry,
        "whole_text": whole_text,
        "seconds": round(time.perf_counter() - started, 2),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
