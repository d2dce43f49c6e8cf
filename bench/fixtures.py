"""The workloads several benchmarks share: the Apollo corpus as `knowledge_process_chunk`
parameters, the scripted LLM server in a process of its own, a JSON-RPC line client for the
socket of `lcg serve`, Zipf-distributed text, a dense synthetic embedder, and a WAL shaped like
ingestion output written in the engine's record format (`write_wal`).

A benchmark script imports it as `fixtures` (a script's own folder is first on `sys.path`);
timing, percentiles and the JSON envelope are in `common`.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import multiprocessing
import random
import socket
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from lcg.config import Settings
from lcg.embedding.base import EmbedderIdentity, Vectors
from lcg.embedding.hashing import HashEmbedder
from lcg.extraction.providers.openai_compat import OpenAICompatProvider
from lcg.models import Entity, Episode, Fact
from lcg.testing.heuristic_llm import heuristic_responder
from lcg.testing.scripted_llm import ScriptedLlmServer
from lcg.wal.records import Op, entity_op, episode_op, fact_op
from lcg.wal.writer import Wal

__all__ = [
    "CORPUS",
    "START",
    "SYLLABLES",
    "WORDS",
    "Conn",
    "LlmServer",
    "SyntheticEmbedder",
    "Text",
    "articles",
    "chunk",
    "llm_server",
    "scripted_client",
    "sentence",
    "vocabulary",
    "write_wal",
]

CORPUS = Path(__file__).resolve().parents[1] / "examples" / "apollo" / "corpus_prose.jsonl"
START = datetime(2020, 1, 1, tzinfo=UTC)
SYLLABLES = ["ka", "lo", "mi", "ra", "ten", "vo", "sul", "dar", "pe", "quin", "zor", "ba", "ne"]


def _serve(latency_s: float, ready: Any, asks: Any, answers: Any) -> None:
    """Child process: the scripted LLM server (its CPU work stays out of the engine's process).

    Answers each "served" on `asks` with the seconds it has spent serving requests so far;
    None stops it."""
    with ScriptedLlmServer(heuristic_responder, latency_s=latency_s) as server:
        ready.put(server.url)
        while asks.get() is not None:
            answers.put(server.service_total_s)


class LlmServer:
    """The scripted server in its own process: its URL, and the time it has spent serving."""

    def __init__(self, url: str, asks: Any, answers: Any) -> None:
        self.url = url
        self._asks = asks
        self._answers = answers

    def served_s(self) -> float:
        """Seconds the server has spent on requests so far (measured by the server itself)."""
        self._asks.put("served")
        return float(self._answers.get(timeout=60))


@contextlib.contextmanager
def llm_server(latency_s: float) -> Iterator[LlmServer]:
    """The scripted server, served from its own process."""
    ctx = multiprocessing.get_context("spawn")
    ready, asks, answers = ctx.Queue(), ctx.Queue(), ctx.Queue()
    process = ctx.Process(target=_serve, args=(latency_s, ready, asks, answers), daemon=True)
    process.start()
    try:
        yield LlmServer(str(ready.get(timeout=60)), asks, answers)
    finally:
        asks.put(None)
        process.join(timeout=10)


def scripted_client(server: LlmServer) -> OpenAICompatProvider:
    """The language model an engine is opened with (`open_engine(llm=...)`): the scripted server."""
    return OpenAICompatProvider(base_url=server.url, model="scripted")


def articles(limit: int) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines()[1:]]
    return rows[:limit]


def chunk(i: int, article: dict[str, Any]) -> dict[str, Any]:
    return {
        "chunk_text": article["prose"],
        "chunk_id": article["title"],
        "source_file": "apollo/corpus_prose.jsonl",
        "reference_time": (START + timedelta(days=i)).isoformat(),
    }


class Conn:
    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(120)
        self.sock.connect(str(path))
        self.reader = self.sock.makefile("rb")
        self.next_id = 0

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        line = json.dumps(
            {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        )
        self.sock.sendall(line.encode() + b"\n")
        answer = json.loads(self.reader.readline())
        if answer.get("id") != self.next_id:
            raise RuntimeError(f"id mismatch: {answer!r}")
        return dict(answer)

    def close(self) -> None:
        self.reader.close()
        self.sock.close()


def vocabulary(rng: random.Random, size: int = 6000) -> list[str]:
    words: dict[str, None] = {}
    while len(words) < size:
        words["".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4)))] = None
    return list(words)


class Text:
    """Zipf-distributed words (s = 1.1), like natural text."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.words = vocabulary(rng)
        weights = [1 / (r + 1) ** 1.1 for r in range(len(self.words))]
        total = sum(weights)
        self.cum = list(itertools.accumulate(w / total for w in weights))

    def words_(self, n: int) -> list[str]:
        return self.rng.choices(self.words, cum_weights=self.cum, k=n)

    def sentence(self, n: int) -> str:
        return " ".join(self.words_(n)).capitalize() + "."


class SyntheticEmbedder:
    """Dense 384-dimension vectors standing in for a model's: the hash embedder's vectors turned
    by a fixed random rotation (deterministic, fast, and not sparse like the hash vectors)."""

    def __init__(self, dim: int = 384) -> None:
        self._hash = HashEmbedder(dim)
        q, _ = np.linalg.qr(np.random.default_rng(384).standard_normal((dim, dim)))
        self._rotation = q.astype(np.float32)
        self._identity = EmbedderIdentity(model=f"synthetic-dense-{dim}", dim=dim)

    @property
    def identity(self) -> EmbedderIdentity:
        return self._identity

    def embed(self, texts: list[str]) -> Vectors:
        return np.asarray(self._hash.embed(texts) @ self._rotation, dtype=np.float32)


WORDS = [
    "apollo",
    "lunar",
    "module",
    "command",
    "service",
    "saturn",
    "rocket",
    "orbit",
    "crew",
    "mission",
    "launch",
    "pad",
    "astronaut",
    "engineer",
    "pilot",
    "spacecraft",
    "capsule",
    "booster",
    "stage",
    "telemetry",
    "splashdown",
    "recovery",
    "guidance",
    "computer",
    "heat",
    "shield",
    "parachute",
    "docking",
    "rendezvous",
]


def sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def write_wal(settings: Settings, episodes: int, groups: int = 3) -> int:
    """A WAL shaped like ingestion output, written with the engine's record format."""
    rng = random.Random(2)
    wal = Wal(settings.wal_dir, settings.wal_max_bytes_per_file, settings.wal_max_events_per_file)
    base = datetime(2020, 1, 1, tzinfo=UTC)
    pool: dict[str, list[Entity]] = {f"g{g}": [] for g in range(groups)}
    ops_total = 0
    for i in range(episodes):
        group = f"g{i % groups}"
        when = base + timedelta(hours=i)
        ep = Episode(
            uuid=str(uuid.uuid4()),
            group_id=group,
            name=f"chunk-{i}",
            content=sentence(rng, 60),
            source_description=f"notes/{i // 10}.md:chunk-{i}",
            source_file=f"notes/{i // 10}.md",
            chunk_id=f"chunk-{i}",
            created_at=when,
            valid_at=when,
        )
        ents = []
        for _ in range(4):
            if pool[group] and rng.random() < 0.5:  # half the mentions are recurring entities
                old = rng.choice(pool[group])
                ents.append(
                    Entity(
                        old.uuid,
                        group,
                        old.name,
                        old.labels,
                        sentence(rng, 14),
                        created_at=old.created_at,
                    )
                )
            else:
                e = Entity(
                    str(uuid.uuid4()),
                    group,
                    f"{rng.choice(WORDS).title()} {i}",
                    ("Entity", "Thing"),
                    sentence(rng, 14),
                    created_at=when,
                )
                pool[group].append(e)
                ents.append(e)
        facts = [
            Fact(
                str(uuid.uuid4()),
                group,
                ents[k].uuid,
                ents[(k + 1) % 4].uuid,
                "RELATED_TO",
                sentence(rng, 12),
                relation_type="RELATED_TO",
                episodes=(ep.uuid,),
                valid_at=when,
                created_at=when,
            )
            for k in range(4)
        ]
        ops = [entity_op(e) for e in ents] + [fact_op(f) for f in facts] + [episode_op(ep)]
        ops.append(
            Op(
                "mentions.add",
                {"episode": ep.uuid, "entities": list(dict.fromkeys(e.uuid for e in ents))},
            )
        )
        wal.append(group, ops)
        ops_total += len(ops)
    wal.close()
    return ops_total
