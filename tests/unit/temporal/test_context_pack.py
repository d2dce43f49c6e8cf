"""Packing (lcg.temporal.context.pack) on generated graphs: the budget and the endpoint rule always hold."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest

from lcg.models import Entity, Fact
from lcg.temporal import context
from lcg.temporal.context import estimate_tokens, pack

AT = datetime(2026, 6, 1, tzinfo=UTC)
ALPHABET = "abcdefgh ijklmn opq éü 漢字 ✨ —"


def _text(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(ALPHABET) for _ in range(n))


def _graph(seed: int) -> tuple[dict[str, Entity], list[str], list[Fact], dict[str, bool]]:
    rng = random.Random(seed)
    entities = {
        f"e{i}": Entity(
            uuid=f"e{i}",
            group_id="g",
            name=_text(rng, rng.randint(1, 40)),
            summary=_text(rng, rng.randint(0, 400)),
        )
        for i in range(rng.randint(1, 40))
    }
    ids = list(entities)
    facts = [
        Fact(
            uuid=f"f{j}",
            group_id="g",
            source_uuid=rng.choice(ids),
            target_uuid=rng.choice([*ids, "missing"]),
            name="R",
            fact=_text(rng, rng.randint(1, 700)),
            episodes=tuple(f"ep{k}" for k in range(rng.randint(0, 3))),
            valid_at=rng.choice([None, datetime(2024, 1, 1, tzinfo=UTC)]),
        )
        for j in range(rng.randint(0, 80))
    ]
    current = {f.uuid: rng.random() < 0.7 for f in facts}
    return entities, ids, facts, current


def _endpoint_ok(facts: list[Fact], packed_nodes: list[str], packed_facts: list[str]) -> bool:
    nodes = set(packed_nodes)
    by_id = {f.uuid: f for f in facts}
    return all({by_id[u].source_uuid, by_id[u].target_uuid} <= nodes for u in packed_facts)


@pytest.mark.parametrize("seed", range(40))
def test_packing_respects_the_budget_and_never_cites_a_fact_without_its_endpoints(
    seed: int,
) -> None:
    entities, order, facts, current = _graph(seed)
    rng = random.Random(seed)
    for budget in (256, 257, rng.randint(258, 700), rng.randint(700, 4000)):
        query = rng.choice(["q", _text(rng, 500)])
        lead = order[: rng.randint(0, 5)]
        packed = pack(query, entities, order, facts, current, budget, AT, lead=lead)
        assert estimate_tokens(packed.text) <= budget
        assert _endpoint_ok(facts, packed.node_ids, packed.fact_ids)
        assert len(packed.fact_ids) + packed.omitted_facts == len(facts)
        assert len(packed.node_ids) + packed.omitted_nodes == len(entities)
        for uuid in packed.node_ids:
            assert f"(entity {uuid})" in packed.text


def test_an_unlimited_budget_packs_every_fact_whose_endpoints_exist() -> None:
    entities, order, facts, current = _graph(7)
    packed = pack("q", entities, order, facts, current, 10**9, AT)
    assert packed.fact_ids == [f.uuid for f in facts if f.target_uuid != "missing"]
    assert packed.omitted_facts == sum(1 for f in facts if f.target_uuid == "missing")
    assert packed.omitted_nodes == 0


def test_the_estimate_counts_utf8_bytes() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd") == 1
    assert estimate_tokens("abcde") == 2
    assert estimate_tokens("漢") == 1  # three bytes
    assert estimate_tokens("漢字") == 2  # six bytes


@pytest.mark.parametrize("seed", range(40))
def test_skipping_lines_that_cannot_fit_changes_nothing(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lines whose lower bound exceeds the room left are skipped unformatted; every line
    formatted instead (the bounds disabled) gives the same block and counts."""
    entities, order, facts, current = _graph(seed)
    rng = random.Random(seed)
    for budget in (256, rng.randint(258, 700), rng.randint(700, 4000)):
        lead = order[: rng.randint(0, 5)]
        fast = pack("q", entities, order, facts, current, budget, AT, lead=lead)
        with monkeypatch.context() as m:
            m.setattr(context, "_FACT_LINE_MIN", -(10**9))
            m.setattr(context, "_ENTITY_LINE_MIN", -(10**9))
            slow = pack("q", entities, order, facts, current, budget, AT, lead=lead)
        assert fast == slow


@pytest.mark.parametrize("seed", range(20))
def test_candidates_are_read_only_while_the_block_may_take_them(seed: int) -> None:
    """Facts given as candidates are read through `fact_of` only when their line is written or
    tried: at most MISFITS tried lines that did not fit, then the rest are omitted unread. The
    block is the one the full facts give with the same rule."""
    entities, order, facts, current = _graph(seed)
    by_id = {f.uuid: f for f in facts}
    rng = random.Random(seed)
    for budget in (256, rng.randint(258, 700), rng.randint(700, 4000)):
        read: list[str] = []

        def fact_of(c: context.Candidate, read: list[str] = read) -> Fact:
            read.append(c.uuid)
            return by_id[c.uuid]

        refs = [context.Candidate(f.uuid, f.source_uuid, f.target_uuid) for f in facts]
        lazy = pack("q", entities, order, refs, current, budget, AT, fact_of=fact_of)
        full = pack("q", entities, order, facts, current, budget, AT)
        assert lazy == full
        assert len(read) == len(set(read)) <= len(lazy.fact_ids) + context.MISFITS


def test_after_misfits_smaller_later_facts_are_not_tried() -> None:
    """The MISFITS bound: once that many facts did not fit, a later one that would is omitted."""
    hub = Entity(uuid="h", group_id="g", name="hub")
    entities = {"h": hub}
    big = [
        Fact(
            uuid=f"big{i}",
            group_id="g",
            source_uuid="h",
            target_uuid="h",
            name="R",
            fact="漢" * 600,
        )
        for i in range(context.MISFITS)
    ]
    small = Fact(uuid="small", group_id="g", source_uuid="h", target_uuid="h", name="R", fact="y")
    current = {f.uuid: True for f in [*big, small]}
    packed = pack("q", entities, ["h"], [*big, small], current, 256, AT)
    assert packed.fact_ids == [] and packed.omitted_facts == context.MISFITS + 1
    fewer = pack("q", entities, ["h"], [*big[1:], small], current, 256, AT)
    assert fewer.fact_ids == ["small"]
