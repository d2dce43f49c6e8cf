"""Derived supersession links and fact statuses (lcg.temporal.timeline), on plain Fact values."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from lcg.models import Fact
from lcg.temporal.timeline import fact_status, successions

JAN = datetime(2024, 1, 1, tzinfo=UTC)
JUN = datetime(2024, 6, 1, tzinfo=UTC)
C1 = datetime(2026, 1, 1, tzinfo=UTC)
C2 = datetime(2026, 2, 1, tzinfo=UTC)
NOW = datetime(2026, 6, 1, tzinfo=UTC)

OLD = Fact(
    uuid="old",
    group_id="g",
    source_uuid="x",
    target_uuid="a",
    name="HOSTED_AT",
    fact="x is hosted at a",
    valid_at=JAN,
    invalid_at=JUN,
    created_at=C1,
    expired_at=C2,
)
NEW = replace(
    OLD, uuid="new", target_uuid="b", valid_at=JUN, invalid_at=None, created_at=C2, expired_at=None
)
ADDED = replace(NEW, uuid="added", target_uuid="c", name="MAINTAINED_BY")


def test_the_fact_learned_when_the_old_one_was_retired_supersedes_it() -> None:
    assert successions([OLD, NEW]) == {"old": ["new"]}
    assert successions([OLD, NEW, ADDED]) == {"old": ["new"]}


def test_a_fact_of_another_commit_or_starting_at_another_time_does_not() -> None:
    later = replace(NEW, created_at=C2 + timedelta(days=1))
    assert successions([OLD, later]) == {}
    shifted = replace(NEW, valid_at=JUN + timedelta(seconds=1))
    assert successions([OLD, shifted]) == {}
    elsewhere = replace(NEW, group_id="h")
    assert successions([OLD, elsewhere]) == {}
    unrelated = replace(NEW, source_uuid="y", target_uuid="z")
    assert successions([OLD, unrelated]) == {}


def test_a_reworded_successor_is_linked_only_when_it_is_the_only_candidate() -> None:
    reworded = replace(NEW, name="MOVED_TO")
    assert successions([OLD, reworded]) == {"old": ["new"]}
    assert successions([OLD, reworded, ADDED]) == {}  # ambiguous: not guessed
    # A successor about the same object (another subject) counts: it shares an endpoint.
    rival = replace(NEW, uuid="rival", source_uuid="w", target_uuid="a", name="HOSTED_AT")
    assert successions([OLD, rival]) == {"old": ["rival"]}


def test_a_fact_that_ended_without_retirement_is_followed_by_the_same_relation() -> None:
    ended = replace(OLD, expired_at=None)
    follow = replace(NEW, created_at=C1 + timedelta(days=9))
    assert successions([ended, follow]) == {"old": ["new"]}
    assert successions([ended, replace(follow, name="OTHER")]) == {}


def test_statuses() -> None:
    assert fact_status(NEW, NOW) == "current"
    assert fact_status(OLD, NOW) == "superseded"
    assert fact_status(replace(OLD, invalid_at=None), NOW) == "retracted"
    assert fact_status(replace(OLD, expired_at=None), NOW) == "ended"
    assert fact_status(replace(OLD, expired_at=None, invalid_at=NOW + timedelta(1)), NOW) == (
        "current"
    )
