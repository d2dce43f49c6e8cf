"""Time on both axes, against a scripted history on a real Kuzu database.

The history (group `liminis`, system times set explicitly so they are exact):

- commit 1 at C1: "Project X is hosted at repo A" (HOSTED_AT), valid from 2024-01-01;
- commit 2 at C2: "Project X is hosted at repo B" (HOSTED_AT), valid from 2024-06-01, which
  supersedes the first (its invalid_at = 2024-06-01, expired_at = C2), plus the additive
  "Project X is maintained by Alice" (MAINTAINED_BY), also valid from 2024-06-01, which must
  supersede nothing.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from lcg import Engine, Settings, open_engine
from lcg.engine import EpisodeCommit, Invalidation
from lcg.errors import InvalidRequestError, NotFoundError
from lcg.models import Entity, Episode, Fact
from lcg.service.registry import dispatch
from lcg.storage.store import delete_database_files
from lcg.timefilter import TimeFilter

# The method tests run on the embedded store and on a FalkorDB server (conftest).
BOTH_STORAGES = True

pytestmark = pytest.mark.anyio

G = "liminis"
C1 = datetime(2026, 1, 10, tzinfo=UTC)
C2 = datetime(2026, 2, 10, tzinfo=UTC)
JAN = datetime(2024, 1, 1, tzinfo=UTC)
JUN = datetime(2024, 6, 1, tzinfo=UTC)
# Fixed uuids, so entries sharing an instant have a known order (uuid ascending).
A, B, M = "f-1-repo-a", "f-2-repo-b", "f-3-maintainer"


@dataclass
class History:
    project: str
    repo_a: str
    repo_b: str
    alice: str


def _entity(name: str) -> Entity:
    return Entity(uuid=f"e-{name}", group_id=G, name=name, created_at=C1)


def _fact(
    uuid: str, src: Entity, dst: Entity, name: str, text: str, valid: datetime, learned: datetime
) -> Fact:
    return Fact(
        uuid=uuid,
        group_id=G,
        source_uuid=src.uuid,
        target_uuid=dst.uuid,
        name=name,
        fact=text,
        episodes=(f"ep-{uuid}",),
        valid_at=valid,
        created_at=learned,
    )


@pytest.fixture
async def scripted(engine: Engine) -> History:
    project, repo_a, repo_b, alice = (
        _entity(n) for n in ("Project X", "repo A", "repo B", "Alice")
    )
    ep1 = Episode(uuid="ep-1", group_id=G, name="one", content="hosted at A", created_at=C1)
    await engine.commit_episode(
        EpisodeCommit(
            G,
            ep1,
            [project, repo_a, repo_b, alice],
            [_fact(A, project, repo_a, "HOSTED_AT", "Project X is hosted at repo A", JAN, C1)],
            mentions=[project.uuid, repo_a.uuid],
        )
    )
    ep2 = Episode(uuid="ep-2", group_id=G, name="two", content="moved to B", created_at=C2)
    await engine.commit_episode(
        EpisodeCommit(
            G,
            ep2,
            [],
            [
                _fact(B, project, repo_b, "HOSTED_AT", "Project X is hosted at repo B", JUN, C2),
                _fact(
                    M, project, alice, "MAINTAINED_BY", "Project X is maintained by Alice", JUN, C2
                ),
            ],
            [Invalidation(A, JUN, C2)],
            mentions=[project.uuid, repo_b.uuid, alice.uuid],
        )
    )
    return History(project.uuid, repo_a.uuid, repo_b.uuid, alice.uuid)


def _ts(value: datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")


async def _listed(engine: Engine, **params: Any) -> list[str]:
    result = await dispatch(engine, "knowledge_list_relationships", params)
    assert result["count"] == len(result["facts"])
    return sorted(f["uuid"] for f in result["facts"])


async def test_reference_reads_return_every_edge_when_no_time_parameter_is_given(
    engine: Engine, scripted: History
) -> None:
    assert await _listed(engine) == [A, B, M]
    edges = await dispatch(engine, "knowledge_get_edges_by_group", {})
    assert sorted(e["uuid"] for e in edges["edges"]) == [A, B, M]
    old = next(e for e in edges["edges"] if e["uuid"] == A)
    assert old["invalid_at"] == "2024-06-01 00:00:00"
    assert old["created_at"] == ""  # the reference's edge object, unchanged


async def test_include_invalidated_false_means_current_facts_only(
    engine: Engine, scripted: History
) -> None:
    assert await _listed(engine, include_invalidated=False) == [B, M]
    assert await _listed(engine, include_invalidated=True) == [A, B, M]


@pytest.mark.parametrize(
    ("as_of", "expected"),
    [
        ("2023-12-31T23:59:59Z", []),
        ("2024-01-01T00:00:00Z", [A]),  # valid_at is inclusive
        ("2024-03-01 00:00:00", [A]),
        ("2024-05-31T23:59:59Z", [A]),
        ("2024-06-01T00:00:00Z", [B, M]),  # invalid_at is exclusive: A has ended at the boundary
        ("2024-06-01T02:00:00+02:00", [B, M]),  # the same instant, another offset
        ("2025-01-01T00:00:00Z", [B, M]),
    ],
)
async def test_as_of_answers_what_was_true_in_the_world(
    engine: Engine, scripted: History, as_of: str, expected: list[str]
) -> None:
    assert await _listed(engine, as_of=as_of) == expected
    edges = await dispatch(engine, "knowledge_get_edges_by_group", {"as_of": as_of})
    assert sorted(e["uuid"] for e in edges["edges"]) == expected


@pytest.mark.parametrize(
    ("known_at", "expected"),
    [
        (C1 - timedelta(seconds=1), []),
        (C1, [A]),  # created_at is inclusive
        (C2 - timedelta(seconds=1), [A]),  # before the supersession: A was current
        (C2, [B, M]),  # expired_at is exclusive
        (C2 + timedelta(days=30), [B, M]),
    ],
)
async def test_known_at_answers_what_the_graph_believed(
    engine: Engine, scripted: History, known_at: datetime, expected: list[str]
) -> None:
    assert await _listed(engine, known_at=_ts(known_at)) == expected


async def test_both_axes_together_see_the_belief_of_the_time(
    engine: Engine, scripted: History
) -> None:
    before = _ts(C2 - timedelta(days=1))
    # Before C2 the graph did not know A had ended: it believed A true in August 2024.
    assert await _listed(engine, known_at=before, as_of="2024-08-01T00:00:00Z") == [A]
    # Today it knows better.
    assert await _listed(engine, known_at=_ts(C2), as_of="2024-08-01T00:00:00Z") == [B, M]
    assert await _listed(engine, known_at=_ts(C2), as_of="2024-02-01T00:00:00Z") == [A]
    assert await _listed(engine, known_at=before, include_invalidated=True) == [A]


async def test_neighbors_filter_before_the_limit(engine: Engine, scripted: History) -> None:
    now_result = await dispatch(
        engine,
        "knowledge_get_entity_neighbors",
        {"entity_uuid": scripted.project, "include_invalidated": False, "num_results": 2},
    )
    assert sorted(e["uuid"] for e in now_result["edges"]) == [B, M]
    assert sorted(n["name"] for n in now_result["nodes"]) == ["Alice", "repo B"]
    then = await dispatch(
        engine,
        "knowledge_get_entity_neighbors",
        {"entity_uuid": scripted.project, "as_of": "2024-02-01 00:00:00"},
    )
    assert [e["uuid"] for e in then["edges"]] == [A]
    assert [n["name"] for n in then["nodes"]] == ["repo A"]
    everything = await dispatch(
        engine, "knowledge_get_entity_neighbors", {"entity_uuid": scripted.project}
    )
    assert everything["edge_count"] == 3


async def _changes(engine: Engine, **params: Any) -> list[tuple[str, str, str]]:
    result = await dispatch(engine, "knowledge_get_changes", params)
    assert result["count"] == len(result["changes"])
    return [(c["kind"], c["at"], c["fact"]["uuid"]) for c in result["changes"]]


async def test_get_changes_tags_each_change_with_its_kind(
    engine: Engine, scripted: History
) -> None:
    jun = "2024-06-01 00:00:00"
    assert await _changes(engine, since="2024-01-01T00:00:00Z", until="2024-06-01T00:00:00Z") == [
        ("started", "2024-01-01 00:00:00", A)
    ]
    assert await _changes(engine, since="2024-06-01T00:00:00Z", until="2024-06-02T00:00:00Z") == [
        ("started", jun, B),
        ("started", jun, M),
        ("ended", jun, A),
    ]
    c2 = "2026-02-10 00:00:00"
    assert await _changes(engine, since=_ts(C2), until=_ts(C2 + timedelta(days=1))) == [
        ("learned", c2, B),
        ("learned", c2, M),
        ("retired", c2, A),
    ]
    assert await _changes(engine, since=_ts(C1), until=_ts(C2)) == [
        ("learned", "2026-01-10 00:00:00", A)
    ]


async def test_get_changes_over_everything_filters_by_entity_and_limits(
    engine: Engine, scripted: History
) -> None:
    every = await _changes(engine, since="2000-01-01T00:00:00Z")  # until defaults to now
    assert len(every) == 8  # A: started, ended, learned, retired; B and M: started, learned
    assert [kind for kind, _, uuid in every if uuid == A] == [
        "started",
        "ended",
        "learned",
        "retired",
    ]
    only_a = await _changes(engine, since="2000-01-01T00:00:00Z", entity_uuid=scripted.repo_a)
    assert {uuid for _, _, uuid in only_a} == {A}
    cut = await dispatch(
        engine, "knowledge_get_changes", {"since": "2000-01-01T00:00:00Z", "num_results": 3}
    )
    assert cut["count"] == 3 and cut["truncated"] is True
    assert cut["changes"][0]["fact"]["created_at"] == "2026-01-10 00:00:00"
    assert cut["changes"][0]["fact"]["expired_at"] == "2026-02-10 00:00:00"
    other = await _changes(engine, since="2000-01-01T00:00:00Z", group_ids=["elsewhere"])
    assert other == []


async def test_entity_timeline_orders_by_valid_time_and_links_supersession(
    engine: Engine, scripted: History
) -> None:
    result = await dispatch(
        engine, "knowledge_get_entity_timeline", {"name": "project x", "group_id": G}
    )
    assert result["entity"]["uuid"] == scripted.project
    facts = {f["uuid"]: f for f in result["facts"]}
    assert [f["uuid"] for f in result["facts"]] == [A, B, M]
    assert result["count"] == 3
    assert facts[A]["status"] == "superseded"
    assert facts[A]["superseded_by"] == [B] and facts[A]["supersedes"] == []
    assert facts[B]["status"] == "current"
    assert facts[B]["supersedes"] == [A] and facts[B]["superseded_by"] == []
    assert facts[M]["status"] == "current"
    assert facts[M]["supersedes"] == [] and facts[M]["superseded_by"] == []
    assert {f["direction"] for f in result["facts"]} == {"outgoing"}
    by_uuid = await dispatch(
        engine, "knowledge_get_entity_timeline", {"entity_uuid": scripted.repo_a}
    )
    assert [(f["uuid"], f["direction"], f["superseded_by"]) for f in by_uuid["facts"]] == [
        (A, "incoming", [B])
    ]


async def test_timeline_of_an_unknown_entity_is_not_found(
    engine: Engine, scripted: History
) -> None:
    with pytest.raises(NotFoundError):
        await dispatch(engine, "knowledge_get_entity_timeline", {"entity_uuid": "nope"})
    with pytest.raises(NotFoundError):
        await dispatch(engine, "knowledge_get_entity_timeline", {"name": "nobody"})


@pytest.mark.parametrize(
    ("method", "params", "field"),
    [
        ("knowledge_list_relationships", {"as_of": "yesterday"}, "as_of"),
        ("knowledge_list_relationships", {"known_at": 17}, "known_at"),
        ("knowledge_get_edges_by_group", {"include_invalidated": "true"}, "include_invalidated"),
        ("knowledge_get_entity_neighbors", {"entity_uuid": "x", "as_of": ""}, "as_of"),
        ("knowledge_get_changes", {}, "since"),
        ("knowledge_get_changes", {"since": "2024-13-01T00:00:00Z"}, "since"),
        (
            "knowledge_get_changes",
            {"since": "2024-02-01T00:00:00Z", "until": "2024-01-01T00:00:00Z"},
            "until",
        ),
        (
            "knowledge_get_changes",
            {"since": "2024-02-01T00:00:00Z", "num_results": 0},
            "num_results",
        ),
        (
            "knowledge_get_changes",
            {"since": "2024-02-01T00:00:00Z", "entity_uuid": ""},
            "entity_uuid",
        ),
        ("knowledge_get_entity_timeline", {}, "entity_uuid"),
        ("knowledge_get_entity_timeline", {"name": "  "}, "name"),
        ("knowledge_get_entity_timeline", {"name": "x", "group_id": 3}, "group_id"),
    ],
)
async def test_bad_time_parameters_are_refused_naming_the_field(
    engine: Engine, method: str, params: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidRequestError) as info:
        await dispatch(engine, method, params)
    assert info.value.field == field


async def test_the_cypher_time_clause_agrees_with_time_filter_admits(engine: Engine) -> None:
    """Every combination of the four columns against every kind of filter, at fixed 'now'."""
    src, dst = _entity("S"), _entity("T")
    t = [datetime(2024, m, 1, tzinfo=UTC) for m in (1, 3, 5, 7, 9)]
    choices = (None, t[1], t[3])
    facts = []
    for i, (valid, invalid, created, expired) in enumerate(
        itertools.product(choices, choices, choices, choices)
    ):
        facts.append(
            Fact(
                uuid=f"p-{i:03d}",
                group_id=G,
                source_uuid=src.uuid,
                target_uuid=dst.uuid,
                name="R",
                fact=f"fact {i}",
                valid_at=valid,
                invalid_at=invalid,
                created_at=created,
                expired_at=expired,
            )
        )
    ep = Episode(uuid="ep-p", group_id=G, name="p", content="p")
    await engine.commit_episode(EpisodeCommit(G, ep, [src, dst], facts))
    at = t[2]
    instants = (None, *t)
    filters = [
        TimeFilter(as_of, known_at, inc)
        for as_of, known_at, inc in itertools.product(instants, instants, (False, True))
    ]
    for f in filters:
        got = await engine.read(lambda c, f=f: c.facts_at([G], f, at))  # type: ignore[misc]  # default-bound loop variable
        assert sorted(x.uuid for x in got) == sorted(x.uuid for x in facts if f.admits(x, at=at)), f


async def test_history_answers_survive_a_rebuild_from_the_wal(
    engine: Engine, scripted: History, settings: Settings
) -> None:
    queries: list[tuple[str, dict[str, Any]]] = [
        (
            "knowledge_get_changes",
            {"since": "2000-01-01T00:00:00Z", "until": "2099-01-01 00:00:00"},
        ),
        ("knowledge_get_entity_timeline", {"entity_uuid": scripted.project}),
        ("knowledge_list_relationships", {"known_at": _ts(C2 - timedelta(days=1))}),
        ("knowledge_list_relationships", {"as_of": "2024-03-01T00:00:00Z"}),
    ]
    before = [await dispatch(engine, m, p) for m, p in queries]
    engine.close()
    delete_database_files(settings.db_path)
    rebuilt = open_engine(settings)
    try:
        after = [await dispatch(rebuilt, m, p) for m, p in queries]
    finally:
        rebuilt.close()
    assert after == before
