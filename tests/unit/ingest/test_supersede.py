"""Supersession rules on resolved facts (no database: a group index built in memory)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from lcg.extraction.salvage import CleanFact
from lcg.ingest.index import GroupIndex
from lcg.ingest.resolve import ResolvedFact
from lcg.ingest.supersede import FactPlan, plan_facts, superseded_report
from lcg.models import Entity, Fact
from lcg.ontology import EMPTY_ONTOLOGY, Ontology, parse_ontology

T0 = datetime(2024, 1, 1, tzinfo=UTC)
T1 = datetime(2024, 6, 1, tzinfo=UTC)
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _index(*facts: Fact) -> GroupIndex:
    index = GroupIndex("g", 8)
    for name in ("alice", "acme", "globex", "bob"):
        index.put_entity(Entity(name, "g", name.title()), None)
    for f in facts:
        index.put_fact(f, None)
    return index


def _old(uuid: str, target: str, predicate: str = "WORKS_AT", valid_at: datetime = T0) -> Fact:
    return Fact(
        uuid,
        "g",
        "alice",
        target,
        predicate,
        f"Alice {predicate} {target}.",
        predicate,
        valid_at=valid_at,
    )


def _new(
    target: str,
    *,
    supersedes: tuple[int, ...] = (),
    valid_at: datetime | None = None,
    invalid_at: datetime | None = None,
    predicate: str = "WORKS_AT",
) -> ResolvedFact:
    fact = CleanFact(
        "Alice",
        target,
        predicate,
        f"Alice now {predicate} {target}.",
        None,
        valid_at,
        invalid_at,
        supersedes,
    )
    return ResolvedFact(fact, "alice", target)


def _plan(
    index: GroupIndex,
    new: list[ResolvedFact],
    candidates: list[Fact],
    ontology: Ontology = EMPTY_ONTOLOGY,
) -> FactPlan:
    return plan_facts(
        index,
        new,
        candidates,
        ontology=ontology,
        group_id="g",
        episode_uuid="ep",
        reference_time=T1,
        now=NOW,
    )


def test_a_flagged_fact_ends_where_the_new_one_starts_and_expires_now() -> None:
    old = _old("f1", "acme")
    plan = _plan(_index(old), [_new("globex", supersedes=(0,))], [old])
    [inv] = plan.invalidations.values()
    assert (inv.fact_uuid, inv.invalid_at, inv.expired_at) == ("f1", T1, NOW)
    assert plan.new_facts[0].valid_at == T1  # no date from the model: the reference time


def test_additive_facts_invalidate_nothing() -> None:
    old = _old("f1", "acme")
    plan = _plan(_index(old), [_new("bob", predicate="KNOWS")], [old])
    assert plan.invalidations == {} and len(plan.new_facts) == 1


def test_single_valued_relation_types_supersede_without_a_flag() -> None:
    ontology = parse_ontology("relation_types:\n  - name: WORKS_AT\n    cardinality: one\n")
    old = _old("f1", "acme")
    plan = _plan(_index(old), [_new("globex")], [], ontology)
    assert list(plan.invalidations) == ["f1"]


def test_an_older_new_fact_is_stored_already_ended_instead() -> None:
    old = _old("f1", "acme", valid_at=T1)
    plan = _plan(_index(old), [_new("globex", supersedes=(0,), valid_at=T0)], [old])
    assert plan.invalidations == {}
    assert (plan.new_facts[0].valid_at, plan.new_facts[0].invalid_at) == (T0, T1)


def test_a_fact_with_its_own_end_keeps_it_and_supersedes_nothing() -> None:
    old = _old("f1", "acme")
    plan = _plan(_index(old), [_new("globex", supersedes=(0,), valid_at=T0, invalid_at=T1)], [old])
    assert plan.invalidations == {}
    assert plan.new_facts[0].invalid_at == T1


def test_a_repeated_fact_only_gains_provenance() -> None:
    old = _old("f1", "acme")
    plan = _plan(_index(old), [_new("acme")], [old])
    assert plan.new_facts == [] and plan.duplicates == 1
    assert plan.updated["f1"].episodes == ("ep",)


def test_unresolved_endpoints_are_reported_in_order() -> None:
    fact = CleanFact("Alice", "Nobody", "KNOWS", "Alice knows nobody.", None, None, None, ())
    plan = _plan(_index(), [ResolvedFact(fact, "alice", None)], [])
    assert plan.dropped == [
        {
            "source_name": "Alice",
            "target_name": "Nobody",
            "relation_type": None,
            "fact": "Alice knows nobody.",
            "unresolved_endpoint": "target",
        }
    ]


SINGLE_JOB = "relation_types:\n  - name: WORKS_AT\n    cardinality: one\n"


@pytest.mark.parametrize("earlier_first", [True, False], ids=["earlier-first", "later-first"])
def test_of_one_episodes_facts_the_earlier_ends_where_the_later_starts(
    earlier_first: bool,
) -> None:
    # A dated changelog in one text: Acme from T0, Globex from T1. Whatever order the facts
    # come in, the Acme job is stored ended at T1 and the Globex job stays current.
    acme, globex = _new("acme", valid_at=T0), _new("globex", valid_at=T1)
    index = _index()
    order = [acme, globex] if earlier_first else [globex, acme]
    plan = _plan(index, order, [], parse_ontology(SINGLE_JOB))
    assert plan.invalidations == {}  # nothing stored before was touched
    ends = {f.target_uuid: (f.valid_at, f.invalid_at) for f in plan.new_facts}
    assert ends == {"acme": (T0, T1), "globex": (T1, None)}
    by_target = {f.target_uuid: f.uuid for f in plan.new_facts}
    [ended] = superseded_report(plan, index, {})
    assert (ended["uuid"], ended["superseded_by"], ended["same_episode"]) == (
        by_target["acme"],
        by_target["globex"],
        True,
    )


def test_of_one_episodes_facts_equal_starts_end_neither() -> None:
    ontology = parse_ontology(SINGLE_JOB)
    plan = _plan(_index(), [_new("acme", valid_at=T0), _new("globex", valid_at=T0)], [], ontology)
    assert [f.invalid_at for f in plan.new_facts] == [None, None] and plan.ended == {}
