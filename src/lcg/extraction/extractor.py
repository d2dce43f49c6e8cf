"""Extractors: what turns an episode into entities and facts, and what that cost.

`Extractor` is the protocol the ingestion pipeline calls — entities, then facts (given the
entities and a bounded list of existing facts); or both at once for a short episode (`episode`);
and optionally a same-entity check for ambiguous pairs. `LlmExtractor` runs the prompts of
`lcg.extraction.prompts` through an `LlmClient` (two calls per episode, or one);
`HeuristicExtractor` needs no model. Both feed the same salvage step, and both
describe themselves (`extractor` in every ingestion result and in `knowledge_status`).

`Cost` accumulates, per stage, LLM calls, tokens, prompt characters, seconds spent waiting on
the model and the estimated USD (None once any call's model has no known price).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio.to_thread

from lcg.errors import ExtractionError
from lcg.extraction.heuristic import (
    HEURISTIC_VERSION,
    heuristic_entities,
    heuristic_facts,
    heuristic_graph,
)
from lcg.extraction.llm import LlmClient, LlmRequest
from lcg.extraction.pricing import estimate_usd
from lcg.extraction.prompts import (
    PROMPT_VERSION,
    EpisodeContext,
    ExistingFact,
    KnownEntity,
    dedup_prompt,
    entities_prompt,
    episode_prompt,
    facts_prompt,
)
from lcg.extraction.salvage import (
    CleanEntity,
    CleanFact,
    SalvageReport,
    salvage_entities,
    salvage_facts,
    salvage_graph,
)
from lcg.extraction.select import describe_llm

__all__ = [
    "Cost",
    "Extractor",
    "HeuristicExtractor",
    "LlmExtractor",
    "StageCost",
    "extractor_status",
]


@dataclass
class StageCost:
    """What one stage's model calls consumed."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    estimated_usd: float | None = 0.0
    input_chars: int = 0
    llm_seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        usd = None if self.estimated_usd is None else round(self.estimated_usd, 8)
        return {
            "llm_calls": self.calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "estimated_usd": usd,
            "input_chars": self.input_chars,
        }


@dataclass
class Cost:
    """Per-stage model usage of one ingestion call."""

    stages: dict[str, StageCost] = field(default_factory=dict)

    def add(
        self,
        stage: str,
        calls: int,
        input_tokens: int,
        output_tokens: int,
        usd: float | None,
        chars: int,
        seconds: float,
    ) -> None:
        s = self.stages.setdefault(stage, StageCost())
        s.calls += calls
        s.input_tokens += input_tokens
        s.output_tokens += output_tokens
        s.estimated_usd = None if usd is None or s.estimated_usd is None else s.estimated_usd + usd
        s.input_chars += chars
        s.llm_seconds += seconds

    @property
    def calls(self) -> int:
        return sum(s.calls for s in self.stages.values())

    @property
    def llm_seconds(self) -> float:
        return sum(s.llm_seconds for s in self.stages.values())

    @property
    def input_chars(self) -> int:
        return sum(s.input_chars for s in self.stages.values())

    def as_dict(self) -> dict[str, Any]:
        usd: float | None = 0.0
        for s in self.stages.values():
            usd = None if usd is None or s.estimated_usd is None else usd + s.estimated_usd
        return {
            "llm_calls": self.calls,
            "input_tokens": sum(s.input_tokens for s in self.stages.values()),
            "output_tokens": sum(s.output_tokens for s in self.stages.values()),
            "estimated_usd": None if usd is None else round(usd, 8),
            "stages": {name: s.as_dict() for name, s in self.stages.items()},
        }


class Extractor(Protocol):
    """Entities, then facts, from one episode (or both in one step); optionally a same-entity
    check."""

    def describe(self) -> dict[str, Any]:
        """`{"kind": "llm" | "heuristic", ...}` as reported in results and status."""
        ...

    async def entities(
        self, ctx: EpisodeContext, report: SalvageReport, cost: Cost
    ) -> list[CleanEntity]: ...

    async def facts(
        self,
        ctx: EpisodeContext,
        entities: Sequence[KnownEntity],
        existing: Sequence[ExistingFact],
        report: SalvageReport,
        cost: Cost,
    ) -> list[CleanFact]: ...

    async def episode(
        self,
        ctx: EpisodeContext,
        existing: Sequence[ExistingFact],
        report: SalvageReport,
        cost: Cost,
    ) -> tuple[list[CleanEntity], list[CleanFact]]:
        """Entities and facts in one step (`existing`: facts about entities the text names)."""
        ...

    async def same(self, pairs: Sequence[tuple[str, str, str, str]], cost: Cost) -> set[int]:
        """Indexes of the (new name, summary, existing name, summary) pairs naming one entity."""
        ...


