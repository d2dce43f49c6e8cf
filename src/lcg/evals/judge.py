"""The judge: an LLM that aligns two extractions by meaning, or picks the better of two.

Prompts are pure functions next to their answer shapes, versioned by `JUDGE_PROMPT_VERSION`
(part of every cache key). Answers are cached on disk (`JudgeCache`), so re-running the same
evaluation makes zero judge calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from lcg.evals.judgecache import JudgeCache, judge_key
from lcg.evals.pairwise import Verdict
from lcg.extraction.llm import LlmClient, LlmRequest

__all__ = ["JUDGE_PROMPT_VERSION", "Judge", "align_prompt", "pairwise_prompt"]

JUDGE_PROMPT_VERSION = "lcg-judge-1"
_MAX_TOKENS = 2048

_ALIGN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "pairs": {
            "type": "array",
            "items": {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2},
        }
    },
    "required": ["pairs"],
}
_PAIRWISE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"winner": {"type": "string", "enum": ["A", "B", "tie"]}},
    "required": ["winner"],
}


def _numbered(items: Sequence[str]) -> str:
    return "\n".join(f"[{i}] {text}" for i, text in enumerate(items)) or "(none)"


def align_prompt(
    kind: Literal["entities", "facts"], candidate: Sequence[str], reference: Sequence[str]
) -> LlmRequest:
    """Ask which candidate items mean the same as which reference items (one-to-one)."""
    return LlmRequest(
        stage="judge_align",
        system=(
            f"You compare two lists of {kind} extracted from the same text by different "
            "systems. Pair each CANDIDATE item with the REFERENCE item that states the same "
            "thing (same real-world entity, or the same relation between the same entities), "
            "allowing different wording, spelling, abbreviations and predicate names. Each "
            "item may be used at most once; leave unmatched items out. Return JSON only: "
            '{"pairs": [[candidate_index, reference_index], ...]}.'
        ),
        user=f"CANDIDATE:\n{_numbered(candidate)}\nREFERENCE:\n{_numbered(reference)}",
        schema=_ALIGN_SCHEMA,
        schema_name="alignment",
        max_tokens=_MAX_TOKENS,
        prompt_version=JUDGE_PROMPT_VERSION,
    )


def pairwise_prompt(article: str, a: Sequence[str], b: Sequence[str]) -> LlmRequest:
    """Ask which extraction (A or B) captures the article's knowledge better."""
    return LlmRequest(
        stage="judge_pairwise",
        system=(
            "Two systems extracted facts from the same article. Judge which list captures the "
            "article's important knowledge more correctly and completely, penalising facts the "
            "article does not support. Answer A, B, or tie. Return JSON only: "
            '{"winner": "A" | "B" | "tie"}.'
        ),
        user=f"<article>\n{article}\n</article>\nA:\n{_numbered(a)}\nB:\n{_numbered(b)}",
        schema=_PAIRWISE_SCHEMA,
        schema_name="verdict",
        max_tokens=64,
        prompt_version=JUDGE_PROMPT_VERSION,
    )


class Judge:
    """A judge model behind the on-disk answer cache; counts the calls it really made."""

    def __init__(self, client: LlmClient, model: str, cache: JudgeCache) -> None:
        self.client = client
        self.model = model
        self.cache = cache
        self.calls = 0
        self.failures = 0

    async def _ask(self, request: LlmRequest) -> dict[str, Any] | None:
        key = judge_key(
            self.model,
            JUDGE_PROMPT_VERSION,
            request.stage,
            {"system": request.system, "user": request.user},
        )
        cached = self.cache.get(key)
        if isinstance(cached, dict):
            return cached
        self.calls += 1
        response = await self.client.complete(request)
        if response.data is None:
            self.failures += 1
            return None
        self.cache.put(key, response.data)
        return response.data

    async def align(
        self, kind: Literal["entities", "facts"], candidate: Sequence[str], reference: Sequence[str]
    ) -> list[tuple[int, int]]:
        if not candidate or not reference:
            return []
        data = await self._ask(align_prompt(kind, candidate, reference))
        pairs: list[tuple[int, int]] = []
        for item in (data or {}).get("pairs", []) or []:
            if (
                isinstance(item, list)
                and len(item) == 2
                and all(isinstance(x, int) and not isinstance(x, bool) for x in item)
            ):
                pairs.append((item[0], item[1]))
        return pairs

    async def pick(self, article: str, a: Sequence[str], b: Sequence[str]) -> Verdict:
        data = await self._ask(pairwise_prompt(article, a, b))
        winner = (data or {}).get("winner")
        return winner if winner in ("A", "B") else "tie"
