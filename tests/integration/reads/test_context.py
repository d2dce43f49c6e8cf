"""knowledge_get_context on a real graph: budget, no dangling facts, omissions, time, hops."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from typing import Any

import pytest

from lcg import Engine
from lcg.engine import EpisodeCommit, Invalidation
from lcg.errors import InvalidRequestError
from lcg.models import Entity, Episode, Fact
from lcg.service.registry import dispatch
from lcg.temporal import context

# The method tests run on the embedded store and on a FalkorDB server (conftest).
BOTH_STORAGES = True

pytestmark = pytest.mark.anyio

G = "liminis"
C1 = datetime(2026, 1, 10, tzinfo=UTC)
C2 = datetime(2026, 2, 10, tzinfo=UTC)
JAN = datetime(2024, 1, 1, tzinfo=UTC)
JUN = datetime(2024, 6, 1, tzinfo=UTC)


def _entity(name: str, summary: str = "") -> Entity:
    return Entity(
        uuid=f"e-{name.replace(' ', '-')}", group_id=G, name=name, summary=summary, created_at=C1
    )


def _fact(uuid: str, a: Entity, b: Entity, name: str, text: str, **times: Any) -> Fact:
    return Fact(
        uuid=uuid,
        group_id=G,
        source_uuid=a.uuid,
        target_uuid=b.uuid,
        name=name,
        fact=text,
        episodes=(f"ep-{uuid}",),
        created_at=times.pop("created_at", C1),
        **times,
    )


def _episode(uuid: str, at: datetime) -> Episode:
    return Episode(uuid=uuid, group_id=G, name=uuid, content=uuid, created_at=at)


def _estimate(text: str) -> int:
    return math.ceil(len(text.encode("utf-8")) / 4)


async def _context(engine: Engine, **params: Any) -> dict[str, Any]:
    result = await dispatch(engine, "knowledge_get_context", params)
    assert result["token_estimate"] == _estimate(result["context"])
    assert result["token_estimate"] <= result["token_budget"]
    assert result["node_count"] == len(result["included_node_ids"])
    assert result["fact_count"] == len(result["included_fact_ids"])
    assert result["truncated"] == bool(result["omitted_nodes"] or result["omitted_facts"])
    return result


@pytest.fixture
async def hosted(engine: Engine) -> Engine:
    """Project X moved from repo A to repo B on 2024-06-01 (learned at C2); Alice maintains it."""
    project = _entity("Project X", "a build tool for hosted projects")
    repo_a, repo_b = _entity("repo A", "a git repository"), _entity("repo B", "a git repository")
    alice = _entity("Alice", "maintainer")
    await engine.commit_episode(
        EpisodeCommit(
            G,
            _episode("ep-1", C1),
            [project, repo_a, repo_b, alice],
            [
                _fact(
                    "f-a",
                    project,
                    repo_a,
                    "HOSTED_AT",
                    "Project X is hosted at repo A",
                    valid_at=JAN,
                )
            ],
        )
    )
    await engine.commit_episode(
        EpisodeCommit(
            G,
            _episode("ep-2", C2),
            [],
            [
                _fact(
                    "f-b",
                    project,
                    repo_b,
                    "HOSTED_AT",
                    "Project X is hosted at repo B",
                    valid_at=JUN,
                    created_at=C2,
                ),
                _fact(
                    "f-m",
                    project,
                    alice,
                    "MAINTAINED_BY",
                    "Project X is maintained by Alice",
                    valid_at=JUN,
                    created_at=C2,
                ),
            ],
            [Invalidation("f-a", JUN, C2)],
        )
    )
    return engine


@pytest.fixture
async def crowded(hosted: Engine) -> Engine:
    """Thirty more projects, each hosted somewhere, with long multi-byte summaries and facts."""
    hubs = [
        _entity(f"Forge {i}", "forge of projects — 漢字 émigré ✨ " * (i % 4 + 1)) for i in range(6)
    ]
    projects = [
        _entity(f"Project {i:02d}", f"hosted project number {i} " + "ü" * (i * 7))
        for i in range(30)
    ]
    facts = [
        _fact(
            f"g-{i:02d}",
            p,
            hubs[i % len(hubs)],
            "HOSTED_AT",
            f"Project {i:02d} is hosted at Forge {i % len(hubs)} " + "and mirrored ✨ " * (i % 5),
            valid_at=JAN,
        )
        for i, p in enumerate(projects)
    ]
    facts += [
        _fact(
            f"h-{i:02d}",
            projects[i],
            projects[i + 1],
            "DEPENDS_ON",
            f"Project {i:02d} depends on the next",
        )
        for i in range(0, 29, 3)
    ]
    await hosted.commit_episode(EpisodeCommit(G, _episode("ep-3", C2), [*hubs, *projects], facts))
    return hosted


def _check_cited(result: dict[str, Any]) -> None:
    """Every included id is cited in the block; every fact's endpoints are included."""
    text = result["context"]
    nodes = set(result["included_node_ids"])
    for uuid in nodes:
        assert f"(entity {uuid})" in text or f"(entity {uuid}; passages P" in text
    labels = {
        m.group(2): m.group(1)
        for m in re.finditer(
            r"^\[(E\d+)\] .* \(entity ([^\s;)]+)(?:; passages [P\d, ]+)?\)$", text, re.M
        )
    }
    for uuid in result["included_fact_ids"]:
        line = next(x for x in text.splitlines() if f"(fact {uuid};" in x or f"(fact {uuid})" in x)
        ends = re.match(r"^\[F\d+\] (E\d+) -\S+-> (E\d+): ", line)
        assert ends is not None, line
        assert {ends.group(1), ends.group(2)} <= set(labels.values())


