"""Running an evaluation: every backend extracts every article with lcg's own prompts, then
the extractions are scored against the reference backend and, with a judge, against each other.

Inputs are frozen: each article is an episode with a fixed reference time, so prompts render
identically on every run and cassettes replay them exactly.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import combinations
from pathlib import Path
from typing import Any

import anyio
from pydantic import ValidationError

from lcg.errors import LcgError
from lcg.evals.judge import Judge
from lcg.evals.metrics import Score, aligned_score, entity_key, fact_key, percentile, strict_score
from lcg.evals.pairwise import PairTally, Verdict, first_order
from lcg.extraction.llm import LlmClient, LlmResponse
from lcg.extraction.pricing import estimate_usd
from lcg.extraction.prompts import (
    EntitiesAnswer,
    EpisodeContext,
    FactsAnswer,
    GraphAnswer,
    KnownEntity,
    calls_for,
    entities_prompt,
    episode_prompt,
    facts_prompt,
)
from lcg.extraction.salvage import SalvageReport, salvage_entities, salvage_facts, salvage_graph
from lcg.ontology import Ontology

__all__ = [
    "Article",
    "BackendRun",
    "Extraction",
    "evaluate",
    "extract_all",
    "extraction_calls",
    "load_articles",
]

# The reference time every article is extracted under (inputs are frozen, so this is fixed).
FROZEN_REFERENCE_TIME = datetime(2024, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Article:
    key: str
    title: str
    text: str


def load_articles(path: Path, limit: int | None) -> list[Article]:
    """Articles of a corpus in the Apollo JSON Lines format (a header line, then
    `{"title", "prose"}` records); `limit` None means all."""
    articles: list[Article] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        if row.get("_header"):
            continue
        text = row.get("prose") or row.get("text") or ""
        if text.strip():
            articles.append(
                Article(str(row.get("title") or len(articles)), row.get("title", ""), text)
            )
        if limit is not None and len(articles) >= limit:
            break
    return articles


@dataclass
class Extraction:
    """One backend's answer for one article, reduced to what scoring compares."""

    entities: list[tuple[str, str]] = field(default_factory=list)  # (name, type)
    facts: list[tuple[str, str, str, str]] = field(default_factory=list)  # src, pred, tgt, text

    def entity_keys(self) -> list[str]:
        return [entity_key(n) for n, _ in self.entities]

    def fact_keys(self) -> list[str]:
        return [fact_key(s, p, t) for s, p, t, _ in self.facts]

    def fact_lines(self) -> list[str]:
        return [f"{s} {p} {t}: {text}" for s, p, t, text in self.facts]


@dataclass
class BackendRun:
    """Everything one backend produced, and how its calls went."""

    name: str
    client_name: str
    extractions: dict[str, Extraction] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    outputs: dict[str, int] = field(
        default_factory=lambda: {"clean": 0, "recovered": 0, "malformed": 0, "schema_invalid": 0}
    )
    truncations_retried: int = 0
    truncations_exhausted: int = 0
    items_dropped: int = 0
    latencies: list[float] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0
    calls: int = 0

    def note(
        self,
        response: LlmResponse,
        answer: type[EntitiesAnswer] | type[FactsAnswer] | type[GraphAnswer],
    ) -> None:
        self.calls += response.calls
        self.latencies.append(response.latency_s)
        self.input_tokens += response.usage.input_tokens
        self.output_tokens += response.usage.output_tokens
        usd = estimate_usd(response.model, response.usage)
        self.cost_usd = None if usd is None or self.cost_usd is None else self.cost_usd + usd
        if response.truncated:
            self.truncations_exhausted += 1
        elif response.calls > 1:
            self.truncations_retried += 1
        if response.data is None:
            self.outputs["malformed"] += 1
            return
        try:
            answer.model_validate(response.data)
        except ValidationError:
            self.outputs["schema_invalid"] += 1
            return
        self.outputs["recovered" if response.repairs else "clean"] += 1