class LlmExtractor:
    """The LLM extractor over any `LlmClient`: two calls, or one for a short episode."""

    def __init__(self, client: LlmClient) -> None:
        self.client = client

    def describe(self) -> dict[str, Any]:
        return {"kind": "llm", "model": self.client.name, "prompt_version": PROMPT_VERSION}

    async def _call(self, request: LlmRequest, cost: Cost) -> dict[str, Any]:
        started = time.perf_counter()
        response = await self.client.complete(request)
        cost.add(
            request.stage,
            response.calls,
            response.usage.input_tokens,
            response.usage.output_tokens,
            estimate_usd(response.model, response.usage),
            len(request.system) + len(request.user),
            time.perf_counter() - started,
        )
        if response.data is None:
            raise ExtractionError(
                f"the model's {request.stage} answer contained no JSON object "
                f"(model {response.model}); nothing was written"
            )
        return response.data

    async def entities(
        self, ctx: EpisodeContext, report: SalvageReport, cost: Cost
    ) -> list[CleanEntity]:
        return salvage_entities(await self._call(entities_prompt(ctx), cost), report)

    async def facts(
        self,
        ctx: EpisodeContext,
        entities: Sequence[KnownEntity],
        existing: Sequence[ExistingFact],
        report: SalvageReport,
        cost: Cost,
    ) -> list[CleanFact]:
        request = facts_prompt(ctx, entities, existing)
        return salvage_facts(await self._call(request, cost), report)

    async def episode(
        self,
        ctx: EpisodeContext,
        existing: Sequence[ExistingFact],
        report: SalvageReport,
        cost: Cost,
    ) -> tuple[list[CleanEntity], list[CleanFact]]:
        return salvage_graph(await self._call(episode_prompt(ctx, existing), cost), report)

    async def same(self, pairs: Sequence[tuple[str, str, str, str]], cost: Cost) -> set[int]:
        data = await self._call(dedup_prompt(pairs), cost)
        raw = data.get("same")
        if not isinstance(raw, list):
            return set()
        return {i for i in raw if isinstance(i, int) and not isinstance(i, bool)}


class HeuristicExtractor:
    """No model: rules over sentences (lcg.extraction.heuristic); its `supersedes` flags come
    from change cues and index the existing facts it is shown, like a model's.

    The rules run in a worker thread: on a chunk of megabytes they take seconds to minutes of
    CPU, and on the event loop they stalled every other connection of the service (even
    `health_check`) for as long."""

    def describe(self) -> dict[str, Any]:
        return {"kind": "heuristic", "version": HEURISTIC_VERSION}

    async def entities(
        self, ctx: EpisodeContext, report: SalvageReport, cost: Cost
    ) -> list[CleanEntity]:
        found = await anyio.to_thread.run_sync(
            functools.partial(heuristic_entities, ctx.content, **_heuristic_options(ctx))
        )
        return salvage_entities(found, report)

    async def facts(
        self,
        ctx: EpisodeContext,
        entities: Sequence[KnownEntity],
        existing: Sequence[ExistingFact],
        report: SalvageReport,
        cost: Cost,
    ) -> list[CleanFact]:
        names = [e.name for e in entities]
        found = await anyio.to_thread.run_sync(
            functools.partial(
                heuristic_facts, ctx.content, names, existing, **_heuristic_options(ctx)
            )
        )
        report.sentences_unread += int(found.pop("unread", 0))
        return salvage_facts(found, report)

    async def episode(
        self,
        ctx: EpisodeContext,
        existing: Sequence[ExistingFact],
        report: SalvageReport,
        cost: Cost,
    ) -> tuple[list[CleanEntity], list[CleanFact]]:
        found = await anyio.to_thread.run_sync(
            functools.partial(heuristic_graph, ctx.content, existing, **_heuristic_options(ctx))
        )
        report.sentences_unread += int(found.pop("unread", 0))
        return salvage_graph(found, report)

    async def same(self, pairs: Sequence[tuple[str, str, str, str]], cost: Cost) -> set[int]:
        return set()


def _heuristic_options(ctx: EpisodeContext) -> dict[str, Any]:
    return {
        "reference_time": ctx.reference_time,
        "source_type": ctx.source_type,
        "ontology": ctx.ontology,
    }


def extractor_status(engine: Any) -> dict[str, Any]:
    """The `extractor` object of `knowledge_status`: which extractor ingestion would use.

    Never contacts a provider: for the LLM extractor it is `describe_llm` (configured, provider,
    model, source, endpoint, error) plus the prompt version.
    """
    if engine.settings.extractor == "heuristic":
        return HeuristicExtractor().describe()
    return {"kind": "llm", "prompt_version": PROMPT_VERSION, **describe_llm(engine)}
