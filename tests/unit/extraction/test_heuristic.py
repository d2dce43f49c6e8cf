"""The offline heuristic extractor on a sample of the Apollo corpus style."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from lcg.extraction.heuristic import find_date, heuristic_entities, heuristic_facts, heuristic_graph

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


def test_each_sentence_gives_a_fact_named_by_its_verb_phrase() -> None:
    names = [e["name"] for e in heuristic_entities(SAMPLE)["entities"]]
    facts = heuristic_facts(SAMPLE, names)["facts"]
    triples = [(f["source"], f["predicate"], f["target"], f["valid_at"]) for f in facts]
    assert triples == [
        ("Apollo 11", "LAUNCHED_BY", "NASA", "1969-07-16T00:00:00Z"),  # auxiliary dropped
        ("Neil Armstrong", "COMMANDED", "Apollo 11", None),
    ]
    assert facts[1]["fact"] == "Neil Armstrong commanded Apollo 11."


def test_dates_in_several_shapes() -> None:
    assert find_date("on 20 July 1969 they landed") == "1969-07-20T00:00:00Z"
    assert find_date("in March 1972") == "1972-03-01T00:00:00Z"
    assert find_date("released 2023-09-02") == "2023-09-02T00:00:00Z"
    assert find_date("back in 1961") == "1961-01-01T00:00:00Z"
    assert find_date("no date here") is None


@dataclass(frozen=True)
class Shown:
    """An existing fact as the pipeline shows it to an extractor."""

    source: str
    predicate: str
    target: str


def _triples(text: str, existing: tuple[Shown, ...] = ()) -> list[tuple[str, str, str]]:
    return [
        (f["source"], f["predicate"], f["target"]) for f in heuristic_graph(text, existing)["facts"]
    ]


def test_verb_phrases_become_relation_types_not_sentence_fragments() -> None:
    assert _triples("Priya Shah now leads the Atlas project.") == [("Priya Shah", "LEADS", "Atlas")]
    assert _triples("The atlas-core repository was rewritten in Rust.") == [
        ("atlas-core", "REWRITTEN_IN", "Rust")
    ]
    assert _triples("The Atlas launch moved to 2025-09-15.") == [
        ("Atlas", "MOVED_TO", "2025-09-15")
    ]
    assert _triples("Priya Shah works as a Senior Engineer.") == [
        ("Priya Shah", "WORKS_AS", "Senior Engineer")
    ]


def test_one_fact_per_sentence_with_from_x_to_y_and_its_cue() -> None:
    shown = (
        Shown("Billing Service", "STORES_DATA_IN", "MySQL"),
        Shown("Billing Service", "USES", "Redis"),
    )
    facts = heuristic_graph("The Billing Service migrated from MySQL to PostgreSQL.", shown)[
        "facts"
    ]
    assert [(f["source"], f["predicate"], f["target"], f["supersedes"]) for f in facts] == [
        ("Billing Service", "MIGRATED_TO", "PostgreSQL", [0])
    ]


def test_from_x_to_y_after_an_unreadable_verb_phrase_ends_nothing() -> None:
    # From the Apollo corpus: the words before "from" are no relation type, so no change is
    # read; the sentence still gives its plain fact (it used to fail an assertion).
    shown = (Shown("Glenn", "FLEW_TO", "NAS Los Alamitos"),)
    facts = heuristic_graph(
        "On July 16, 1957, then-Major Glenn set the transcontinental air speed record, flying "
        "a F8U-1 Crusader from NAS Los Alamitos to Floyd Bennett Field, Brooklyn, in 3 hours.",
        shown,
    )["facts"]
    assert len(facts) == 1
    assert facts[0]["source"] == "Glenn"
    assert facts[0]["supersedes"] == []


def test_one_entity_sentences_give_a_status_value_and_left_ends_the_employer() -> None:
    shown = (Shown("Ana Silva", "WORKS_AT", "Acme Corp"), Shown("Ana Silva", "MENTORS", "Tom Reed"))
    found = heuristic_graph("Ana Silva left the company.", shown)
    assert [
        (f["source"], f["predicate"], f["target"], f["supersedes"]) for f in found["facts"]
    ] == [("Ana Silva", "STATUS", "left the company", [0])]
    assert {"name": "left the company", "type": "Status"} in [
        {"name": e["name"], "type": e["type"]} for e in found["entities"]
    ]
    assert _triples("The Legacy Gateway is now deprecated.") == [
        ("Legacy Gateway", "STATUS", "deprecated")
    ]


def test_headings_and_headers_are_not_entities_and_a_date_heading_dates_its_sentences() -> None:
    text = (
        "Document: Billing Service 1.0\n# Q2 Retro\n## 2025-03-03\n"
        "- Tom Reed moved to the Search Team.\n"
    )
    found = heuristic_graph(text)
    assert [e["name"] for e in found["entities"]] == ["Tom Reed", "Search Team"]
    assert all(e["summary"] == "Tom Reed moved to the Search Team." for e in found["entities"])
    assert found["facts"][0]["valid_at"] == "2025-03-03T00:00:00Z"


def test_additive_sentences_flag_nothing() -> None:
    shown = (Shown("Tom Reed", "JOINED", "Payments Team"),)
    facts = heuristic_graph("Tom Reed also moved from the Payments Team to the Guild Team.", shown)
    assert [f["supersedes"] for f in facts["facts"]] == [[]]


def test_every_apollo_article_reads_without_error() -> None:
    corpus = Path(__file__).resolve().parents[3] / "examples/apollo/corpus_prose.jsonl"
    read = 0
    for line in corpus.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if "prose" in record:
            graph = heuristic_graph(record["prose"])
            assert all(f["source"] and f["target"] and f["predicate"] for f in graph["facts"])
            read += 1
    assert read == 228
