"""knowledge_assert_relationship's supersession (an lcg extension): named uuids, the ontology's
`cardinality: one`, lcg's built-in families — and nothing at all without a rule."""

from __future__ import annotations

from typing import Any

import pytest

from lcg import Engine
from lcg.service.registry import dispatch

# The method tests run on the embedded store and on a FalkorDB server (conftest).
BOTH_STORAGES = True

pytestmark = pytest.mark.anyio


async def _entities(engine: Engine, *names: str) -> None:
    for name in names:
        await dispatch(engine, "knowledge_assert_entity", {"name": name})


async def _edges(engine: Engine) -> dict[str, dict[str, Any]]:
    out = await dispatch(engine, "knowledge_get_edges_by_group", {})
    return {e["fact"]: e for e in out["edges"]}


async def _expired(engine: Engine) -> set[str]:
    rows = await dispatch(
        engine,
        "knowledge_query_cypher",
        {"query": "MATCH (f:Fact) WHERE f.expired_at IS NOT NULL RETURN f.fact"},
    )
    return {r[0] for r in rows["rows"]}


def rel(source: str, predicate: str, target: str, when: str, **extra: Any) -> dict[str, Any]:
    return {
        "source_name": source,
        "predicate": predicate,
        "target_name": target,
        "fact": f"{source} {predicate} {target}",
        "valid_at": when,
        **extra,
    }


async def test_a_cardinality_one_type_supersedes_the_previous_target(engine: Engine) -> None:
    (engine.settings.home / "ontology.yaml").write_text(
        "mode: open\nentity_types: []\nrelation_types:\n"
        "  - name: PRIMARY_QUEUE\n    cardinality: one\n"
    )
    await _entities(engine, "Atlas", "Kafka", "RabbitMQ")
    first = await dispatch(
        engine,
        "knowledge_assert_relationship",
        rel("Atlas", "PRIMARY_QUEUE", "Kafka", "2025-01-01T00:00:00Z"),
    )
    second = await dispatch(
        engine,
        "knowledge_assert_relationship",
        rel("Atlas", "PRIMARY_QUEUE", "RabbitMQ", "2025-03-01T00:00:00Z"),
    )
    assert first["edges_superseded"] == []
    assert second["edges_superseded"] == [
        {
            "uuid": first["edge_uuid"],
            "fact": "Atlas PRIMARY_QUEUE Kafka",
            "invalid_at": "2025-03-01 00:00:00",
            "reason": "ontology",
            "superseded_by": second["edge_uuid"],
        }
    ]
    edges = await _edges(engine)
    assert edges["Atlas PRIMARY_QUEUE Kafka"]["invalid_at"] == "2025-03-01 00:00:00"
    assert edges["Atlas PRIMARY_QUEUE RabbitMQ"]["invalid_at"] is None
    assert await _expired(engine) == {"Atlas PRIMARY_QUEUE Kafka"}


async def test_without_any_rule_nothing_is_superseded(engine: Engine) -> None:
    await _entities(engine, "Atlas", "Kafka", "RabbitMQ")
    for target, when in (("Kafka", "2025-01-01T00:00:00Z"), ("RabbitMQ", "2025-03-01T00:00:00Z")):
        result = await dispatch(
            engine, "knowledge_assert_relationship", rel("Atlas", "USES", target, when)
        )
        assert result["edges_superseded"] == []
    assert {t: e["invalid_at"] for t, e in (await _edges(engine)).items()} == {
        "Atlas USES Kafka": None,
        "Atlas USES RabbitMQ": None,
    }
    assert await _expired(engine) == set()


async def test_a_builtin_family_and_a_named_uuid_supersede(engine: Engine) -> None:
    await _entities(engine, "Maria", "Priya", "Atlas", "Kafka", "Pulsar")
    maria = await dispatch(
        engine,
        "knowledge_assert_relationship",
        rel("Maria", "LEADS", "Atlas", "2025-01-01T00:00:00Z"),
    )
    priya = await dispatch(
        engine,
        "knowledge_assert_relationship",
        rel("Priya", "LEADS", "Atlas", "2025-02-01T00:00:00Z"),
    )
    assert [(s["uuid"], s["reason"]) for s in priya["edges_superseded"]] == [
        (maria["edge_uuid"], "builtin")
    ]
    kafka = await dispatch(
        engine,
        "knowledge_assert_relationship",
        rel("Atlas", "USES", "Kafka", "2025-01-01T00:00:00Z"),
    )
    pulsar = await dispatch(
        engine,
        "knowledge_assert_relationship",
        rel("Atlas", "USES", "Pulsar", "2025-04-01T00:00:00Z", supersedes=[kafka["edge_uuid"]]),
    )
    assert [(s["uuid"], s["reason"], s["invalid_at"]) for s in pulsar["edges_superseded"]] == [
        (kafka["edge_uuid"], "caller", "2025-04-01 00:00:00")
    ]
    assert await _expired(engine) == {"Maria LEADS Atlas", "Atlas USES Kafka"}
    timeline = await dispatch(engine, "knowledge_get_entity_timeline", {"name": "Atlas"})
    links = {f["fact"]: f["superseded_by"] for f in timeline["facts"]}
    assert links["Maria LEADS Atlas"] == [priya["edge_uuid"]]
