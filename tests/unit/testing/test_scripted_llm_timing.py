"""The scripted LLM server's own record of the time it spends per request (bench/ingest.py
subtracts exactly this from a call's wall time, and nothing of lcg's client side)."""

from __future__ import annotations

import time

import httpx2

from lcg.testing.scripted_llm import ErrorReply, ScriptedLlmServer, TextReply


def test_service_time_is_recorded_per_post_and_covers_the_latency() -> None:
    replies = [TextReply("slow", latency_s=0.2), "fast", ErrorReply(500, "broken")]
    with ScriptedLlmServer(replies) as server:
        assert server.service_s == [] and server.service_total_s == 0.0
        walls = []
        for _ in range(3):
            started = time.perf_counter()
            httpx2.post(f"{server.url}/chat/completions", json={"messages": []}, timeout=10)
            walls.append(time.perf_counter() - started)
        httpx2.get(f"{server.url}/models", timeout=10)  # a GET is not a model call
        # A reply is written before its time is recorded: wait for the third record.
        deadline = time.monotonic() + 5
        while len(server.service_s) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        served = list(server.service_s)
    assert len(served) == 3
    slow, fast, error = served
    assert 0.2 <= slow <= walls[0]  # the latency is the server's; the round trip is longer
    assert 0 < fast < 0.2 and fast <= walls[1]
    assert 0 < error <= walls[2]
    assert server.service_total_s == sum(served)