@pytest.mark.parametrize("hops", [0, 1, 2])
async def test_the_block_never_exceeds_the_budget_nor_cites_a_dangling_fact(
    crowded: Engine, hops: int
) -> None:
    seen_truncated = False
    for budget in (256, 257, 300, 333, 400, 512, 777, 1000, 1500, 2000, 4000):
        result = await _context(
            crowded, query="project hosted at forge", token_budget=budget, hops=hops, num_seeds=20
        )
        _check_cited(result)
        seen_truncated |= result["truncated"]
    assert seen_truncated  # small budgets really did have to leave things out


async def test_a_large_budget_includes_everything_found_and_reports_no_omission(
    crowded: Engine,
) -> None:
    small = await _context(crowded, query="project hosted at forge", token_budget=256, num_seeds=20)
    large = await _context(
        crowded, query="project hosted at forge", token_budget=100_000, num_seeds=20
    )
    assert small["truncated"] and small["omitted_facts"] > 0 and small["omitted_nodes"] > 0
    assert not large["truncated"]
    assert large["omitted_facts"] == large["omitted_nodes"] == 0
    assert set(small["included_fact_ids"]) < set(large["included_fact_ids"])
    # What the small block left out is exactly what it reports.
    assert small["fact_count"] + small["omitted_facts"] == large["fact_count"]
    assert small["node_count"] + small["omitted_nodes"] == large["node_count"]


async def test_current_facts_come_first_and_superseded_ones_carry_their_window(
    hosted: Engine,
) -> None:
    result = await _context(hosted, query="Project X hosted at repo", token_budget=2000)
    text = result["context"]
    lines = {
        uuid: next(x for x in text.splitlines() if f"(fact {uuid};" in x)
        for uuid in ("f-a", "f-b", "f-m")
    }
    assert "[valid 2024-06-01 00:00:00 → now]" in lines["f-b"]
    assert "[SUPERSEDED, was valid 2024-01-01 00:00:00 → 2024-06-01 00:00:00]" in lines["f-a"]
    assert "episodes ep-f-a" in lines["f-a"]
    order = result["included_fact_ids"]
    assert order.index("f-a") > max(order.index("f-b"), order.index("f-m"))


async def test_as_of_shifts_what_counts_as_current(hosted: Engine) -> None:
    result = await _context(
        hosted, query="Project X hosted at repo", token_budget=2000, as_of="2024-03-01T00:00:00Z"
    )
    text = result["context"]
    line_a = next(x for x in text.splitlines() if "(fact f-a;" in x)
    line_b = next(x for x in text.splitlines() if "(fact f-b;" in x)
    # Valid then, and it ended since: the read says so with its window and what replaced it.
    assert (
        "[valid then; ENDED since, was valid 2024-01-01 00:00:00 → 2024-06-01 00:00:00; then: "
        "Project X is hosted at repo B (fact f-b, from 2024-06-01 00:00:00)]" in line_a
    )
    assert "NOT YET VALID" in line_b
    assert result["included_fact_ids"][0] == "f-a"
    assert result["as_of"] == "2024-03-01 00:00:00"


