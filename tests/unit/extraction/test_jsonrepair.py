"""Recovering one JSON object from damaged model output."""

from __future__ import annotations

import json

import pytest

from lcg.extraction.jsonrepair import parse_json_object, remove_trailing_commas

ENTITIES = {
    "entities": [
        {"name": "Ada", "attributes": {"born": 1815, "tags": ["math", "poetry"]}},
        {"name": "Babbage", "attributes": {"born": 1791}},
    ]
}


def test_clean_json_needs_no_repair() -> None:
    parsed = parse_json_object(json.dumps(ENTITIES))
    assert parsed.data == ENTITIES
    assert parsed.repairs == ()
    assert parsed.error is None


@pytest.mark.parametrize("lang", ["json", "JSON", ""])
def test_code_fence_is_stripped(lang: str) -> None:
    text = f"```{lang}\n{json.dumps(ENTITIES, indent=2)}\n```"
    parsed = parse_json_object(text)
    assert parsed.data == ENTITIES
    assert parsed.repairs == ("code_fence",)


def test_unclosed_fence_still_parses() -> None:
    parsed = parse_json_object(f"```json\n{json.dumps(ENTITIES)}\n")
    assert parsed.data == ENTITIES
    assert "code_fence" in parsed.repairs


def test_prose_before_and_after_is_dropped() -> None:
    text = f"Sure! Here is the result:\n{json.dumps(ENTITIES)}\nLet me know if {{anything}} else."
    parsed = parse_json_object(text)
    assert parsed.data == ENTITIES
    assert parsed.repairs == ("prose_stripped",)


def test_braces_inside_strings_do_not_confuse_the_scan() -> None:
    obj = {"fact": 'she wrote "}{" on the board \\ twice', "n": [1, {"x": "]"}]}
    parsed = parse_json_object(f"Answer: {json.dumps(obj)} -- done }}")
    assert parsed.data == obj


def test_trailing_commas_are_tolerated() -> None:
    text = '{"entities": [{"name": "Ada", "tags": ["a", "b",],}, ], "note": "x, ]",}'
    parsed = parse_json_object(text)
    assert parsed.data == {"entities": [{"name": "Ada", "tags": ["a", "b"]}], "note": "x, ]"}
    assert parsed.repairs == ("trailing_commas",)


def test_remove_trailing_commas_leaves_strings_alone() -> None:
    assert remove_trailing_commas('{"a": ",}", "b": [1,\n ],}') == '{"a": ",}", "b": [1\n ]}'


def test_truncated_array_keeps_only_complete_items() -> None:
    full = json.dumps(ENTITIES)
    cut = full[: full.index('"Babbage"') + 12]  # stops inside the second item
    parsed = parse_json_object(cut)
    assert parsed.data == {"entities": [ENTITIES["entities"][0]]}
    assert parsed.repairs == ("truncated_salvage",)


def test_truncation_inside_a_nested_object_of_a_later_item_drops_that_item_whole() -> None:
    text = (
        '{"entities": [{"name": "Ada", "attributes": {"born": 1815}},'
        ' {"name": "Babbage", "attributes": {"born": 1791}, "summary": "Inventor of the'
    )
    parsed = parse_json_object(text)
    # The second item's nested object closed, but the item itself did not: it is dropped.
    assert parsed.data == {"entities": [{"name": "Ada", "attributes": {"born": 1815}}]}


def test_truncation_keeps_complete_top_level_members() -> None:
    text = '{"entities": [{"name": "Ada"}], "facts": [{"s": "Ada", "o": "Babbage"}, {"s": "Ad'
    parsed = parse_json_object(text)
    assert parsed.data == {
        "entities": [{"name": "Ada"}],
        "facts": [{"s": "Ada", "o": "Babbage"}],
    }


def test_truncated_fenced_string_array() -> None:
    parsed = parse_json_object('```json\n{"names": ["Ada", "Babbage", "Lovel')
    assert parsed.data == {"names": ["Ada", "Babbage"]}
    assert parsed.repairs == ("code_fence", "truncated_salvage")


def test_nothing_to_recover() -> None:
    assert parse_json_object("I cannot help with that.").data is None
    assert parse_json_object('{"a": tru').data is None
    assert parse_json_object("[1, 2, 3]").data is None  # an array is not an object
    assert parse_json_object('{"a": 1 "b": 2}').error == "the JSON object does not parse"
