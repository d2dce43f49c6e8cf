"""The offline heuristic extractor on a sample of the Apollo corpus style."""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from lcg.extraction import heuristic
from lcg.extraction.heuristic import find_date, heuristic_entities, heuristic_facts, heuristic_graph
from lcg.ontology import EntityType, Ontology, RelationType

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


REF = datetime(2025, 5, 14, tzinfo=UTC)  # a Wednesday


def _read(text: str, existing: tuple[Shown, ...] = (), **options: Any) -> list[tuple[Any, ...]]:
    found = heuristic_graph(text, existing, reference_time=REF, **options)
    return [
        (f["source"], f["predicate"], f["target"], f["valid_at"], f["supersedes"])
        for f in found["facts"]
    ]


def test_common_noun_phrases_are_fact_endpoints_and_roles_need_no_article() -> None:
    assert _read("Maya Chen was promoted to principal engineer.") == [
        ("Maya Chen", "PROMOTED_TO", "principal engineer", None, [])
    ]
    assert _read("The ledger was rewritten in Rust.") == [
        ("ledger", "REWRITTEN_IN", "Rust", None, [])
    ]
    assert _read("Dana Kim is a member of the Infra Team.") == [
        ("Dana Kim", "MEMBER_OF", "Infra Team", None, [])
    ]
    shown = (Shown("Maya Chen", "MEMBER_OF", "search team"),)
    assert _read("Maya Chen moved from the search team to the ledger team.", shown) == [
        ("Maya Chen", "MOVED_TO", "ledger team", None, [0])
    ]


def test_we_sentences_are_facts_about_their_object() -> None:
    assert _read("We moved the ledger repository under the payments organization.") == [
        ("ledger repository", "MOVED_UNDER", "payments organization", None, [])
    ]
    assert _read("We wrote the deploy tool in Bash.") == [
        ("deploy tool", "WRITTEN_IN", "Bash", None, [])
    ]
    shown = (Shown("orders service", "RUN_ON", "MySQL"),)
    assert _read("We migrated the orders service from MySQL to PostgreSQL.", shown) == [
        ("orders service", "MIGRATED_TO", "PostgreSQL", None, [0])
    ]


def test_a_passive_lead_is_read_the_active_way() -> None:
    assert _read("The Borealis project is now led by Dana Kim.") == [
        ("Dana Kim", "LEADS", "Borealis", None, [])
    ]


def test_relative_dates_date_the_fact_against_the_reference_time() -> None:
    assert _read("Yesterday Bruno Alves moved to the risk team.") == [
        ("Bruno Alves", "MOVED_TO", "risk team", "2025-05-13T00:00:00Z", [])
    ]
    assert _read("Since last Friday the web team is led by Petra Holm.") == [
        ("Petra Holm", "LEADS", "web team", "2025-05-09T00:00:00Z", [])
    ]
    # Under a date heading, the heading is the reference.
    assert _read("## 2025-03-05\n- In February Ines Duarte became head of the mobile guild.") == [
        ("Ines Duarte", "HEAD_OF", "mobile guild", "2025-02-01T00:00:00Z", [])
    ]


def test_pronouns_resolve_to_the_last_compatible_entity() -> None:
    text = "Maya Chen joined Acme. She was promoted to staff engineer."
    assert _read(text)[1][:3] == ("Maya Chen", "PROMOTED_TO", "staff engineer")
    assert _read("He was promoted to staff engineer.") == []  # no antecedent: no fact


def test_in_a_chat_i_is_the_speaker_and_openers_are_no_entities() -> None:
    found = heuristic_graph(
        "user: Glad you asked! I'm Craig. I moved to the ledger team last week.",
        reference_time=REF,
        source_type="message",
    )
    assert [(f["source"], f["predicate"], f["target"], f["valid_at"]) for f in found["facts"]] == [
        ("user", "MOVED_TO", "ledger team", "2025-05-05T00:00:00Z")
    ]
    assert {e["name"] for e in found["entities"]} == {"user", "ledger team"}
    assert found["unread"] == 1  # "Glad you asked!"; "I'm Craig." is too short to be read


