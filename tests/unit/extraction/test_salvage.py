"""Item-level salvage of model answers: repairs and drops are made one item at a time and counted."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from lcg.extraction.salvage import (
    SalvageReport,
    normalize_predicate,
    salvage_entities,
    salvage_facts,
    salvage_graph,
)


def test_nested_attribute_values_become_json_strings_and_empty_keys_go() -> None:
    report = SalvageReport()
    [e] = salvage_entities(
        {
            "entities": [
                {
                    "name": "Apollo 11",
                    "type": "Mission",
                    "summary": "First crewed landing.",
                    "attributes": {
                        "crew": ["Armstrong", "Aldrin"],
                        "": "x",
                        " ": 1,
                        "pad": {"id": "39A"},
                    },
                }
            ]
        },
        report,
    )
    assert e.attributes == {
        "crew": json.dumps(["Armstrong", "Aldrin"], separators=(",", ":")),
        "pad": '{"id":"39A"}',
    }
    assert report.attributes_coerced == 2
    assert report.empty_keys_dropped == 2


def test_empty_or_missing_types_fall_back_to_entity_and_are_counted() -> None:
    report = SalvageReport()
    out = salvage_entities(
        {
            "entities": [
                {"name": "A", "type": ""},
                {"name": "B", "labels": []},
                {"name": "C", "labels": ["Entity", "Person"]},
            ]
        },
        report,
    )
    assert [e.type for e in out] == ["Entity", "Entity", "Person"]
    assert report.labels_defaulted == 2
    assert report.entities_missing_summary == 3


def test_items_without_a_name_are_dropped_the_rest_kept() -> None:
    report = SalvageReport()
    out = salvage_entities(
        {"entities": [{"name": " "}, 42, {"summary": "x"}, "NASA", {"name": "ESA"}]}, report
    )
    assert [e.name for e in out] == ["NASA", "ESA"]
    assert report.entities_dropped_malformed == 3


def test_facts_missing_required_fields_are_dropped_and_counted() -> None:
    report = SalvageReport()
    out = salvage_facts(
        {
            "facts": [
                {"source": "A", "target": "B", "predicate": "knows", "fact": "A knows B."},
                {"source": "A", "target": "", "predicate": "x", "fact": "broken"},
                {"source": "A", "target": "B", "predicate": "x"},
                "not an object",
            ]
        },
        report,
    )
    assert [(f.source, f.predicate, f.target) for f in out] == [("A", "KNOWS", "B")]
    assert report.edges_dropped_malformed == 3


def test_timestamps_are_validated_repaired_or_dropped() -> None:
    report = SalvageReport()
    out = salvage_facts(
        {
            "facts": [
                {
                    "source": "A",
                    "target": "B",
                    "predicate": "p",
                    "fact": "f1",
                    "valid_at": "1969-07-16",
                },
                {
                    "source": "A",
                    "target": "B",
                    "predicate": "p",
                    "fact": "f2",
                    "valid_at": "last summer",
                },
                {
                    "source": "A",
                    "target": "B",
                    "predicate": "p",
                    "fact": "f3",
                    "valid_at": "2020-01-01T00:00:00Z",
                    "invalid_at": "2019-01-01T00:00:00Z",
                },
                {
                    "source": "A",
                    "target": "B",
                    "predicate": "p",
                    "fact": "f4",
                    "valid_at": "2021-02-30T00:00:00Z",
                },
            ]
        },
        report,
    )
    assert out[0].valid_at == datetime(1969, 7, 16, tzinfo=UTC)
    assert out[1].valid_at is None
    assert out[2].valid_at == datetime(2020, 1, 1, tzinfo=UTC) and out[2].invalid_at is None
    assert out[3].valid_at is None
    assert report.timestamps_repaired == 1
    assert report.timestamps_dropped == 3


def test_supersedes_accepts_only_indexes() -> None:
    report = SalvageReport()
    [f] = salvage_facts(
        {
            "facts": [
                {
                    "source": "A",
                    "target": "B",
                    "predicate": "p",
                    "fact": "f",
                    "supersedes": [0, "2", True, "x", 0],
                }
            ]
        },
        report,
    )
    assert f.supersedes == (0, 2)


def test_an_answer_without_the_list_is_counted_unusable() -> None:
    report = SalvageReport()
    assert salvage_entities(None, report) == []
    assert salvage_facts({"facts": "none"}, report) == []
    assert report.answer_unusable == 2


def test_predicates_are_normalised_to_upper_snake() -> None:
    assert normalize_predicate("works at") == "WORKS_AT"
    assert normalize_predicate("worksAt") == "WORKS_AT"
    assert normalize_predicate("MOVED-TO ") == "MOVED_TO"


def test_the_single_call_answer_splits_into_entities_and_facts() -> None:
    report = SalvageReport()
    ents, facts = salvage_graph(
        {
            "entities": [{"name": "Bob"}, {"name": "Acme", "type": ""}],
            "facts": [
                {"source": "Bob", "target": "Acme", "predicate": "works at", "fact": "Bob works."},
                {"source": "Bob", "predicate": "KNOWS", "fact": "no target"},
            ],
        },
        report,
    )
    assert [e.name for e in ents] == ["Bob", "Acme"]
    assert [(f.source, f.predicate, f.target) for f in facts] == [("Bob", "WORKS_AT", "Acme")]
    # Both entities lack a type; one fact lacks its target; the answer itself is fine.
    assert (report.labels_defaulted, report.edges_dropped_malformed, report.answer_unusable) == (
        2,
        1,
        0,
    )


def test_a_single_call_answer_without_facts_or_wrapped_is_still_read() -> None:
    report = SalvageReport()
    ents, facts = salvage_graph({"entities": [{"name": "Bob"}]}, report)
    assert [e.name for e in ents] == ["Bob"] and facts == []
    wrapped = {"graph": {"entities": [{"name": "Ann"}], "facts": []}}
    ents, facts = salvage_graph(wrapped, report)
    assert [e.name for e in ents] == ["Ann"] and facts == []
    assert report.answer_unusable == 0 and report.edges_dropped_malformed == 0


def test_a_single_call_answer_with_neither_list_is_unusable() -> None:
    report = SalvageReport()
    assert salvage_graph({"items": [{"name": "Bob"}]}, report) == ([], [])
    assert salvage_graph(None, report) == ([], [])
    assert report.answer_unusable == 2