def extraction_calls(articles: Sequence[Article], single_call_max_chars: int) -> int:
    """Calls one backend makes: one per article of up to `single_call_max_chars` characters
    (the single-call protocol, as ingestion chooses it), two per longer article."""
    return sum(calls_for(a.text, single_call_max_chars) for a in articles)


async def _extract_one(
    client: LlmClient,
    article: Article,
    ontology: Ontology | None,
    run: BackendRun,
    single_call_max_chars: int,
) -> Extraction:
    ctx = EpisodeContext(
        name=article.title,
        content=article.text,
        source_type="text",
        reference_time=FROZEN_REFERENCE_TIME,
        ontology_block=ontology.prompt_block() if ontology is not None else "",
    )
    report = SalvageReport()
    if calls_for(article.text, single_call_max_chars) == 1:
        only = await client.complete(episode_prompt(ctx, []))
        run.note(only, GraphAnswer)
        entities, facts = salvage_graph(only.data, report)
    else:
        first = await client.complete(entities_prompt(ctx))
        run.note(first, EntitiesAnswer)
        entities = salvage_entities(first.data, report)
        known = [KnownEntity(e.name, e.type) for e in entities]
        second = await client.complete(facts_prompt(ctx, known, []))
        run.note(second, FactsAnswer)
        facts = salvage_facts(second.data, report)
    run.items_dropped += report.entities_dropped_malformed + report.edges_dropped_malformed
    return Extraction(
        [(e.name, e.type) for e in entities],
        [(f.source, f.relation_type or f.predicate, f.target, f.fact) for f in facts],
    )


async def extract_all(
    name: str,
    client: LlmClient,
    articles: Sequence[Article],
    *,
    ontology: Ontology | None = None,
    concurrency: int = 4,
    single_call_max_chars: int = 0,
    on_article: Callable[[], None] | None = None,
) -> BackendRun:
    """Extract every article with the protocol ingestion would use (one call up to
    `single_call_max_chars` characters, two beyond); failures are recorded, not raised."""
    run = BackendRun(name, client.name)
    limiter = anyio.CapacityLimiter(concurrency)

    async def one(article: Article) -> None:
        async with limiter:
            try:
                run.extractions[article.key] = await _extract_one(
                    client, article, ontology, run, single_call_max_chars
                )
            except LcgError as exc:
                run.errors[article.key] = str(exc)
        if on_article is not None:
            on_article()

    async with anyio.create_task_group() as tg:
        for article in articles:
            tg.start_soon(one, article)
    return run


