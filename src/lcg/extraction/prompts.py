"""The extraction prompts and the shapes their answers take.

An episode is extracted either in two calls (entities, then facts between them) or, when it is
short, in one call that returns both (`episode_prompt`); the pipeline chooses by length
(LCG_EXTRACTION_SINGLE_CALL_MAX_CHARS). Prompts are pure functions `context -> LlmRequest`, each
next to its response model. Their size depends on the episode only, never on the graph: the fact-
extracting prompts receive at most K existing facts (chosen by the caller, most similar first)
and the ontology's bounded vocabulary block.
`PROMPT_VERSION` changes whenever a prompt's wording or schema does; it is recorded with every
request (cassettes key on it) and reported in ingestion results.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from lcg.extraction.llm import LlmRequest
from lcg.ontology.model import Ontology
from lcg.timeutil import to_wal

__all__ = [
    "PROMPT_VERSION",
    "DedupAnswer",
    "EntitiesAnswer",
    "EpisodeContext",
    "ExistingFact",
    "ExtractedEntity",
    "ExtractedFact",
    "FactsAnswer",
    "GraphAnswer",
    "KnownEntity",
    "calls_for",
    "dedup_prompt",
    "entities_prompt",
    "episode_prompt",
    "facts_prompt",
]

PROMPT_VERSION = "lcg-extract-4"

ENTITIES_MAX_TOKENS = 2048
FACTS_MAX_TOKENS = 3072
EPISODE_MAX_TOKENS = 4096
DEDUP_MAX_TOKENS = 512
# Existing facts are shown shortened: the prompt must not grow with the graph.
_EXISTING_FACT_CHARS = 160


class ExtractedEntity(BaseModel):
    """One entity as the model names it."""

    model_config = ConfigDict(extra="ignore")

    name: str
    type: str = "Entity"
    summary: str = ""
    aliases: list[str] = Field(default_factory=list)
    attributes: dict[str, Any] = Field(default_factory=dict)


class EntitiesAnswer(BaseModel):
    """The entities call's answer."""

    model_config = ConfigDict(extra="ignore")

    entities: list[ExtractedEntity] = Field(default_factory=list)


class ExtractedFact(BaseModel):
    """One fact: a directed relation between two named entities, with its world time."""

    model_config = ConfigDict(extra="ignore")

    source: str
    target: str
    predicate: str
    fact: str
    relation_type: str | None = None
    valid_at: str | None = None
    invalid_at: str | None = None
    supersedes: list[int] = Field(default_factory=list)


class FactsAnswer(BaseModel):
    """The facts call's answer."""

    model_config = ConfigDict(extra="ignore")

    facts: list[ExtractedFact] = Field(default_factory=list)


class GraphAnswer(BaseModel):
    """The single call's answer: the entities and the facts between them."""

    model_config = ConfigDict(extra="ignore")

    entities: list[ExtractedEntity] = Field(default_factory=list)
    facts: list[ExtractedFact] = Field(default_factory=list)


@dataclass(frozen=True)
class EpisodeContext:
    """What both prompts know about the episode."""

    name: str
    content: str
    source_type: str  # "text" | "json" | "message"
    reference_time: datetime
    ontology_block: str = ""
    # The ontology itself, for extractors that map onto it without a prompt (the heuristic).
    ontology: Ontology | None = None


@dataclass(frozen=True)
class KnownEntity:
    """An entity of this episode as the facts prompt lists it."""

    name: str
    type: str


@dataclass(frozen=True)
class ExistingFact:
    """An active fact of the graph the new text might supersede (shown with its index)."""

    source: str
    predicate: str
    target: str
    fact: str
    valid_at: datetime | None


_ENTITY_RULES = (
    "Entities are people, organisations, places, projects, products, events, documents and "
    "named concepts that the text states something about. Use the most complete proper name "
    "in the text; list other names used for it (acronyms, short forms) in aliases. summary: "
    "one sentence about the entity from this text only. type: one type name. attributes: flat "
    "key/value facts about the entity itself (strings or numbers). Skip pronouns, dates, "
    "quantities and generic nouns."
)

_ENTITIES_SYSTEM = (
    "You extract entities from one episode of text for a knowledge graph. Return JSON only.\n"
    + _ENTITY_RULES
)

_FACT_FIELDS = (
    "predicate: a short UPPER_SNAKE verb phrase (e.g. WORKS_AT, LOCATED_IN). relation_type: the "
    "ontology's relation type that fits, or null. fact: one self-contained sentence. valid_at / "
    "invalid_at: ISO 8601 times the text gives for when the fact started / stopped being true "
    "(null when not stated; relative dates resolve against the reference time). supersedes: "
    "indexes of EXISTING FACTS that this fact replaces because they are no longer true (a new "
    "role, owner, location or value); [] when the fact only adds information."
)

_FACTS_SYSTEM = (
    "You extract facts (directed relations between the listed entities) from one episode of "
    "text. Return JSON only.\n"
    "source and target: entity names exactly as listed. " + _FACT_FIELDS
)

