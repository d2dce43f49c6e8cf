"""LLM cassettes: record every call of a provider to JSONL, replay it later without any model.

`LCG_RECORD_LLM=path` wraps the configured provider in `CassetteRecorder`; `LCG_REPLAY_LLM=path`
replaces every provider with `CassetteReplayer` (setting both is a `ConfigError`). One line per
call:

    {"v": 1, "key": "<sha256>", "stage": "entities", "model": "claude-sonnet-5-5",
     "request": {"system", "user", "schema", "schema_name", "max_tokens", "temperature",
                 "prompt_version"},
     "response": {"text", "data", "model", "usage": {...}, "finish_reason", "truncated",
                  "repairs", "mode"}}

The key is a SHA-256 over the rendered request (`cassette_key`) and deliberately leaves the
model out: a cassette recorded against one model replays under any configuration, and changing
a prompt, schema or token budget is what invalidates it. Identical keys replay first-in,
first-out, so repeated identical calls (and a truncation retry's doubled budget, which has its
own key) come back in recorded order. A call with no recorded answer raises `CassetteMissError`.

Calls that fail while recording go to `<cassette>.failures.jsonl` (rotated to `.1` past 20 MB).
API keys never reach a cassette: only the rendered prompts and the reply are written.

An episode ingested without a `reference_time` is dated "now", and that time is in its prompts,
so the key of every call it makes depends on when it was recorded. The cassette therefore also
records the defaulted time itself, one clock line per episode:

    {"v": 1, "clock": "<sha256 of group, name and body>", "reference_time": "<RFC 3339>"}

and on replay the same episode gets the recorded time back instead of a new "now"
(`default_reference_time`). The replayed prompts are then the recorded ones byte for byte, and
so is every timestamp the episode writes: the replayed graph is the recorded graph. (Keying the
calls on prompts with the time blanked out would make replay hit, but would date the replayed
episode at replay time, a different graph, and would let a cassette answer for a time it never
saw.) Clock lines replay first-in, first-out per episode, as calls do; an episode with no clock
line is dated now, as before.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from lcg.errors import ConfigError, ExtractionError
from lcg.extraction.jsonrepair import parse_json_object
from lcg.extraction.llm import LlmClient, LlmRequest, LlmResponse, LlmUsage
from lcg.timeutil import from_wal, to_wal

__all__ = [
    "CASSETTE_VERSION",
    "FAILURES_MAX_BYTES",
    "CassetteError",
    "CassetteMissError",
    "CassetteRecord",
    "CassetteRecorder",
    "CassetteReplayer",
    "DuplicateCassetteKeyError",
    "cassette_key",
    "clock_key",
    "duplicate_keys",
    "failures_path",
    "load_cassette",
]

CASSETTE_VERSION = 1
FAILURES_MAX_BYTES = 20 * 1024 * 1024


class CassetteError(ConfigError):
    """A cassette file cannot be read: unreadable, or a line is not a valid record."""

    def __init__(self, path: Path, message: str, line: int | None = None) -> None:
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"cassette {where}: {message}")
        self.path = path
        self.line = line


class DuplicateCassetteKeyError(ConfigError):
    """A cassette holds several records with the same key where one was required (eval)."""

    def __init__(self, path: Path, duplicates: dict[str, int]) -> None:
        sample = ", ".join(f"{key[:12]} x{n}" for key, n in sorted(duplicates.items())[:5])
        super().__init__(
            f"cassette {path} has {len(duplicates)} duplicated request keys ({sample})"
        )
        self.path = path
        self.duplicates = duplicates


class CassetteMissError(ExtractionError):
    """Replay found no recorded answer for a request."""

    def __init__(self, path: Path, stage: str, key: str) -> None:
        super().__init__(
            f"cassette {path} has no recorded response for stage '{stage}' (key {key[:16]}); "
            f"re-record it with LCG_RECORD_LLM={path}"
        )
        self.path = path
        self.stage = stage
        self.key = key


def _request_fields(request: LlmRequest) -> dict[str, Any]:
    return {
        "stage": request.stage,
        "system": request.system,
        "user": request.user,
        "schema": request.schema,
        "schema_name": request.schema_name,
        "max_tokens": request.max_tokens,
        "temperature": request.temperature,
        "prompt_version": request.prompt_version,
    }


def cassette_key(request: LlmRequest) -> str:
    """SHA-256 over the rendered request (stage, prompts, schema, budget); not the model."""
    canonical = json.dumps(_request_fields(request), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def clock_key(group_id: str, name: str, body: str) -> str:
    """SHA-256 naming an episode (group, name, body) for its recorded default reference time."""
    canonical = json.dumps([group_id, name, body], ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def failures_path(path: Path) -> Path:
    """The sidecar that collects calls that failed while recording."""
    return path.with_name(path.name + ".failures.jsonl")


@dataclass(frozen=True)
class CassetteRecord:
    """One recorded call."""

    key: str
    stage: str
    model: str
    request: dict[str, Any]
    response: LlmResponse

    def to_json(self) -> dict[str, Any]:
        r = self.response
        return {
            "v": CASSETTE_VERSION,
            "key": self.key,
            "stage": self.stage,
            "model": self.model,
            "request": self.request,
            "response": {
                "text": r.text,
                "data": r.data,
                "model": r.model,
                "usage": {
                    "input_tokens": r.usage.input_tokens,
                    "output_tokens": r.usage.output_tokens,
                    "cache_read_tokens": r.usage.cache_read_tokens,
                    "cache_write_tokens": r.usage.cache_write_tokens,
                },
                "finish_reason": r.finish_reason,
                "truncated": r.truncated,
                "repairs": list(r.repairs),
                "mode": r.mode,
            },
        }

    @classmethod
    def from_json(cls, raw: Any) -> CassetteRecord:
        """Raises ValueError, KeyError or TypeError when `raw` is not a record."""
        if not isinstance(raw, dict):
            raise ValueError("a record must be a JSON object")
        if raw.get("v", CASSETTE_VERSION) != CASSETTE_VERSION:
            raise ValueError(f"unsupported cassette version {raw.get('v')!r}")
        resp = raw["response"]
        text = str(resp["text"])
        data = resp.get("data")
        repairs = tuple(str(x) for x in resp.get("repairs", ()))
        if data is None and "data" not in resp:
            parsed = parse_json_object(text)
            data, repairs = parsed.data, parsed.repairs
        if data is not None and not isinstance(data, dict):
            raise ValueError("response.data must be an object or null")
        usage = resp.get("usage") or {}
        request = raw["request"]
        if not isinstance(request, dict):
            raise ValueError("request must be an object")
        return cls(
            key=str(raw["key"]),
            stage=str(raw["stage"]),
            model=str(raw.get("model", "")),
            request=request,
            response=LlmResponse(
                data=data,
                text=text,
                model=str(resp.get("model") or raw.get("model") or ""),
                usage=LlmUsage(
                    input_tokens=int(usage.get("input_tokens", 0)),
                    output_tokens=int(usage.get("output_tokens", 0)),
                    cache_read_tokens=int(usage.get("cache_read_tokens", 0)),
                    cache_write_tokens=int(usage.get("cache_write_tokens", 0)),
                ),
                truncated=bool(resp.get("truncated", False)),
                repairs=repairs,
                mode="replay",
                finish_reason=str(resp.get("finish_reason", "")),
            ),
        )


def _load(path: Path) -> tuple[list[CassetteRecord], list[tuple[str, datetime]]]:
    """The call records and the clock lines (key, reference time), in file order."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise CassetteError(path, f"cannot read: {exc.strerror or exc}") from exc
    records: list[CassetteRecord] = []
    clock: list[tuple[str, datetime]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
            if isinstance(raw, dict) and "clock" in raw:
                when = from_wal(str(raw["reference_time"]))
                if when is None:
                    raise ValueError("a clock line needs a reference_time")
                clock.append((str(raw["clock"]), when))
            else:
                records.append(CassetteRecord.from_json(raw))
        except (ValueError, KeyError, TypeError) as exc:
            raise CassetteError(path, f"invalid record: {exc!r}", line=number) from exc
    return records, clock


def load_cassette(path: str | Path) -> list[CassetteRecord]:
    """Every call record of a cassette, validated line by line (blank lines are skipped; clock
    lines are validated but not returned).

    Raises:
        CassetteError: the file cannot be read, or a line (named) is not a valid record.
    """
    return _load(Path(path))[0]


def duplicate_keys(records: Iterable[CassetteRecord]) -> dict[str, int]:
    """Keys recorded more than once, with their counts."""
    counts = Counter(record.key for record in records)
    return {key: n for key, n in counts.items() if n > 1}


class CassetteRecorder:
    """Forward to `inner` and append each call (and each failure, to the sidecar)."""

    def __init__(
        self, inner: LlmClient, path: str | Path, failures_max_bytes: int = FAILURES_MAX_BYTES
    ) -> None:
        self.inner = inner
        self.path = Path(path)
        self.failures_max_bytes = failures_max_bytes
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self.inner.name

    async def complete(self, request: LlmRequest) -> LlmResponse:
        key = cassette_key(request)
        try:
            response = await self.inner.complete(request)
        except ExtractionError as exc:
            self._record_failure(request, key, exc)
            raise
        record = CassetteRecord(
            key, request.stage, response.model, _request_fields(request), response
        )
        self._append(self.path, record.to_json())
        return response

    def default_reference_time(self, key: str, now: datetime) -> datetime:
        """Record `now` as the reference time the episode `key` defaulted to, and return it."""
        entry = {"v": CASSETTE_VERSION, "clock": key, "reference_time": to_wal(now)}
        self._append(self.path, entry)
        return now

    def _append(self, path: Path, entry: dict[str, Any]) -> None:
        line = json.dumps(entry, ensure_ascii=False) + "\n"
        with self._lock:
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a", encoding="utf-8") as handle:
                handle.write(line)

    def _record_failure(self, request: LlmRequest, key: str, exc: ExtractionError) -> None:
        sidecar = failures_path(self.path)
        with self._lock:
            try:
                if sidecar.stat().st_size >= self.failures_max_bytes:
                    sidecar.replace(sidecar.with_name(sidecar.name + ".1"))
            except FileNotFoundError:
                pass
        self._append(
            sidecar,
            {
                "ts_ms": int(time.time() * 1000),
                "key": key,
                "stage": request.stage,
                "llm": self.inner.name,
                "request": _request_fields(request),
                "error": {"type": type(exc).__name__, "message": exc.message},
            },
        )


class CassetteReplayer:
    """Answer from a cassette: each key's records in recorded order; a miss is an error."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._queues: dict[str, deque[CassetteRecord]] = {}
        self._clock: dict[str, deque[datetime]] = {}
        records, clock = _load(self.path)
        for record in records:
            self._queues.setdefault(record.key, deque()).append(record)
        for key, when in clock:
            self._clock.setdefault(key, deque()).append(when)
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return f"replay:{self.path.name}"

    @property
    def remaining(self) -> int:
        """Recorded answers not replayed yet."""
        with self._lock:
            return sum(len(q) for q in self._queues.values())

    def default_reference_time(self, key: str, now: datetime) -> datetime:
        """The reference time episode `key` defaulted to when recorded (`now` if none was)."""
        with self._lock:
            recorded = self._clock.get(key)
            return recorded.popleft() if recorded else now

    async def complete(self, request: LlmRequest) -> LlmResponse:
        key = cassette_key(request)
        with self._lock:
            queue = self._queues.get(key)
            record = queue.popleft() if queue else None
        if record is None:
            raise CassetteMissError(self.path, request.stage, key)
        return record.response