def _compliance(runs: BackendRun, ontology: Ontology) -> dict[str, float | None]:
    types = [t for x in runs.extractions.values() for _, t in x.entities]
    relations = [p for x in runs.extractions.values() for _, p, _, _ in x.facts]

    def share(values: list[str], ok: Callable[[str], bool]) -> float | None:
        return round(sum(map(ok, values)) / len(values), 4) if values else None

    return {
        "entity_types": share(types, lambda t: ontology.canonical_entity_type(t) is not None),
        "relation_types": share(
            relations, lambda r: ontology.canonical_relation_type(r) is not None
        ),
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _score_dict(score: Score) -> dict[str, Any]:
    return {
        "f1": round(score.f1, 4),
        "precision": round(score.precision, 4),
        "recall": round(score.recall, 4),
        "matched": score.matched,
        "predicted": score.predicted,
        "reference": score.reference,
    }


async def evaluate(
    runs: Mapping[str, BackendRun],
    articles: Sequence[Article],
    reference: str,
    *,
    judge: Judge | None,
    judge_mode: str,
    ontology: Ontology | None = None,
) -> dict[str, Any]:
    """Score every backend against `reference` (strict, and judged when there is a judge) and,
    in pairwise mode, every pair against each other."""
    ref = runs[reference]
    report: dict[str, Any] = {
        "reference": reference,
        "articles": len(articles),
        "judge": None if judge is None else judge.model,
        "backends": {},
        "pairwise": [],
        "warnings": [],
    }
    if judge is None:
        report["warnings"].append("no judge configured: strict-string scores only")
    for name, run in runs.items():
        strict_e, strict_f = Score(0, 0, 0), Score(0, 0, 0)
        judged_e, judged_f = Score(0, 0, 0), Score(0, 0, 0)
        compared = 0
        for article in articles:
            mine, theirs = run.extractions.get(article.key), ref.extractions.get(article.key)
            if mine is None or theirs is None:
                continue
            compared += 1
            strict_e += strict_score(mine.entity_keys(), theirs.entity_keys())
            strict_f += strict_score(mine.fact_keys(), theirs.fact_keys())
            if judge is not None and judge_mode in ("reference", "both"):
                if name == reference:
                    judged_e += strict_score(mine.entity_keys(), theirs.entity_keys())
                    judged_f += strict_score(mine.fact_keys(), theirs.fact_keys())
                    continue
                names_m, names_t = [n for n, _ in mine.entities], [n for n, _ in theirs.entities]
                pairs = await judge.align("entities", names_m, names_t)
                judged_e += aligned_score(pairs, len(names_m), len(names_t))
                lines_m, lines_t = mine.fact_lines(), theirs.fact_lines()
                pairs = await judge.align("facts", lines_m, lines_t)
                judged_f += aligned_score(pairs, len(lines_m), len(lines_t))
        entry: dict[str, Any] = {
            "client": run.client_name,
            "articles_compared": compared,
            "strict": {"entities": _score_dict(strict_e), "facts": _score_dict(strict_f)},
            "judged": None,
            "structured_output": dict(run.outputs),
            "truncations": {
                "retried": run.truncations_retried,
                "exhausted": run.truncations_exhausted,
            },
            "items_dropped": run.items_dropped,
            "errors": len(run.errors),
            "error_rate": _round(len(run.errors) / len(articles) if articles else None),
            "error_samples": sorted(set(run.errors.values()))[:5],
            "latency_s": {
                "p50": _round(percentile(run.latencies, 50)),
                "p95": _round(percentile(run.latencies, 95)),
                "max": _round(max(run.latencies, default=None)),
            },
            "llm_calls": run.calls,
            "tokens": {"input": run.input_tokens, "output": run.output_tokens},
            "estimated_usd": _round(run.cost_usd),
        }
        if judge is not None and judge_mode in ("reference", "both"):
            entry["judged"] = {"entities": _score_dict(judged_e), "facts": _score_dict(judged_f)}
        if ontology is not None:
            entry["ontology_compliance"] = _compliance(run, ontology)
        report["backends"][name] = entry

    if judge is not None and judge_mode in ("pairwise", "both"):
        for left, right in combinations(sorted(runs), 2):
            tally = PairTally(left, right)
            for article in articles:
                x, y = (
                    runs[left].extractions.get(article.key),
                    runs[right].extractions.get(article.key),
                )
                if x is None or y is None:
                    continue
                # verdict_with[n]: the verdict of the question that put backend n in slot A.
                verdict_with: dict[str, Verdict] = {}
                first, second = first_order(article.key, left, right)
                for slot_a, slot_b in ((first, second), (second, first)):
                    verdict_with[slot_a] = await judge.pick(
                        article.text,
                        runs[slot_a].extractions[article.key].fact_lines(),
                        runs[slot_b].extractions[article.key].fact_lines(),
                    )
                tally.add(verdict_with[left], verdict_with[right])
            report["warnings"].extend(tally.check())
            report["pairwise"].append(tally.to_dict())
    if judge is not None:
        report["judge_calls"] = judge.calls
        report["judge_cache"] = {"hits": judge.cache.hits, "misses": judge.cache.misses}
    return report
