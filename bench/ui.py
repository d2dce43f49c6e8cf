"""Benchmark the browser UI on a 2,000-entity graph in headless Chromium; prints one JSON object.

    python bench/ui.py [--entities 2000] [--facts 4000] [--runs 5]

Builds a fresh workspace (entities typed among five labels, facts with preferential attachment so
there are hubs, one in twenty superseded), serves it with the HTTP API (uvicorn on loopback, the
same `HttpService` as `lcg serve --http`) and opens the UI in Debian's /usr/bin/chromium through
Playwright. Initial render = navigation start to the `lcg-first-frame` performance mark (the
first canvas frame with nodes: page load, API calls, first paint). Also reported: one layout
tick and one full redraw at that size (what keeps dragging and zooming interactive), and the
same first-frame time for an `lcg export-html` file of the whole graph opened from disk.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
from playwright.sync_api import sync_playwright

from lcg import Engine, Settings, open_engine
from lcg.engine import EpisodeCommit, Invalidation
from lcg.models import Entity, Episode, Fact
from lcg.service.htmlexport import render_html
from lcg.service.http import EngineBackend, HttpService
from lcg.service.registry import dispatch

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TYPES = ("Person", "Company", "Project", "Place", "Document")
GROUP = "liminis"
BATCH = 250


async def seed(engine: Engine, n_entities: int, n_facts: int, rng: random.Random) -> None:
    base = datetime(2020, 1, 1, tzinfo=UTC)
    entities = [
        Entity(
            uuid=f"e-{i:05d}",
            group_id=GROUP,
            name=f"{TYPES[i % len(TYPES)]} {i}",
            labels=("Entity", TYPES[i % len(TYPES)]),
            summary=f"Entity number {i}.",
            created_at=base,
        )
        for i in range(n_entities)
    ]
    targets: list[int] = [0]  # preferential attachment: a fact's target is drawn from past ends
    facts: list[Fact] = []
    for k in range(n_facts):
        src = k % n_entities
        dst = rng.choice(targets) if rng.random() < 0.7 else rng.randrange(n_entities)
        if dst == src:
            dst = (src + 1) % n_entities
        targets += [src, dst]
        facts.append(
            Fact(
                uuid=f"f-{k:06d}",
                group_id=GROUP,
                source_uuid=entities[src].uuid,
                target_uuid=entities[dst].uuid,
                name=rng.choice(("WORKS_WITH", "PART_OF", "MENTIONS", "LOCATED_IN")),
                fact=f"{entities[src].name} relates to {entities[dst].name}",
                valid_at=base + timedelta(days=k % 1000),
                created_at=base + timedelta(days=k % 1000),
            )
        )
    for start in range(0, n_entities, BATCH):
        ents = entities[start : start + BATCH]
        await engine.commit_episode(
            EpisodeCommit(
                GROUP,
                Episode(uuid=f"ep-{start}", group_id=GROUP, name=f"batch {start}", content="seed"),
                ents,
                mentions=[e.uuid for e in ents],
            )
        )
    for start in range(0, n_facts, BATCH):
        batch = facts[start : start + BATCH]
        # Supersede one in twenty of the facts committed before this batch.
        superseded = [
            Invalidation(f.uuid, f.valid_at + timedelta(days=30), f.created_at + timedelta(days=31))
            for f in facts[max(0, start - BATCH) : start : 20]
            if f.valid_at is not None and f.created_at is not None
        ]
        await engine.commit_episode(
            EpisodeCommit(
                GROUP,
                Episode(uuid=f"ep-f-{start}", group_id=GROUP, name="facts", content="seed"),
                [],
                batch,
                superseded,
            )
        )


def first_frame(page: Any, url: str) -> float:
    page.goto(url)
    page.wait_for_function(
        "() => performance.getEntriesByName('lcg-first-frame').length > 0", timeout=60_000
    )
    return float(page.evaluate("performance.getEntriesByName('lcg-first-frame')[0].startTime"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--entities", type=int, default=2000)
    parser.add_argument("--facts", type=int, default=4000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    rng = random.Random(7)
    with tempfile.TemporaryDirectory(prefix="lcg-bench-ui-") as tmp:
        settings = Settings.for_home(Path(tmp) / ".lcg")
        engine = open_engine(settings)
        try:
            started = time.perf_counter()
            anyio.run(seed, engine, args.entities, args.facts, rng)
            seed_s = time.perf_counter() - started
            service = HttpService(settings, EngineBackend(engine), port=0, scopes="read")
            service.bind()
            server = threading.Thread(target=anyio.run, args=(service.serve,), daemon=True)
            server.start()
            try:
                result = measure(service, engine, args)
            finally:
                service.stop()
                server.join(30)
        finally:
            engine.close()
    result["seed_seconds"] = round(seed_s, 2)
    print(json.dumps(result))


def measure(service: HttpService, engine: Engine, args: argparse.Namespace) -> dict[str, Any]:
    async def everything() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        nodes = await dispatch(engine, "knowledge_get_nodes_by_group", {})
        edges = await dispatch(engine, "knowledge_get_edges_by_group", {})
        return nodes["nodes"], edges["edges"]

    nodes, edges = anyio.run(everything)
    started = time.perf_counter()
    page_html, summary = render_html(nodes, edges, limit=len(nodes))
    export_s = time.perf_counter() - started
    with tempfile.TemporaryDirectory(prefix="lcg-bench-export-") as tmp:
        exported = Path(tmp) / "graph.html"
        exported.write_text(page_html, encoding="utf-8")
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            try:
                context = browser.new_context(viewport={"width": 1400, "height": 900})
                renders: list[float] = []
                drawn: dict[str, Any] = {}
                for _ in range(args.runs):
                    page = context.new_page()
                    renders.append(first_frame(page, service.browser_url))  # the printed address
                    drawn = page.evaluate(
                        """() => {
                          const v = lcgApp.view(), c = v.canvas.dataset;
                          let t = performance.now();
                          for (let i = 0; i < 10; i++) v.tick();
                          const tick = (performance.now() - t) / 10;
                          t = performance.now();
                          for (let i = 0; i < 10; i++) v.draw();
                          const draw = (performance.now() - t) / 10;
                          return {nodes: +c.nodes, edges: +c.edges, superseded: +c.superseded,
                                  tick_ms: tick, draw_ms: draw};
                        }"""
                    )
                    page.close()
                export_renders = []
                for _ in range(args.runs):
                    page = context.new_page()
                    export_renders.append(first_frame(page, exported.as_uri()))
                    page.close()
            finally:
                browser.close()
        return {
            "benchmark": "ui",
            "entities": args.entities,
            "facts": args.facts,
            "runs": args.runs,
            # The first run is the first page load against a freshly started server.
            "initial_render_ms_runs": [round(r, 1) for r in renders],
            "initial_render_ms_median": round(statistics.median(renders), 1),
            "initial_render_ms_max": round(max(renders), 1),
            "target_ms": 2000,
            "within_target": max(renders) < 2000,
            "nodes_drawn": drawn["nodes"],
            "edges_drawn": drawn["edges"],
            "superseded_drawn": drawn["superseded"],
            "layout_tick_ms": round(drawn["tick_ms"], 2),
            "redraw_ms": round(drawn["draw_ms"], 2),
            "export_html_seconds": round(export_s, 3),
            "export_html_bytes": len(page_html.encode()),
            "export_nodes": summary.nodes,
            "export_first_frame_ms_median": round(statistics.median(export_renders), 1),
        }


if __name__ == "__main__":
    main()
