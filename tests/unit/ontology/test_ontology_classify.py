"""Prompts and answer parsing of the LLM typing passes."""

from __future__ import annotations

import json

import pytest

from lcg.errors import ExtractionError
from lcg.extraction.llm import LlmResponse
from lcg.ontology import parse_ontology
from lcg.ontology.classify import entity_types_prompt, relation_types_prompt, verdicts

ONTOLOGY = parse_ontology(
    "entity_types: [{name: Person, description: A human}, {name: Document}]\n"
    "relation_types: [{name: AUTHORED, description: wrote it}, {name: CITES}]"
)


def _answer(data: object, truncated: bool = False) -> LlmResponse:
    return LlmResponse(
        data=data if isinstance(data, dict) else None,
        text=json.dumps(data),
        model="m",
        truncated=truncated,
    )


def test_verdicts_land_on_their_items_by_id_whatever_the_order() -> None:
    answer = _answer(
        {
            "classifications": [
                {"id": 2, "type": " Person "},
                {"id": 0, "type": "Document"},
                {"id": 9, "type": "Out of range"},
                {"id": True, "type": "Not an id"},
                {"id": 1, "type": 5},
                "junk",
            ]
        }
    )
    assert verdicts(answer, 3) == ["Document", "", "Person"]


@pytest.mark.parametrize("data", [None, {"types": []}, {"classifications": "Person"}])
def test_an_answer_without_classifications_is_an_extraction_error(data: object) -> None:
    with pytest.raises(ExtractionError):
        verdicts(_answer(data), 1)


def test_the_entity_prompt_is_open_ended_without_an_ontology_and_a_menu_with_one() -> None:
    items = [("Neil Armstrong", "  first   person on the moon "), ("RFC 2119", "")]
    open_ended = entity_types_prompt(items, None)
    menu = entity_types_prompt(items, ONTOLOGY)
    assert "Types:" not in open_ended.user and "PascalCase" in open_ended.user
    assert "- Document\n- Person: A human" in menu.user
    lines = [json.loads(x) for x in menu.user.splitlines() if x.startswith('{"id"')]
    assert lines == [
        {"id": 0, "name": "Neil Armstrong", "summary": "first person on the moon"},
        {"id": 1, "name": "RFC 2119", "summary": ""},
    ]
    assert menu.schema["required"] == ["classifications"]


def test_the_relation_prompt_offers_the_types_and_the_abstention() -> None:
    request = relation_types_prompt([("Neil wrote a memo", None), ("x" * 1000, "CITES")], ONTOLOGY)
    assert "- AUTHORED: wrote it\n- CITES" in request.user
    assert "UNCLASSIFIED" in request.user
    lines = [json.loads(x) for x in request.user.splitlines() if x.startswith('{"id"')]
    assert lines[0] == {"id": 0, "fact": "Neil wrote a memo", "current_type": None}
    assert len(lines[1]["fact"]) == 400 and lines[1]["current_type"] == "CITES"