def test_literals_pronouns_and_verb_openers_never_become_entities() -> None:
    text = (
        "Set the flag to True when None is given. Pin Werkzeug to the last release.\n"
        "The C and Z values are ignored. I'm sure it works."
    )
    names = {e["name"] for e in heuristic_graph(text)["entities"]}
    assert names == {"Werkzeug"}


def test_sentences_with_no_readable_verb_give_no_co_mention_pair() -> None:
    found = heuristic_graph("NASA and Blue Origin, Kennedy Space Center.")
    assert found["facts"] == []
    assert found["unread"] == 1


def test_a_change_cue_ends_an_earlier_fact_of_the_same_text() -> None:
    text = (
        "## 2024-05-06\n- Leo Park works at Umbrella.\n"
        "## 2025-03-31\n- Leo Park left Umbrella.\n"
        "## 2025-04-07\n- The catalog service uses Memcached.\n"
        "## 2025-05-05\n- The catalog service replaced Memcached with Redis.\n"
    )
    facts = heuristic_graph(text)["facts"]
    ended = {(f["source"], f["target"]): f["invalid_at"] for f in facts}
    assert [(f["predicate"], f["invalid_at"]) for f in facts if f["target"] == "Umbrella"] == [
        ("WORKS_AT", "2025-03-31T00:00:00Z"),
        ("LEFT", None),
    ]
    assert ended[("catalog service", "Memcached")] == "2025-05-05T00:00:00Z"
    assert [f["predicate"] for f in facts if f["target"] == "Redis"] == ["USES"]


def test_relation_types_map_onto_the_ontologys_declared_types() -> None:
    ontology = Ontology(
        entity_types=(EntityType("Team"),),
        relation_types=(RelationType("EMPLOYED_BY", aliases=("join",)),),
    )
    found = heuristic_graph("Maya Chen joined the search team.", ontology=ontology)
    assert [(f["predicate"], f.get("relation_type")) for f in found["facts"]] == [
        ("JOINED", "EMPLOYED_BY")
    ]
    assert {e["name"]: e["type"] for e in found["entities"]}["search team"] == "Team"


def _split_whole(text: str) -> list[str]:
    """What `sentences` gave when it split the whole text in one regex call."""
    return [s.strip() for s in heuristic._SENTENCE_END.split(text) if s and s.strip()]


def test_sentences_cut_in_windows_are_the_sentences_of_the_whole_text(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(heuristic, "_SPLIT_WINDOW", 7)  # a cut in nearly every text below
    rng = random.Random(20261207)
    alphabet = ["a", "B", "7", '"', "(", ".", "!", "?", " ", "  ", "\t", "\n", "\r\n", "x.Y"]
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(60)))
        assert heuristic.sentences(text) == _split_whole(text), repr(text)


class _Spy:
    """`_SENTENCE_END` that notes the longest string one call of it was given."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.pattern = pattern
        self.longest = 0

    def split(self, text: str) -> list[str]:
        self.longest = max(self.longest, len(text))
        return self.pattern.split(text)


def test_a_huge_line_is_split_without_one_regex_call_over_all_of_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # One call over a 15 MB line held the GIL for over a second: the service's event loop
    # (health_check) waited as long.
    spy = _Spy(heuristic._SENTENCE_END)
    monkeypatch.setattr(heuristic, "_SENTENCE_END", spy)
    text = "Alice Smith works at Acme Corporation in Berlin since 2019. " * 20_000  # 1.2 MB
    found = heuristic.sentences(text)
    assert len(found) == 20_000
    assert set(found) == {"Alice Smith works at Acme Corporation in Berlin since 2019."}
    assert spy.longest < 100_000  # windows of about 64 KB
