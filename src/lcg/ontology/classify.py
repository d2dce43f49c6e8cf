"""Prompts and answer parsing for the LLM typing passes
(docs/api.md §knowledge_reprocess_entity_types, §knowledge_reprocess_relation_types).

Each prompt is a pure function `items -> LlmRequest`; each parser turns the model's JSON object
into one verdict per item (an empty string when the model gave none, so the caller can leave the
item unchanged or mark it UNCLASSIFIED). Items are numbered in the prompt and answered by number,
so a reordered or partial answer still lands on the right item.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from lcg.errors import ExtractionError
from lcg.extraction.llm import LlmRequest, LlmResponse
from lcg.ontology.model import UNCLASSIFIED_RELATION, Ontology

__all__ = [
    "ENTITY_TYPES_PROMPT_VERSION",
    "RELATION_TYPES_PROMPT_VERSION",
    "entity_types_prompt",
    "relation_types_prompt",
    "verdicts",
]

ENTITY_TYPES_PROMPT_VERSION = "entity_types/1"
RELATION_TYPES_PROMPT_VERSION = "relation_types/1"
_SUMMARY_CHARS = 300
_FACT_CHARS = 400


def _schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "classifications": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"id": {"type": "integer"}, "type": {"type": "string"}},
                    "required": ["id", "type"],
                },
            }
        },
        "required": ["classifications"],
    }


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def entity_types_prompt(items: Sequence[tuple[str, str]], ontology: Ontology | None) -> LlmRequest:
    """Classify (name, summary) pairs; with `ontology`, only into its declared entity types."""
    if ontology is not None:
        menu = "\n".join(
            f"- {t.name}" + (f": {_clip(t.description, 160)}" if t.description else "")
            for t in sorted(ontology.entity_types, key=lambda t: t.name)
        )
        rule = (
            "Choose each entity's type from this list only, by its exact name. If none fits, "
            f'answer "" for that entity.\n\nTypes:\n{menu}'
        )
    else:
        rule = (
            "Give each entity one short type name in PascalCase (Person, Organization, "
            'Document, Place, ...). If you cannot tell, answer "".'
        )
    lines = [
        json.dumps({"id": i, "name": name, "summary": _clip(summary, _SUMMARY_CHARS)})
        for i, (name, summary) in enumerate(items)
    ]
    return LlmRequest(
        stage="entity_types",
        system="You classify the entities of a knowledge graph by type. Answer with JSON only.",
        user=(
            f"{rule}\n\nEntities (one JSON object a line):\n" + "\n".join(lines) + "\n\n"
            'Answer {"classifications": [{"id": <id>, "type": "<type or empty>"}, ...]} '
            "with one entry per entity."
        ),
        schema=_schema(),
        schema_name="entity_types",
        max_tokens=64 + 24 * len(items),
        prompt_version=ENTITY_TYPES_PROMPT_VERSION,
    )


def relation_types_prompt(
    items: Sequence[tuple[str, str | None]], ontology: Ontology
) -> LlmRequest:
    """Classify (fact, current type) pairs into the ontology's relation types, or abstain."""
    menu = "\n".join(
        f"- {r.name}" + (f": {_clip(r.description, 160)}" if r.description else "")
        for r in sorted(ontology.relation_types, key=lambda r: r.name)
    )
    lines = [
        json.dumps({"id": i, "fact": _clip(fact, _FACT_CHARS), "current_type": current})
        for i, (fact, current) in enumerate(items)
    ]
    return LlmRequest(
        stage="relation_types",
        system=(
            "You classify the relationships of a knowledge graph by relation type. "
            "Answer with JSON only."
        ),
        user=(
            "Choose the relation type each fact expresses from this list only, by its exact "
            f"name. If none fits, answer {UNCLASSIFIED_RELATION} rather than guess.\n\n"
            f"Relation types:\n{menu}\n\nFacts (one JSON object a line):\n"
            + "\n".join(lines)
            + '\n\nAnswer {"classifications": [{"id": <id>, "type": "<TYPE>"}, ...]} '
            "with one entry per fact."
        ),
        schema=_schema(),
        schema_name="relation_types",
        max_tokens=64 + 24 * len(items),
        prompt_version=RELATION_TYPES_PROMPT_VERSION,
    )


def verdicts(response: LlmResponse, count: int) -> list[str]:
    """One verdict per prompted item ("" where the answer had none).

    Raises:
        ExtractionError: the answer holds no usable JSON object.
    """
    data = response.data
    items = data.get("classifications") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise ExtractionError(
            "the model's answer has no classifications array"
            + (" (truncated)" if response.truncated else "")
        )
    out = [""] * count
    for item in items:
        if not isinstance(item, dict):
            continue
        index, verdict = item.get("id"), item.get("type")
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count:
            continue
        if isinstance(verdict, str):
            out[index] = verdict.strip()
    return out
