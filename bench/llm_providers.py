"""Benchmark the LLM provider layer against the scripted server (no model, no network).

    python bench/llm_providers.py [--calls 32] [--concurrency 8] [--latency 1.0]

Measures, over HTTP and a Unix socket: wall time of `calls` completions with `concurrency` in
flight and a simulated per-call latency (ideal: calls / concurrency x latency), and the
per-call overhead of the provider with no latency; then cassette replay throughput and the time
to salvage a truncated 100 KB reply. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from lcg.extraction.cassette import CassetteRecorder, CassetteReplayer
from lcg.extraction.jsonrepair import parse_json_object
from lcg.extraction.llm import LlmClient, LlmRequest
from lcg.extraction.providers.openai_compat import OpenAICompatProvider
from lcg.testing.scripted_llm import ScriptedLlmServer

ANSWER = json.dumps({"entities": [{"name": f"Entity {i}", "type": "Thing"} for i in range(20)]})


def request(i: int) -> LlmRequest:
    return LlmRequest(
        stage="entities",
        system="Extract entities.",
        user=f"Chunk {i}: some text about things.",
        schema={"type": "object", "properties": {"entities": {"type": "array"}}},
        schema_name="entities",
        max_tokens=1024,
    )


async def run(client: LlmClient, calls: int, concurrency: int) -> float:
    limiter = anyio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with limiter:
            response = await client.complete(request(i))
            assert response.data is not None

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for i in range(calls):
            tg.start_soon(one, i)
    return time.perf_counter() - started


async def overhead_ms(client: LlmClient, calls: int) -> float:
    times = []
    for i in range(calls):
        started = time.perf_counter()
        await client.complete(request(i))
        times.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(times), 2)


def provider(server: ScriptedLlmServer, transport: str) -> OpenAICompatProvider:
    if transport == "http":
        return OpenAICompatProvider(base_url=server.url)
    return OpenAICompatProvider(uds_path=str(server.uds_path))


async def main(args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {
        "calls": args.calls,
        "concurrency": args.concurrency,
        "latency_s": args.latency,
        "ideal_wall_s": round(args.calls / args.concurrency * args.latency, 2),
    }
    with tempfile.TemporaryDirectory() as tmp:
        sock = Path(tmp) / "llm.sock"
        with ScriptedLlmServer(lambda body: ANSWER, uds_path=sock) as server:
            for transport in ("http", "uds"):
                client = provider(server, transport)
                server.latency_s = args.latency
                wall = await run(client, args.calls, args.concurrency)
                server.latency_s = 0.0
                result[transport] = {
                    "wall_s": round(wall, 2),
                    "call_overhead_ms_p50": await overhead_ms(client, 100),
                }
            cassette = Path(tmp) / "c.jsonl"
            recorder = CassetteRecorder(provider(server, "uds"), cassette)
            await run(recorder, 500, 16)
        replayer = CassetteReplayer(cassette)
        started = time.perf_counter()
        await run(replayer, 500, 16)
        result["replay_calls_per_s"] = round(500 / (time.perf_counter() - started))
    big = json.dumps({"entities": [{"name": f"E{i}", "summary": "x" * 80} for i in range(1000)]})
    started = time.perf_counter()
    salvaged = parse_json_object(big[:100_000])
    result["salvage_100kb_ms"] = round((time.perf_counter() - started) * 1000, 1)
    result["salvaged_items"] = len((salvaged.data or {}).get("entities", []))
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=32)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--latency", type=float, default=1.0)
    print(json.dumps(anyio.run(main, parser.parse_args())))
