"""The offline heuristic extractor on a sample of the Apollo corpus style."""

from __future__ import annotations

from lcg.extraction.heuristic import find_date, heuristic_entities, heuristic_facts

SAMPLE = (
    "Apollo 11 was launched by NASA on July 16, 1969. Neil Armstrong commanded Apollo 11. "
    "Shortly after, Michael Collins stayed in orbit.\nReferences."
)


def test_capitalised_noun_phrases_become_entities_without_sentence_openers() -> None:
    names = [e["name"] for e in heuristic_entities(SAMPLE)["entities"]]
    assert names == ["Apollo 11", "NASA", "Neil Armstrong", "Michael Collins"]


def test_every_entity_gets_the_first_sentence_naming_it_as_summary() -> None:
    by_name = {e["name"]: e for e in heuristic_entities(SAMPLE)["entities"]}
    assert by_name["Neil Armstrong"]["summary"] == "Neil Armstrong commanded Apollo 11."
    assert by_name["NASA"]["type"] == "Entity"


def test_co_occurrence_per_sentence_becomes_facts_named_by_the_words_between() -> None:
    names = [e["name"] for e in heuristic_entities(SAMPLE)["entities"]]
    facts = heuristic_facts(SAMPLE, names)["facts"]
    triples = [(f["source"], f["predicate"], f["target"], f["valid_at"]) for f in facts]
    assert triples == [
        ("Apollo 11", "WAS_LAUNCHED_BY", "NASA", "1969-07-16T00:00:00Z"),
        ("Neil Armstrong", "COMMANDED", "Apollo 11", None),
    ]
    assert facts[1]["fact"] == "Neil Armstrong commanded Apollo 11."


def test_dates_in_several_shapes() -> None:
    assert find_date("on 20 July 1969 they landed") == "1969-07-20T00:00:00Z"
    assert find_date("in March 1972") == "1972-03-01T00:00:00Z"
    assert find_date("released 2023-09-02") == "2023-09-02T00:00:00Z"
    assert find_date("back in 1961") == "1961-01-01T00:00:00Z"
    assert find_date("no date here") is None
