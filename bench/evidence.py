"""Does what lcg hands back carry the evidence? Prints one JSON object.

    python bench/evidence.py [--quick] [--embedder hash|onnx] [--budget 2000] [--losses]

Two corpora of text nobody on the team wrote, with ground truth from their own structure:

- **BEAM** (`../shared/data/beam/100K/*`): dated multi-session chats; one turn per episode (its
  `time_anchor` date, carried forward to the turns after it, as reference time; the speaker as
  source description), one group per conversation. Each probing question names the turn ids of
  its evidence (`source_chat_ids`); abstention questions (no evidence) are left out. Kinds are
  the file's own (`temporal_reasoning`, `knowledge_update`, ...).
- **Changelogs** (`../shared/data/changelogs/*`): one release (its `##` heading and body) per
  episode, the release date as reference time, one group per file. Questions from the structure:
  a bullet's text without its links and references (kind `bullet`: evidence is its release), "what
  changed in version V" (`version`), and "what was released on D" (`temporal`).

In one process and one run, for every question of a corpus (queries restricted to its group):

- lcg's read methods **with their defaults** (in-process `dispatch`, as a client calls them):
  `knowledge_get_context` (evidence carried = episodes whose passage text is in the block,
  `included_episode_ids`) and `knowledge_search_passages` (ranked passages);
- baselines over the same raw episode texts: stemmed BM25 (Porter, English stopwords, k1 1.2,
  b 0.75), dense (cosine to the episode's vector from the embedder in use, which truncates a long
  text to its window), and BM25 + dense fused by reciprocal rank (k = 60).

Reported per corpus, overall and per question kind (latency also as `cpu_p50_ms`, the
process's CPU time per call of lcg's methods: what a loaded shared machine does not inflate): `recall@k` (mean share of a question's
evidence in the top k, k = 5/10/20), `all@k` (share of questions with all their evidence in the
top k), `budget` (mean share of the evidence inside a `--budget` token block) and p50/p95
latency in ms. Ranked lists (baselines and search_passages) are packed line by line: one line
per passage, `[P1] <date> <source>: <text, whitespace collapsed>`, written while the whole block
fits; a passage that does not fit is skipped and later, shorter ones may still fit. Tokens are
counted the same way for everything: ceil(UTF-8 bytes / 4) of the whole block, as
`knowledge_get_context` counts its own. search_passages is asked for 20 results for the k = 20
figures (its default, 10, for the others).

Simplifications, each next to what it costs or was measured at (docs/search.md, "Passages" and
"Context", has the tables):
- evidence is counted per episode: a passage line of the episode in the block carries it, a fact
  citing the episode does not (before, get_context carried 0.0 by this count: it quoted no text);
- baselines pack whole turns or releases (their raw text), get_context quotes windows of at
  most 150 characters (`lcg.temporal.evidence.QUOTE_CHARS`): the comparison is of what each
  hands a reader inside the same 2,000 tokens;
- changelog questions are made from the files' structure and are easy for BM25 (0.92 of them
  all@10 on the full run): 1.1x its share is out of reach there, BEAM is the harder test;
- dense baseline latency excludes embedding the query (lcg's methods include it);
- `--grid` replaces module constants in-process (calibration only, never a user setting).

`--losses`: a per-question loss analysis of get_context on BEAM (under `losses` in the output):
for each evidence turn it did not carry, the rank lcg's own passage ranking gives it
(`lcg.temporal.evidence.find_passages`, the first 200) in buckets (1-30 ranked but not fitted,
31-50, 51-100, 101-200, not ranked), per question kind; how many lost turns sit next to a carried
one in the chat (the turn before or after it); and the lost turns of the worst questions, with
the question, each turn's rank and its first words.

`--quick`: three BEAM conversations and the httpx changelog. `--embedder onnx` needs
`LCG_EMBEDDING_MODEL_PATH` (an ONNX model directory, see docs/embeddings.md).
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import random
import re
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import Stemmer

from common import percentile_linear
from lcg.search.text import STOPWORDS

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
KS = (5, 10, 20)
RRF_K = 60


@dataclass
class Doc:
    key: str  # the corpus's own id (turn id, release heading)
    text: str
    when: datetime
    source: str
    name: str
    uuid: str = ""


@dataclass
class Question:
    text: str
    kind: str
    evidence: list[str]  # Doc keys


@dataclass
class Corpus:
    name: str
    group: str
    docs: list[Doc]
    questions: list[Question]
    by_key: dict[str, Doc] = field(default_factory=dict)


# -- corpora -------------------------------------------------------------------------------------

_MARKER = re.compile(r"\s*->->\s*\d+,\d+\s*$")


def _beam_date(text: str) -> datetime:
    return datetime.strptime(text, "%B-%d-%Y").replace(tzinfo=UTC)


def beam(conversation: Path) -> Corpus:
    chat = json.loads((conversation / "chat.json").read_text())
    docs: list[Doc] = []
    when = datetime(2024, 1, 1, tzinfo=UTC)
    for batch in chat:
        for session in batch["turns"]:
            for turn in session:
                if turn.get("time_anchor"):
                    when = _beam_date(turn["time_anchor"])
                text = _MARKER.sub("", turn["content"]).strip()
                if not text:
                    continue
                docs.append(
                    Doc(str(turn["id"]), text, when, f"{turn['role']} turn", f"turn {turn['id']}")
                )
    probing = json.loads(
        (conversation / "probing_questions" / "probing_questions.json").read_text()
    )
    keys = {d.key for d in docs}
    questions: list[Question] = []
    for kind, items in probing.items():
        for item in items:
            ids = item.get("source_chat_ids")
            flat = (
                [i for v in ids.values() for i in v] if isinstance(ids, dict) else list(ids or [])
            )
            evidence = [k for k in dict.fromkeys(str(i) for i in flat) if k in keys]
            if evidence:
                questions.append(Question(item["question"], kind, evidence))
    return Corpus(f"beam/{conversation.name}", f"beam-{conversation.name}", docs, questions)


_HEADING = re.compile(r"^## (.+)$", re.M)
_DATE = re.compile(
    r"(\d{4}-\d{2}-\d{2})|(\d{1,2})(?:st|nd|rd|th)? ([A-Z][a-z]+),? (\d{4})"
    r"|([A-Z][a-z]+) (\d{1,2})(?:st|nd|rd|th)?,? (\d{4})"
)
_VERSION = re.compile(r"v?(\d+\.\d+(?:\.\d+)?(?:[a-z]+\d*)?)")
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)|https?://\S+|#\d+|@[\w-]+|`")


def _release_date(heading: str) -> datetime | None:
    m = _DATE.search(heading)
    if not m:
        return None
    if m.group(1):
        return datetime.strptime(m.group(1), "%Y-%m-%d").replace(tzinfo=UTC)
    day, month, year = (m.group(2), m.group(3), m.group(4)) if m.group(2) else m.group(6, 5, 7)
    try:
        return datetime.strptime(f"{day} {month} {year}", "%d %B %Y").replace(tzinfo=UTC)
    except ValueError:
        return None


def _bullets(text: str) -> list[str]:
    """The bullets of a release, each with its wrapped continuation lines."""
    out: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith(("* ", "- ")):
            out.append(stripped[2:])
        elif out and stripped and line[:1].isspace():
            out[-1] += " " + stripped
        elif not stripped or stripped.startswith("#"):
            out.append("") if out and out[-1] else None
    return [b for b in out if b]


def changelog(path: Path, rng: random.Random, per_file: int) -> Corpus:
    text = path.read_text()
    heads = list(_HEADING.finditer(text))
    docs: list[Doc] = []
    for i, m in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        when = _release_date(m.group(1))
        version = _VERSION.search(m.group(1))
        body = text[m.start() : end].strip()
        if when is None or version is None or len(body) < len(m.group(0)) + 10:
            continue
        docs.append(Doc(version.group(1), body, when, path.name, m.group(1).strip()))
    # Versions and dates shared by two releases (a re-release) are ambiguous: not asked.
    versions: dict[str, int] = {}
    dates: dict[str, int] = {}
    for d in docs:
        versions[d.key] = versions.get(d.key, 0) + 1
        dates[d.when.date().isoformat()] = dates.get(d.when.date().isoformat(), 0) + 1
    seen: set[str] = set()
    unique = []
    for d in docs:
        if d.key not in seen:
            seen.add(d.key)
            unique.append(d)
    docs = unique
    questions: list[Question] = []
    bullets: list[tuple[str, Doc]] = []
    for d in docs:
        for item in _bullets(d.text):
            clean = " ".join(_LINK.sub(r"\1", item).split())
            if len(clean.split()) >= 5:
                bullets.append((clean, d))
    # A bullet repeated in several releases has no single answer: not asked.
    counts: dict[str, int] = {}
    for b, _ in bullets:
        counts[b] = counts.get(b, 0) + 1
    bullets = [(b, d) for b, d in bullets if counts[b] == 1]
    for b, d in rng.sample(bullets, min(per_file, len(bullets))):
        questions.append(Question(b, "bullet", [d.key]))
    for d in rng.sample(docs, min(per_file // 2, len(docs))):
        if versions[d.key] == 1:
            questions.append(Question(f"What changed in version {d.key}?", "version", [d.key]))
    for d in rng.sample(docs, min(per_file // 2, len(docs))):
        day = d.when.date()
        if dates[day.isoformat()] == 1:
            questions.append(
                Question(
                    f"What was released on {day.strftime('%B')} {day.day}, {day.year}?",
                    "temporal",
                    [d.key],
                )
            )
    group = "changelog-" + re.sub(r"[^a-z0-9]+", "-", path.stem.lower()).strip("-")
    return Corpus(f"changelogs/{path.name}", group[:60], docs, questions)


# -- baselines -----------------------------------------------------------------------------------

_STOP = STOPWORDS  # the common English list (lcg's own, lcg.search.text)
_WORDS = re.compile(r"[^\W_]+")


class Bm25:
    """Okapi BM25 (k1 1.2, b 0.75) over stemmed, stopword-free words: the plain baseline."""

    def __init__(self, texts: Sequence[str]) -> None:
        self._stem = Stemmer.Stemmer("english")
        self.postings: dict[str, dict[int, int]] = {}
        self.lengths = np.zeros(len(texts))
        for i, text in enumerate(texts):
            terms = self.terms(text)
            self.lengths[i] = len(terms)
            for t in terms:
                row = self.postings.setdefault(t, {})
                row[i] = row.get(i, 0) + 1
        self.n = len(texts)
        self.avgdl = float(self.lengths.mean()) if self.n else 0.0

    def terms(self, text: str) -> list[str]:
        words = [w for w in _WORDS.findall(text.lower()) if w not in _STOP]
        return list(self._stem.stemWords(words))

    def scores(self, query: str) -> np.ndarray:
        out = np.zeros(self.n)
        for t in dict.fromkeys(self.terms(query)):
            row = self.postings.get(t)
            if not row:
                continue
            idf = math.log1p((self.n - len(row) + 0.5) / (len(row) + 0.5))
            docs = np.fromiter(row.keys(), dtype=np.int64)
            tf = np.fromiter(row.values(), dtype=np.float64)
            norm = 1.2 * (0.25 + 0.75 * self.lengths[docs] / self.avgdl)
            out[docs] += idf * tf * 2.2 / (tf + norm)
        return out


def _ranked(scores: np.ndarray, k: int) -> list[int]:
    idx = np.flatnonzero(scores > 0)
    order = idx[np.lexsort((idx, -scores[idx]))]
    return [int(i) for i in order[:k]]


def _rrf(lists: Sequence[Sequence[int]], k: int) -> list[int]:
    fused: dict[int, float] = {}
    for ranking in lists:
        for rank, doc in enumerate(ranking):
            fused[doc] = fused.get(doc, 0.0) + 1.0 / (RRF_K + rank)
    return [d for d, _ in sorted(fused.items(), key=lambda x: (-x[1], x[0]))][:k]


# -- packing and scoring -------------------------------------------------------------------------


def tokens_of(text: str) -> int:
    return math.ceil(len(text.encode("utf-8")) / 4)


def pack(query: str, docs: Sequence[Doc], budget: int) -> list[str]:
    """Keys of the ranked `docs` whose lines fit a block of `budget` tokens (module docstring)."""
    limit = budget * 4
    used = len(f"Context for: {query[:200]}\n".encode())
    kept: list[str] = []
    for i, d in enumerate(docs):
        line = f"[P{i + 1}] {d.when.date()} {d.source}: {' '.join(d.text.split())}\n"
        size = len(line.encode())
        if used + size <= limit:
            used += size
            kept.append(d.key)
    return kept


def _ms_at(values: list[float], q: float) -> float:
    """A latency percentile as printed: to 0.01 ms, 0.0 for no values."""
    return round(percentile_linear(values, q), 2) if values else 0.0


class Tally:
    """Per method: recall@k, all@k and the budget share, overall and per question kind."""

    def __init__(self) -> None:
        self.rows: dict[str, list[dict[str, Any]]] = {}
        self.ms: dict[str, list[float]] = {}
        self.errors: list[str] = []
        # CPU time of the process per call (lcg's methods): on a loaded machine the part of the
        # wall time that is this process's own work.
        self.cpu: dict[str, list[float]] = {}

    def add(
        self,
        method: str,
        q: Question,
        ranked: Sequence[str] | None,
        packed: Sequence[str],
        ms: float,
    ) -> None:
        want = set(q.evidence)
        row: dict[str, Any] = {"kind": q.kind}
        if ranked is not None:
            for k in KS:
                got = want & set(ranked[:k])
                row[f"recall@{k}"] = len(got) / len(want)
                row[f"all@{k}"] = float(got == want)
        row["budget"] = len(want & set(packed)) / len(want)
        self.rows.setdefault(method, []).append(row)
        self.ms.setdefault(method, []).append(ms)

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for method, rows in self.rows.items():
            kinds = sorted({str(r["kind"]) for r in rows})
            per: dict[str, Any] = {"all": _mean(rows)}
            for kind in kinds:
                per[kind] = _mean([r for r in rows if r["kind"] == kind])
            ms = self.ms[method]
            per["p50_ms"], per["p95_ms"] = _ms_at(ms, 0.5), _ms_at(ms, 0.95)
            if method in self.cpu:
                per["cpu_p50_ms"] = _ms_at(self.cpu[method], 0.5)
            out[method] = per
        if self.errors:
            out["errors"] = self.errors
        return out


def _mean(rows: list[dict[str, Any]]) -> dict[str, Any]:
    keys = [k for k in rows[0] if k != "kind"] if rows else []
    out: dict[str, Any] = {"questions": len(rows)}
    for k in keys:
        vals = [float(r[k]) for r in rows if k in r]
        out[k] = round(float(np.mean(vals)), 3) if vals else None
    return out


# -- loss analysis -------------------------------------------------------------------------------

_BUCKETS = ((30, "1-30"), (50, "31-50"), (100, "51-100"), (200, "101-200"))
_DEPTH = 200


class Losses:
    """Where get_context's lost evidence ranks in lcg's own passage ranking (`--losses`)."""

    def __init__(self) -> None:
        self.kinds: dict[str, dict[str, int]] = {}
        self.worst: list[dict[str, Any]] = []

    def add(
        self,
        engine: Any,
        corpus: Corpus,
        q: Question,
        carried: Sequence[str],
        key_of: dict[str, str],
    ) -> None:
        from lcg.temporal.evidence import find_passages

        ranked = find_passages(engine, q.text, [corpus.group], [], None, limit=_DEPTH)
        rank = {key_of[p.episode.uuid]: i + 1 for i, p in enumerate(ranked)}
        order = {d.key: i for i, d in enumerate(corpus.docs)}
        held = {order[k] for k in carried if k in order}
        row = self.kinds.setdefault(q.kind, {"evidence": 0, "carried": 0, "next_to_carried": 0})
        lost: list[dict[str, Any]] = []
        for key in dict.fromkeys(q.evidence):
            row["evidence"] += 1
            if key in carried:
                row["carried"] += 1
                continue
            at = rank.get(key)
            bucket = next((name for top, name in _BUCKETS if at is not None and at <= top), None)
            row[bucket or "not ranked"] = row.get(bucket or "not ranked", 0) + 1
            row["next_to_carried"] += bool({order[key] - 1, order[key] + 1} & held)
            doc = corpus.by_key[key]
            lost.append({"turn": key, "rank": at, "source": doc.source, "text": doc.text[:100]})
        if lost:
            self.worst.append(
                {"kind": q.kind, "question": q.text, "evidence": len(q.evidence), "lost": lost}
            )

    def summary(self, examples: int = 8) -> dict[str, Any]:
        total: dict[str, int] = {}
        for row in self.kinds.values():
            for k, v in row.items():
                total[k] = total.get(k, 0) + v
        worst = sorted(self.worst, key=lambda w: (-len(w["lost"]), w["question"]))[:examples]
        return {"all": total, **self.kinds, "worst": worst}


# -- the run -------------------------------------------------------------------------------------


async def ingest(engine: Any, corpus: Corpus) -> float:
    from lcg.service.registry import dispatch

    started = time.perf_counter()
    for d in corpus.docs:
        got = await dispatch(
            engine,
            "knowledge_add_episode",
            {
                "name": d.name,
                "episode_body": d.text,
                "source_description": d.source,
                "group_id": corpus.group,
                "reference_time": d.when.isoformat(),
            },
        )
        d.uuid = got["episode_uuid"] if "episode_uuid" in got else got["uuid"]
        corpus.by_key[d.key] = d
    return time.perf_counter() - started


async def measure(
    engine: Any,
    corpus: Corpus,
    tally: Tally,
    budget: int,
    lcg_only: bool = False,
    losses: Losses | None = None,
) -> None:

    docs = corpus.docs
    key_of = {d.uuid: d.key for d in docs}
    if lcg_only:
        for q in corpus.questions:
            await _lcg(engine, corpus, q, tally, budget, key_of, losses)
        return
    bm25 = Bm25([d.text for d in docs])
    embedder = engine.parts.embedder
    matrix = np.asarray(embedder.embed([d.text for d in docs]), dtype=np.float32)
    pool = max(KS)

    def timed(fn: Callable[[], list[int]]) -> tuple[list[int], float]:
        started = time.perf_counter()
        got = fn()
        return got, 1000 * (time.perf_counter() - started)

    for q in corpus.questions:
        lexical, ms_lex = timed(lambda: _ranked(bm25.scores(q.text), pool))  # noqa: B023  # called at once
        qv = np.asarray(embedder.embed([q.text])[0], dtype=np.float32)
        dense, ms_dense = timed(lambda: _ranked(matrix @ qv + 1.0, pool))  # noqa: B023  # called at once
        fused = _rrf([lexical, dense], pool)
        for name, ranking, ms in (
            ("bm25", lexical, ms_lex),
            ("dense", dense, ms_dense),
            ("bm25+dense_rrf", fused, ms_lex + ms_dense),
        ):
            ranked = [docs[i] for i in ranking]
            tally.add(name, q, [d.key for d in ranked], pack(q.text, ranked, budget), ms)
        await _lcg(engine, corpus, q, tally, budget, key_of, losses)


async def _lcg(
    engine: Any,
    corpus: Corpus,
    q: Question,
    tally: Tally,
    budget: int,
    key_of: dict[str, str],
    losses: Losses | None = None,
) -> None:
    """lcg's two read methods, with their defaults, on one question."""
    from lcg.service.registry import dispatch

    pool = max(KS)
    started, cpu = time.perf_counter(), time.process_time()
    got = await dispatch(
        engine, "knowledge_search_passages", {"query": q.text, "group_ids": [corpus.group]}
    )
    ms = 1000 * (time.perf_counter() - started)
    tally.cpu.setdefault("lcg.search_passages", []).append(1000 * (time.process_time() - cpu))
    wide = await dispatch(
        engine,
        "knowledge_search_passages",
        {"query": q.text, "group_ids": [corpus.group], "num_results": pool},
    )
    ranked_docs = [corpus.by_key[key_of[p["uuid"]]] for p in got["passages"]]
    ranked_keys = [d.key for d in ranked_docs]
    wide_keys = [key_of[p["uuid"]] for p in wide["passages"]]
    ranked_all = ranked_keys + [k for k in wide_keys if k not in ranked_keys]
    tally.add(
        "lcg.search_passages",
        q,
        ranked_keys[:10] + ranked_all[10:],
        pack(q.text, ranked_docs, budget),
        ms,
    )

    params: dict[str, Any] = {"query": q.text, "group_ids": [corpus.group]}
    if budget != 2000:  # the method's default
        params["token_budget"] = budget
    started, cpu = time.perf_counter(), time.process_time()
    ctx = await dispatch(engine, "knowledge_get_context", params)
    ms = 1000 * (time.perf_counter() - started)
    tally.cpu.setdefault("lcg.get_context", []).append(1000 * (time.process_time() - cpu))
    if ctx["token_estimate"] > budget:  # a bug: counted, and the block is not credited
        tally.errors.append(f"over budget: {ctx['token_estimate']} > {budget}: {q.text}")
        ctx["included_episode_ids"] = []
    carried = [key_of[u] for u in ctx.get("included_episode_ids", []) if u in key_of]
    tally.add("lcg.get_context", q, None, carried, ms)
    if losses is not None:
        losses.add(engine, corpus, q, carried, key_of)


