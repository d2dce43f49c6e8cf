"""What every benchmark shares: timing, percentiles, resident memory, and the JSON envelope
(the machine and its load average) a benchmark prints its figures in.

A benchmark script imports it as `common` (a script's own folder is first on `sys.path`):

    from common import emit, latency_ms, percentile, timed

    with timed() as t:
        work()
    emit("my_bench", {"work_s": round(t.seconds, 3)}, params={"rows": 1000})

The machine is 2 cores shared with other jobs: report medians and ratios, and the load
average the envelope records beside them.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "Timing",
    "cpu_seconds",
    "emit",
    "envelope",
    "latency_ms",
    "machine",
    "ms",
    "peak_rss_mb",
    "percentile",
    "percentile_linear",
    "percentile_ms",
    "rss_kb",
    "rss_mb",
    "timed",
]


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank percentile, `q` in 0..1: the value at rank round(q * (n - 1)) of the
    sorted values (q=0.5 of an odd count is the median). Raises ValueError on no values."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def percentile_linear(values: Sequence[float], q: float) -> float:
    """The percentile interpolated linearly between the two nearest ranks (numpy's default
    method), `q` in 0..1, for the scripts whose figures were published that way. Raises
    ValueError on no values."""
    if not values:
        raise ValueError("percentile of no values")
    return float(np.percentile(np.asarray(values, dtype=np.float64), q * 100))


def ms(seconds: float) -> float:
    """Seconds as milliseconds, rounded to 0.01 ms."""
    return round(seconds * 1000, 2)


def percentile_ms(seconds: Sequence[float], q: float) -> float:
    """`percentile` of durations in seconds, in milliseconds."""
    return ms(percentile(seconds, q))


def latency_ms(seconds: Sequence[float]) -> dict[str, float]:
    """p50 and p95 of durations in seconds, in milliseconds, with the count (`{"n": 0}` for
    none)."""
    if not seconds:
        return {"n": 0}
    return {
        "p50_ms": percentile_ms(seconds, 0.5),
        "p95_ms": percentile_ms(seconds, 0.95),
        "n": len(seconds),
    }


@dataclass
class Timing:
    """What `timed` measured: wall and CPU seconds of this process (set when the block ends)."""

    seconds: float = 0.0
    cpu_seconds: float = 0.0


@contextmanager
def timed() -> Iterator[Timing]:
    """Wall time (`perf_counter`) and this process's CPU time (`process_time`) of a block."""
    out = Timing()
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        yield out
    finally:
        out.seconds = time.perf_counter() - wall
        out.cpu_seconds = time.process_time() - cpu


def rss_mb() -> float:
    """This process's resident memory now, in MiB (the peak where /proc is missing)."""
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def peak_rss_mb() -> float:
    """This process's peak resident memory so far, in MiB, unrounded (`ru_maxrss`)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def rss_kb(pid: int) -> dict[str, int]:
    """Another process's resident memory, in KiB: `VmRSS` (now) and `VmHWM` (its peak)."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("VmRSS:", "VmHWM:")):
            key, value = line.split(":", 1)
            out[key] = int(value.split()[0])
    return out


def cpu_seconds(pid: int) -> float:
    """Another process's CPU seconds so far (user + system)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def store_settings() -> dict[str, Any]:
    """Settings overrides for the embedded engine a benchmark runs on: `LCG_EMBEDDED_STORE`
    from the environment (`ladybug` or `kuzu`), so one script measures either engine; none
    when it is unset (the default engine)."""
    engine = os.environ.get("LCG_EMBEDDED_STORE")
    return {"embedded_store": engine} if engine else {}


def machine() -> dict[str, Any]:
    """Where the figures were taken: CPUs, platform, Python, and the load average (1, 5 and
    15 minutes) at the time of the call."""
    return {
        "embedded_store": os.environ.get("LCG_EMBEDDED_STORE", "default"),
        "cpus": os.cpu_count(),
        "platform": f"{platform.system()} {platform.machine()}",
        "python": platform.python_version(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def envelope(
    bench: str, results: dict[str, Any], params: dict[str, Any] | None = None
) -> dict[str, Any]:
    """One benchmark's output: its name, when it finished, the machine (with the load average
    at the end), the parameters it ran with, and its results."""
    return {
        "bench": bench,
        "finished": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "params": params or {},
        "results": results,
    }


def emit(bench: str, results: dict[str, Any], params: dict[str, Any] | None = None) -> None:
    """Print `envelope(...)` as one JSON object on stdout."""
    print(json.dumps(envelope(bench, results, params), indent=2, default=str))
