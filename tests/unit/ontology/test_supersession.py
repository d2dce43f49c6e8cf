"""lcg's built-in single-valued families: exact word matches only, sides, kinds of target."""

from __future__ import annotations

import pytest

from lcg.ontology.supersession import family_of, is_additive, relation_words


@pytest.mark.parametrize(
    ("relation_type", "target", "family", "side"),
    [
        ("LEADS", "", "lead", "target"),
        ("NOW_LEADS", "", "lead", "target"),
        ("leads", "", "lead", "target"),
        ("ReportsTo", "", "reports_to", "source"),
        ("WORKS_AT", "", "employer", "source"),
        ("OWNED_BY", "", "owned_by", "source"),
        ("WRITTEN_IN", "", "language", "source"),
        ("REWRITTEN_IN", "", "language", "source"),
        ("MOVED_TO", "Search Team", "membership", "source"),
        ("MOVED_TO", "PostgreSQL", "primary_store", "source"),
        ("MOVED_TO", "2025-09-15", "deadline", "source"),
        ("MOVED_TO", "September 15", "deadline", "source"),
        ("PROMOTED_TO", "Staff Engineer", "role", "source"),
    ],
)
def test_families(relation_type: str, target: str, family: str, side: str) -> None:
    found = family_of(relation_type, target)
    assert found is not None and (found.name, found.side) == (family, side)


@pytest.mark.parametrize(
    ("relation_type", "target"),
    [
        ("USES", "PostgreSQL"),  # a service uses many things
        ("MOVED_TO", "Berlin"),  # a movement verb needs a target that says what it is
        ("LEADS_DESIGN_OF", ""),  # never a substring match
        ("MENTIONED_WITH", ""),
        ("CO_LEADS", ""),
        ("", ""),
    ],
)
def test_not_single_valued(relation_type: str, target: str) -> None:
    assert family_of(relation_type, target) is None


def test_relation_words_and_additive_sentences() -> None:
    assert relation_words("NOW_REPORTS_TO") == ("report", "to")
    assert is_additive("Maria also leads Borealis.")
    assert is_additive("Tom co-leads the guild.")
    assert not is_additive("Priya Shah now leads the Atlas project.")
