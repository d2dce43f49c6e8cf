"""How long a write acknowledged by one `lcg serve` takes to be found through another serving
the same FalkorDB (each process follows the group streams into its search
index, `lcg.engine.follow`).

`follow_delay` writes entities through one service and polls `knowledge_find_entities` on the
other until each is found; tests and `bench/server_mode.py` call it with two clients (an
`RpcClient` of each service's socket).
"""

from __future__ import annotations

import statistics
import time
import uuid
from typing import Any, Protocol

__all__ = ["Caller", "follow_delay"]


class Caller(Protocol):
    """A client of one service (`lcg.service.rpc.client.RpcClient`, say): method, params ->
    result."""

    def call(self, method: str, params: Any = None) -> Any: ...


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def follow_delay(
    writer: Caller,
    reader: Caller,
    *,
    group: str = "follow-delay",
    writes: int = 50,
    timeout_s: float = 10.0,
    poll_s: float = 0.001,
) -> dict[str, Any]:
    """Assert `writes` entities through `writer` (one at a time) and, after each is
    acknowledged, poll `reader`'s `knowledge_find_entities` until it returns it: the delays
    in milliseconds (p50, p95, max; `missed`: writes not found within `timeout_s`)."""
    tag = uuid.uuid4().hex[:8]
    delays: list[float] = []
    missed = 0
    for i in range(writes):
        name = f"Follow{tag}n{i}"
        writer.call("knowledge_assert_entity", {"name": name, "group_id": group})
        acked = time.perf_counter()
        deadline = acked + timeout_s
        while True:
            found = reader.call(
                "knowledge_find_entities", {"query": name, "group_ids": [group], "num_results": 5}
            )
            if any(n.get("name") == name for n in found.get("nodes", [])):
                delays.append((time.perf_counter() - acked) * 1000)
                break
            if time.perf_counter() >= deadline:
                missed += 1
                break
            time.sleep(poll_s)
    return {
        "writes": writes,
        "found": len(delays),
        "missed": missed,
        "p50_ms": round(statistics.median(delays), 2) if delays else None,
        "p95_ms": round(_percentile(delays, 0.95), 2) if delays else None,
        "max_ms": round(max(delays), 2) if delays else None,
    }