def run(args: argparse.Namespace) -> dict[str, Any]:
    os.environ.setdefault("LCG_EXTRACTOR", "heuristic")
    os.environ["LCG_EMBEDDER"] = args.embedder
    from lcg import open_engine
    from lcg.config import load_settings

    _apply(args.set)

    rng = random.Random(29)
    convs = sorted((DATA / "beam" / "100K").iterdir(), key=lambda p: (len(p.name), p.name))
    convs = [c for c in convs if (c / "chat.json").is_file()]
    logs = sorted((DATA / "changelogs").glob("*.md"))
    logs = [p for p in logs if p.name != "README.md"]
    if args.quick:
        convs, logs = convs[:3], [p for p in logs if "httpx" in p.name]
    corpora = [beam(c) for c in convs] + [changelog(p, rng, args.per_changelog) for p in logs]
    out: dict[str, Any] = {
        "embedder": args.embedder,
        "quick": args.quick,
        "budget": args.budget,
        "set": args.set,
        "load_avg": os.getloadavg()[0],
    }
    with tempfile.TemporaryDirectory(prefix="lcg-bench-evidence-") as tmp:
        settings = load_settings(overrides={"home": str(Path(tmp) / ".lcg")})
        engine = open_engine(settings)
        out["model"] = engine.parts.embedder.identity.model
        try:
            ingest_s = 0.0
            for c in corpora:
                ingest_s += anyio.run(ingest, engine, c)
            episodes = sum(len(c.docs) for c in corpora)
            out["episodes"] = episodes
            out["ingest_ms_per_episode"] = round(1000 * ingest_s / max(episodes, 1), 1)
            out.update(_families(engine, corpora, args.budget, losses=args.losses))
            grid: dict[str, Any] = {}
            for row in filter(None, args.grid.split(";")):
                kept = _apply(row.split(","))
                grid[row] = _families(
                    engine, corpora, args.budget, lcg_only=True, losses=args.losses
                )
                _apply([f"{k}={v}" for k, v in kept.items()])
            if grid:
                out["grid"] = grid
        finally:
            engine.close()
    out["load_avg_end"] = os.getloadavg()[0]
    return out