_EPISODE_SYSTEM = (
    "You extract entities and the facts between them from one episode of text for a knowledge "
    "graph. Return JSON only.\n"
    + _ENTITY_RULES
    + "\nFacts are directed relations between those entities that the text states. source and "
    "target: names exactly as in your entities list. " + _FACT_FIELDS
)


def _episode_block(ctx: EpisodeContext) -> str:
    return (
        f"REFERENCE TIME: {to_wal(ctx.reference_time)}\n"
        f"SOURCE TYPE: {ctx.source_type}\n"
        f"EPISODE NAME: {ctx.name}\n"
        f"<episode>\n{ctx.content}\n</episode>"
    )


def _ontology(ctx: EpisodeContext) -> str:
    return f"\n{ctx.ontology_block.strip()}\n" if ctx.ontology_block.strip() else ""


def entities_prompt(ctx: EpisodeContext) -> LlmRequest:
    """The first call: which entities the episode talks about."""
    return LlmRequest(
        stage="entities",
        system=_ENTITIES_SYSTEM + _ontology(ctx),
        user=_episode_block(ctx),
        schema=_schema(EntitiesAnswer),
        schema_name="entities",
        max_tokens=ENTITIES_MAX_TOKENS,
        prompt_version=PROMPT_VERSION,
    )


def _existing_line(index: int, f: ExistingFact) -> str:
    text = f.fact if len(f.fact) <= _EXISTING_FACT_CHARS else f.fact[: _EXISTING_FACT_CHARS - 1]
    since = f" (since {f.valid_at.date().isoformat()})" if f.valid_at else ""
    return f"[{index}] {f.source} {f.predicate} {f.target}: {text}{since}"


def _existing_block(existing: Sequence[ExistingFact]) -> str:
    lines = "\n".join(_existing_line(i, f) for i, f in enumerate(existing)) or "(none)"
    return f"EXISTING FACTS:\n{lines}\n"


def calls_for(text: str, single_call_max_chars: int) -> int:
    """How many calls extract an episode of `text`: one (`episode_prompt`) up to
    `single_call_max_chars` characters, else two (`entities_prompt`, then `facts_prompt`)."""
    return 1 if len(text) <= single_call_max_chars else 2


def facts_prompt(
    ctx: EpisodeContext, entities: Sequence[KnownEntity], existing: Sequence[ExistingFact]
) -> LlmRequest:
    """The second call: facts between the extracted entities, and which existing ones end."""
    listed = "\n".join(f"- {e.name} ({e.type})" for e in entities)
    return LlmRequest(
        stage="facts",
        system=_FACTS_SYSTEM + _ontology(ctx),
        user=f"ENTITIES:\n{listed}\n{_existing_block(existing)}{_episode_block(ctx)}",
        schema=_schema(FactsAnswer),
        schema_name="facts",
        max_tokens=FACTS_MAX_TOKENS,
        prompt_version=PROMPT_VERSION,
    )


def episode_prompt(ctx: EpisodeContext, existing: Sequence[ExistingFact]) -> LlmRequest:
    """The single call for a short episode: its entities, the facts between them, and which
    existing facts they end (the existing facts are about entities the text names)."""
    return LlmRequest(
        stage="extract",
        system=_EPISODE_SYSTEM + _ontology(ctx),
        user=f"{_existing_block(existing)}{_episode_block(ctx)}",
        schema=_schema(GraphAnswer),
        schema_name="graph",
        max_tokens=EPISODE_MAX_TOKENS,
        prompt_version=PROMPT_VERSION,
    )


class DedupAnswer(BaseModel):
    """The optional dedup call's answer: for each numbered pair, whether both name one thing."""

    model_config = ConfigDict(extra="ignore")

    same: list[int] = Field(default_factory=list)


def dedup_prompt(pairs: Sequence[tuple[str, str, str, str]]) -> LlmRequest:
    """Ambiguous pairs only: (new name, new summary, existing name, existing summary)."""
    body = "\n".join(
        f"[{i}] NEW: {a} — {sa[:200]}\n    EXISTING: {b} — {sb[:200]}"
        for i, (a, sa, b, sb) in enumerate(pairs)
    )
    return LlmRequest(
        stage="dedup",
        system=(
            "For each numbered pair decide whether NEW and EXISTING refer to the same real-world "
            "entity. Return JSON only: the indexes of the pairs that are the same, in `same`."
        ),
        user=body,
        schema=_schema(DedupAnswer),
        schema_name="dedup",
        max_tokens=DEDUP_MAX_TOKENS,
        prompt_version=PROMPT_VERSION,
    )


@functools.cache
def _schema(model: type[BaseModel]) -> dict[str, Any]:
    """`model`'s JSON schema, built once: pydantic rebuilds it on every call (12 ms a call on
    the shared machine, 300 ms the first time, which fell on the first episode after opening).
    Shared by every request: never mutated."""
    return model.model_json_schema()


for _answer in (EntitiesAnswer, FactsAnswer, GraphAnswer, DedupAnswer):
    _schema(_answer)  # at import (engine open), not in the first episode's time
