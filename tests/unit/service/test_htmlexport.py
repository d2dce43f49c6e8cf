"""lcg.service.htmlexport: which entities and facts the exported page keeps, and how it embeds them."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

import pytest

from lcg.service.htmlexport import render_html, select_graph


def entity(uuid: str, name: str, labels: list[str] | None = None) -> dict[str, Any]:
    return {
        "uuid": uuid,
        "name": name,
        "group_id": "g",
        "labels": labels or ["Entity"],
        "summary": "",
        "attributes": "{}",
    }


def edge(
    uuid: str, src: str, dst: str, valid: str | None = None, invalid: str | None = None
) -> dict[str, Any]:
    return {
        "uuid": uuid,
        "name": "REL",
        "source_node_uuid": src,
        "target_node_uuid": dst,
        "group_id": "g",
        "fact": f"{src} relates to {dst}",
        "valid_at": valid,
        "invalid_at": invalid,
    }


# A star around "hub" (4 facts), a pair a-b (1 fact each), and a loner.
NODES = [entity(u, u.upper()) for u in ("hub", "s1", "s2", "s3", "s4", "a", "b", "loner")]
EDGES = [edge(f"h{i}", "hub", f"s{i}") for i in range(1, 5)] + [edge("ab", "a", "b")]


def test_a_capped_export_keeps_the_hubs_and_only_facts_among_kept_nodes() -> None:
    nodes, edges = select_graph(NODES, EDGES, limit=3)
    # hub (degree 4) first; then degree-1 nodes by name: A, B before S1...
    assert [n["id"] for n in nodes] == ["hub", "a", "b"]
    assert [e["id"] for e in edges] == ["ab"]
    nodes, edges = select_graph(NODES, EDGES, limit=7)
    assert "loner" not in {n["id"] for n in nodes}
    assert len(edges) == 5


def test_facts_with_a_missing_endpoint_are_left_out() -> None:
    _, edges = select_graph(NODES, [*EDGES, edge("dangling", "hub", "nobody")], limit=100)
    assert "dangling" not in {e["id"] for e in edges}


def test_as_of_keeps_facts_true_then_and_marks_the_already_superseded() -> None:
    facts = [
        edge("old", "a", "b", "2020-01-01 00:00:00", "2022-01-01 00:00:00"),
        edge("new", "a", "s1", "2022-01-01 00:00:00"),
        edge("later", "a", "s2", "2024-01-01 00:00:00"),
    ]
    _, edges = select_graph(NODES, facts, as_of=datetime(2021, 6, 1, tzinfo=UTC))
    assert {e["id"]: e["superseded"] for e in edges} == {"old": False}
    _, edges = select_graph(NODES, facts, as_of=datetime(2023, 1, 1, tzinfo=UTC))
    assert {e["id"]: e["superseded"] for e in edges} == {"old": True, "new": False}
    _, edges = select_graph(NODES, facts)  # now: everything, the ended fact superseded
    assert {e["id"]: e["status"] for e in edges} == {
        "old": "superseded",
        "new": "current",
        "later": "current",
    }
    old = next(e for e in edges if e["id"] == "old")
    assert old["validFrom"] == int(datetime(2020, 1, 1, tzinfo=UTC).timestamp() * 1000)


def test_the_limit_must_be_positive() -> None:
    with pytest.raises(ValueError):
        select_graph(NODES, EDGES, limit=0)


def test_the_page_embeds_the_data_without_urls_or_early_script_ends() -> None:
    nasty = entity("x", "</script><script>alert(1)</script> see https://example.com/a?b=c&d")
    page, summary = render_html(
        [*NODES, nasty], [*EDGES, edge("xa", "x", "a")], title="T<&> of https://example.org"
    )
    assert "http://" not in page and "https://" not in page
    assert "alert(1)</script>" not in page
    assert "<title>T&lt;&amp;&gt; of https:&#47;&#47;example.org</title>" in page
    found = re.search(r'<script id="lcg-data" type="application/json">(.*?)</script>', page, re.S)
    assert found is not None
    data = json.loads(found.group(1))
    assert data["title"] == "T<&> of https://example.org"
    assert nasty["name"] in {n["name"] for n in data["nodes"]}
    assert (summary.nodes, summary.edges, summary.total_nodes) == (9, 6, 9)
    # The page loads nothing: its policy forbids every fetch, and it links no file.
    assert "default-src 'none'" in page
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=", page)


def test_same_named_entities_of_different_groups_show_their_group() -> None:
    mercury = [{**entity(f"m-{g}", "Mercury"), "group_id": g} for g in ("alpha", "beta")]
    venus = {**entity("v", "Venus"), "group_id": "alpha"}
    # "mercury" in beta differs only by case: still the same name to a reader.
    lower = {**entity("m-gamma", "mercury"), "group_id": "gamma"}
    nodes, _ = select_graph([*mercury, venus, lower], [], limit=10)
    names = {n["id"]: n["name"] for n in nodes}
    assert names == {
        "m-alpha": "Mercury (alpha)",
        "m-beta": "Mercury (beta)",
        "m-gamma": "mercury (gamma)",
        "v": "Venus",
    }
    assert {n["id"]: n["group"] for n in nodes}["m-beta"] == "beta"
    # Within one group names are unique already: nothing is added.
    single, _ = select_graph(NODES, EDGES, limit=10)
    assert all(n["name"] == n["id"].upper() for n in single)