def _apply(settings: Sequence[str]) -> dict[str, Any]:
    """Calibration only: replace numeric module constants (`module.NAME=value`); the old values."""
    kept: dict[str, Any] = {}
    for setting in settings:
        target, value = setting.split("=", 1)
        module, name = target.rsplit(".", 1)
        mod = importlib.import_module(module)
        kept[target] = getattr(mod, name)
        setattr(mod, name, type(kept[target])(float(value)))
    return kept


def _families(
    engine: Any,
    corpora: list[Corpus],
    budget: int,
    lcg_only: bool = False,
    losses: bool = False,
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for family in ("beam", "changelogs"):
        tally = Tally()
        lost = Losses() if losses and family == "beam" else None
        chosen = [c for c in corpora if c.name.startswith(family)]
        for c in chosen:
            anyio.run(measure, engine, c, tally, budget, lcg_only, lost)
        out[family] = {
            "corpora": len(chosen),
            "episodes": sum(len(c.docs) for c in chosen),
            "methods": tally.summary(),
        }
        if lost is not None:
            out[family]["losses"] = lost.summary()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--embedder", default="hash")
    parser.add_argument("--budget", type=int, default=2000)
    parser.add_argument("--per-changelog", type=int, default=40)
    parser.add_argument(
        "--losses",
        action="store_true",
        help="a per-question loss analysis of get_context on BEAM (module docstring)",
    )
    parser.add_argument(
        "--grid",
        default="",
        help="calibration: ';'-separated rows of ','-separated --set values; lcg's methods are "
        "measured again under each row, on the same ingested corpora",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="MODULE.NAME=VALUE",
        help="calibration: replace a numeric module constant for this run "
        "(e.g. lcg.temporal.context.PASSAGE_SHARE=0.9)",
    )
    args = parser.parse_args()
    print(json.dumps(run(args), indent=1))


if __name__ == "__main__":
    main()