async def test_an_ended_fact_names_its_successor_only_as_the_read_knows_it(
    hosted: Engine,
) -> None:
    index = hosted.parts.search
    with hosted.reader() as conn:
        f_a = conn.facts_by_uuids(["f-a"])["f-a"]
        views = index.views("fact", [G])
        # Known since C2 (the commit that superseded f-a): a read that knows only C1 is not
        # shown it.
        for known_at in (None, C2):
            found = context.successor_of(index, views, conn, f_a, known_at)
            assert found is not None and found.uuid == "f-b", known_at
        assert context.successor_of(index, views, conn, f_a, C1) is None
    # A successor withdrawn since is not named; the ended fact keeps its window.
    await hosted.commit_episode(
        EpisodeCommit(G, _episode("ep-9", C2), [], [], [Invalidation("f-b", None, C2)])
    )
    result = await _context(
        hosted, query="Project X hosted at repo", token_budget=2000, as_of="2024-03-01T00:00:00Z"
    )
    line_a = next(x for x in result["context"].splitlines() if "(fact f-a;" in x)
    assert "ENDED since, was valid 2024-01-01 00:00:00 → 2024-06-01 00:00:00]" in line_a


async def test_withdrawn_facts_are_never_context(hosted: Engine) -> None:
    project = _entity("Project X")
    await hosted.commit_episode(
        EpisodeCommit(G, _episode("ep-9", C2), [], [], [Invalidation("f-m", None, C2)])
    )
    result = await _context(hosted, query="Project X maintained by Alice", token_budget=2000)
    assert "f-m" not in result["included_fact_ids"]
    assert project.uuid in result["included_node_ids"]


async def test_hops_bound_the_expansion(engine: Engine) -> None:
    z = _entity("Zanzibar", "an island archipelago")
    k, lu, o = _entity("Kappa"), _entity("Lumen"), _entity("Orbit")
    chain = [
        _fact("c1", z, k, "FIRST", "first link"),
        _fact("c2", k, lu, "SECOND", "second link"),
        _fact("c3", lu, o, "THIRD", "third link"),
    ]
    await engine.commit_episode(EpisodeCommit(G, _episode("ep-c", C1), [z, k, lu, o], chain))
    reached = []
    for hops in (0, 1, 2, 3):
        result = await _context(engine, query="Zanzibar", hops=hops, num_seeds=1)
        reached.append((result["included_node_ids"], result["included_fact_ids"]))
    assert reached == [
        ([z.uuid], []),
        ([z.uuid, k.uuid], ["c1"]),
        ([z.uuid, k.uuid, lu.uuid], ["c1", "c2"]),
        ([z.uuid, k.uuid, lu.uuid, o.uuid], ["c1", "c2", "c3"]),
    ]


async def test_an_empty_group_gives_an_empty_block(hosted: Engine) -> None:
    result = await _context(hosted, query="Project X", group_ids=["nobody-here"])
    assert result["included_node_ids"] == [] and result["included_fact_ids"] == []
    assert result["context"] == "Context for: Project X\nEntities:\nFacts:\n"
    assert not result["truncated"]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"query": "x", "token_budget": 255}, "token_budget"),
        ({"query": "x", "token_budget": 0}, "token_budget"),
        ({"query": "x", "token_budget": "2000"}, "token_budget"),
        ({"query": "x", "token_budget": 2000.0}, "token_budget"),
        ({"query": "x", "hops": -1}, "hops"),
        ({"query": "x", "hops": 4}, "hops"),
        ({"query": "x", "num_seeds": 0}, "num_seeds"),
        ({"query": "x", "as_of": "soon"}, "as_of"),
        ({"query": "x", "group_ids": [1]}, "group_ids"),
        ({"query": "   "}, "query"),
        ({}, "query"),
    ],
)
async def test_bad_context_parameters_are_refused_naming_the_field(
    engine: Engine, params: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidRequestError) as info:
        await dispatch(engine, "knowledge_get_context", params)
    assert info.value.field == field
