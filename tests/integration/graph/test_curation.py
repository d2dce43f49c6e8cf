"""Curation: merging entities, the corrections file, group purges and cross-group pointers.

- merge: an alias with facts in both directions and a fact to the canonical leaves no self-loop,
  no duplicate, a tombstone forwarding to the canonical, and a graph that a WAL rebuild (explicit
  force_clear, and delete-the-database-and-reopen) reproduces row for row;
- corrections: validate reports issues, apply merges and retracts and stamps applied_at;
- cross-group edges: bound / unbound / ambiguous, hidden from reads until bound, counted in
  knowledge_status, rebound after a purge and after a generation reset of the source stream.
"""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import pytest
from graph_invariants import assert_same, snapshot

from lcg import Engine, Entity, Episode, EpisodeCommit, Settings, open_engine
from lcg.admin import rebuild
from lcg.admin import status as admin_status
from lcg.curation.merge import MergeRequest, merge_entities
from lcg.curation.pointers import Endpoint, add_cross_group_edge, rebind
from lcg.graph import deletes, reads, writes
from lcg.storage.store import delete_database_files

# The method tests run on the embedded store and on a FalkorDB server (conftest).
BOTH_STORAGES = True

pytestmark = pytest.mark.anyio

G = "crew"


async def _entities(engine: Engine, group: str, *names: str) -> dict[str, str]:
    out = {}
    for name in names:
        out[name] = (await writes.assert_entity(engine, name, group))["entity_uuid"]
    return out


async def _fact(engine: Engine, group: str, src: str, pred: str, dst: str) -> str:
    result = await writes.assert_relationship(engine, src, dst, pred, group)
    return str(result["edge_uuid"])


def _active(engine: Engine, group: str) -> list[tuple[str, str, str]]:
    with engine.reader() as conn:
        facts = conn.facts_with_hops([group])
    return sorted((f.source_uuid, f.name, f.target_uuid) for f in facts if f.invalid_at is None)


async def test_merge_rewrites_dedupes_forwards_and_rebuilds(settings: Settings) -> None:
    engine = open_engine(settings)
    try:
        ids = await _entities(engine, G, "Jim Lovell", "James Lovell", "Apollo 13", "Fred Haise")
        await _fact(engine, G, "James Lovell", "SAME_CREW", "Jim Lovell")  # between them
        await _fact(engine, G, "James Lovell", "COMMANDED", "Apollo 13")  # out of the alias
        await _fact(engine, G, "Jim Lovell", "COMMANDED", "Apollo 13")  # ...duplicating this
        await _fact(engine, G, "Fred Haise", "FLEW_WITH", "James Lovell")  # into the alias
        await writes.assert_entity(engine, "Lunar Module", "other")
        before = snapshot(engine)

        dry = await merge_entities(
            engine,
            MergeRequest(
                canonical_name="Jim Lovell", alias_names=("James Lovell",), group_id=G, dry_run=True
            ),
        )
        assert dry["success"] and dry["merged_count"] == 1, dry
        assert dry["plan"]["total_edges_rewritten"] == 1
        assert dry["plan"]["total_edges_collapsed"] == 2
        assert_same(before, snapshot(engine), "a dry run writes nothing")

        result = await merge_entities(
            engine,
            MergeRequest(
                canonical_uuid=ids["Jim Lovell"], alias_uuids=(ids["James Lovell"],), group_id=G
            ),
        )
        assert result == {
            "success": True,
            "canonical_uuid": ids["Jim Lovell"],
            "merged_count": 1,
            "skipped": 0,
            "edges_rewritten": 1,
            "edges_deduplicated": 2,
            "foreign_edges_skipped": 0,
            "errors": [],
        }
        jim, apollo, fred = ids["Jim Lovell"], ids["Apollo 13"], ids["Fred Haise"]
        active = _active(engine, G)
        assert active == sorted([(jim, "COMMANDED", apollo), (fred, "FLEW_WITH", jim)])
        assert all(s != t for s, _, t in active), "no self-loop"
        forwarded = await engine.entity_by_name(G, "james lovell")
        assert forwarded is not None and forwarded.uuid == jim
        with engine.reader() as conn:
            alias = conn.entity_by_uuid(ids["James Lovell"])
        assert alias is not None and "Merged" in alias.labels and alias.merged_into == jim
        assert json.loads(alias.attributes)["merged_into"] == jim

        again = await merge_entities(
            engine, MergeRequest(canonical_uuid=jim, alias_uuids=(ids["James Lovell"],), group_id=G)
        )
        assert again["skipped"] == 1 and again["merged_count"] == 0
        merged = snapshot(engine)

        rebuilt = await rebuild.rebuild_from_wal(engine, G, force_clear=True)
        assert rebuilt["failed_lines"] == 0, rebuilt
        assert_same(merged, snapshot(engine), "knowledge_rebuild_from_wal force_clear")
    finally:
        engine.close()
    delete_database_files(settings.db_path)
    engine = open_engine(settings)
    try:
        assert_same(merged, snapshot(engine), "database deleted and reopened")
    finally:
        engine.close()


async def test_merge_domain_failures_are_results(engine: Engine) -> None:
    ids = await _entities(engine, G, "A", "B")
    other = await _entities(engine, "elsewhere", "C")
    none = await merge_entities(engine, MergeRequest(alias_names=("B",), group_id=G))
    assert none["success"] is False and "at least one of canonical" in none["errors"][0]
    missing = await merge_entities(
        engine, MergeRequest(canonical_name="Z", alias_names=("B",), group_id=G)
    )
    assert missing["success"] is False and missing["errors"] == [
        "canonical entity not found: name=Z, group=crew"
    ]
    soft = await merge_entities(
        engine,
        MergeRequest(canonical_uuid=ids["A"], alias_names=("B", "nobody"), group_id=G),
    )
    assert soft["success"] is True and soft["merged_count"] == 1, soft
    assert soft["errors"] == ["alias name 'nobody' matches no entities in group 'crew'"]
    foreign = await merge_entities(
        engine, MergeRequest(canonical_uuid=ids["A"], alias_uuids=(other["C"],), group_id=G)
    )
    assert foreign["success"] is False and foreign["merged_count"] == 0, foreign


@pytest.mark.kuzu_only(
    "cross-group facts: the FalkorDB backend keeps one graph per group and has no hop into another group's graph (storage/falkordb/backend.py docstring), so pointers stay unbound"
)
async def test_cross_group_pointers_bind_hide_count_and_rebind(settings: Settings) -> None:
    engine = open_engine(settings)
    try:
        await _entities(engine, "people", "Gene Kranz")
        await _entities(engine, "missions", "Apollo 13")
        await engine.commit_episode(
            EpisodeCommit(
                group_id="dupes",
                episode=Episode(uuid=str(uuid.uuid4()), group_id="dupes", name="n", content="two"),
                entities=[Entity(str(uuid.uuid4()), "dupes", n) for n in ("Twin", "twin")],
            )
        )
        bound = await add_cross_group_edge(
            engine,
            "FLIGHT_DIRECTOR_OF",
            Endpoint(source_group_id="people", endpoint_name=" GENE KRANZ\x07"),
            Endpoint(source_group_id="missions", endpoint_name="apollo 13"),
            "layer",
            "Gene Kranz was flight director of Apollo 13",
            None,
            None,
        )
        src = bound["cross_group_pointers"]["src"]
        assert src["binding_state"] == "bound" and src["endpoint_name"] == "gene kranz"
        assert bound["source_node_uuid"] == src["resolved_uuid"]
        unbound = await add_cross_group_edge(
            engine,
            "KNOWS",
            Endpoint(source_group_id="people", endpoint_name="Sy Liebergot"),
            Endpoint(source_group_id="missions", endpoint_name="Apollo 13"),
            "layer",
            "",
            None,
            None,
        )
        assert unbound["source_node_uuid"] == ""
        assert unbound["cross_group_pointers"]["src"]["binding_state"] == "unbound"
        ambiguous = await add_cross_group_edge(
            engine,
            "KNOWS",
            Endpoint(source_group_id="dupes", endpoint_name="twin"),
            Endpoint(source_group_id="missions", endpoint_name="Apollo 13"),
            "layer",
            "",
            None,
            None,
        )
        assert ambiguous["cross_group_pointers"]["src"]["binding_state"] == "ambiguous"
        listed = (await reads.get_edges_by_group(engine, ["layer"]))["edges"]
        assert [e["uuid"] for e in listed] == [bound["uuid"]], "unbound/ambiguous edges are hidden"
        status = await admin_status.status(engine)
        assert status["cross_group_pointers"] == {"bound": 4, "unbound": 1, "ambiguous": 1}

        # The missing entity appears: a rebind binds the pointer and the edge becomes visible.
        await _entities(engine, "people", "Sy Liebergot")
        counts = await rebind(engine, "people")
        # Kranz's pointer is re-checked too: the group's position moved past its bound_at_seq.
        assert counts["bound"] == 2 and counts["checked"] == 2, counts
        assert counts["staleness_skipped"] == 0, counts
        assert len((await reads.get_edges_by_group(engine, ["layer"]))["edges"]) == 2
        assert (await rebind(engine, "people"))["checked"] == 0, "a second call is a no-op"

        # Purging a source group unbinds the pointers into it (in the owning group's WAL).
        purge = await deletes.delete_by_group(engine, ["people"], dry_run=False, confirm=True)
        assert purge["unbound_impacts"] == [{"group_id": "layer", "pointer_count": 2}], purge
        assert (await reads.get_edges_by_group(engine, ["layer"]))["edges"] == []
        live = snapshot(engine)
    finally:
        engine.close()
    delete_database_files(settings.db_path)
    engine = open_engine(settings)
    try:
        assert_same(live, snapshot(engine), "reopen after purge")
        await _entities(engine, "people", "Gene Kranz")
        counts = await rebind(engine, "people")
        assert counts["bound"] == 1 and counts["unbound"] == 1, counts
        assert len((await reads.get_edges_by_group(engine, ["layer"]))["edges"]) == 1
    finally:
        engine.close()


@pytest.mark.kuzu_only(
    "cross-group facts: the FalkorDB backend keeps one graph per group and has no hop into another group's graph (storage/falkordb/backend.py docstring), so pointers stay unbound"
)
async def test_rebind_invalidates_self_loops_and_duplicates(engine: Engine) -> None:
    await _entities(engine, "people", "Ann", "Bob")
    for name in ("Ann", "Bob"):
        await add_cross_group_edge(
            engine,
            "KNOWS",
            Endpoint(source_group_id="people", endpoint_name=name),
            Endpoint(source_group_id="people", endpoint_name="Carl"),
            "layer",
            "",
            None,
            None,
        )
    for target in ("Ann", "Bob"):
        await add_cross_group_edge(
            engine,
            "KNOWS",
            Endpoint(source_group_id="people", endpoint_name="Ann"),
            Endpoint(source_group_id="people", endpoint_name=target),
            "layer",
            "",
            None,
            None,
        )
    # Bob becomes Ann: Ann->Bob turns into a self-loop, Bob->Carl duplicates Ann->Carl.
    await merge_entities(
        engine, MergeRequest(canonical_name="Ann", alias_names=("Bob",), group_id="people")
    )
    await _entities(engine, "people", "Carl")
    counts = await rebind(engine, "people")
    assert counts["invalidated_duplicate"] == 1, counts
    assert counts["invalidated_self_loop"] == 1, counts
    visible = (await reads.get_edges_by_group(engine, ["layer"]))["edges"]
    assert len([e for e in visible if e["invalid_at"] is None]) == 2, visible


def _publish(src: Path, dst: Path) -> None:
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst)


async def test_generation_reset_rebinds_pointers(tmp_path: Path) -> None:
    """Publish a stream, hydrate it elsewhere, re-create the publisher's stream with other
    content, rebuild on the consumer: reset detected, old rows gone, new rows, pointers rebound."""
    pub = Settings.for_home(tmp_path / "pub" / ".lcg", kuzu_buffer_pool_mb=128)
    con = Settings.for_home(tmp_path / "con" / ".lcg", kuzu_buffer_pool_mb=128)
    publisher = open_engine(pub)
    try:
        old = await _entities(publisher, "shared", "Odyssey", "Aquarius")
    finally:
        publisher.close()
    _publish(pub.wal_dir / "shared", con.wal_dir / "shared")
    consumer = open_engine(con)
    try:
        edge = await add_cross_group_edge(
            consumer,
            "DOCKED_WITH",
            Endpoint(source_group_id="shared", endpoint_name="Odyssey"),
            Endpoint(source_group_id="shared", endpoint_name="Aquarius"),
            "notes",
            "",
            None,
            None,
        )
        assert edge["source_node_uuid"] == old["Odyssey"]
    finally:
        consumer.close()

    shutil.rmtree(pub.home)
    publisher = open_engine(pub)
    try:
        new = await _entities(publisher, "shared", "Aquarius", "Kitty Hawk", "Odyssey")
    finally:
        publisher.close()
    _publish(pub.wal_dir / "shared", con.wal_dir / "shared")

    consumer = open_engine(con)
    try:
        result = await rebuild.rebuild_from_wal(consumer, "shared")
        assert result["reset_detected"] is True, result
        assert result["previous_generation"] != result["generation"]
        assert result["cross_group_rebind"]["bound"] == 2, result
        nodes = (await reads.get_nodes_by_group(consumer, ["shared"]))["nodes"]
        assert {n["uuid"] for n in nodes} == set(new.values()), "old rows gone, new rows present"
        edges = (await reads.get_edges_by_group(consumer, ["notes"]))["edges"]
        assert [(e["source_node_uuid"], e["target_node_uuid"]) for e in edges] == [
            (new["Odyssey"], new["Aquarius"])
        ]
        rebound = snapshot(consumer)
    finally:
        consumer.close()
    delete_database_files(con.db_path)
    consumer = open_engine(con)
    try:
        assert_same(rebound, snapshot(consumer), "consumer reopened after the reset")
    finally:
        consumer.close()


def _corrections(root: Path, text: str) -> Path:
    path = root / ".liminis" / "knowledge-corrections.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


async def test_corrections_validate_apply_and_stamp(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    settings = Settings.for_home(
        tmp_path / ".lcg", kuzu_buffer_pool_mb=128, workspace_root=str(root)
    )
    engine = open_engine(settings)
    try:
        from lcg.curation.corrections import apply_corrections, validate_corrections

        assert (await validate_corrections(engine))["message"] == "No corrections file found"
        await _entities(engine, "liminis", "Houston", "Mission Control", "MOCR")
        edge = await _fact(engine, "liminis", "Houston", "CALLED", "MOCR")
        bad = _corrections(
            root,
            "corrections:\n  - {id: x, type: same_as}\n  - {id: y, type: rename}\n"
            "  - {id: c1, type: same_as, canonical: a, aliases: [b]}\n"
            "  - {id: c2, type: same_as, canonical: b, aliases: [a]}\n",
        )
        report = await validate_corrections(engine)
        assert report["valid"] is False and report["total_corrections"] == 4, report
        assert any(i == "Alias cycle: a -> b -> a" for i in report["issues"]), report
        assert len(report["issues"]) == 4, report
        text = (
            "# reviewed by flight\n"
            "corrections:\n"
            "  - id: merge-1   # keep this comment\n"
            "    type: same_as\n"
            "    canonical: Mission Control\n"
            "    aliases:\n"
            "      - Houston\n"
            "      - MOCR\n"
            "  - id: retract-1\n"
            "    type: retract\n"
            f"    edge_uuid: {edge}\n"
            "  - id: done\n"
            "    type: retract\n"
            f"    edge_uuid: {edge}\n"
            "    applied_at: '2020-01-01T00:00:00Z'\n"
        )
        bad.write_text(text, encoding="utf-8")
        assert (await validate_corrections(engine))["valid"] is True
        dry = await apply_corrections(engine, dry_run=True)
        assert dry["success"] and dry["applied"] == 0 and dry["skipped"] == 1, dry
        assert [d["action"] for d in dry["details"]] == ["dry_run:same_as", "dry_run:retract"]
        assert bad.read_text(encoding="utf-8") == text
        done = await apply_corrections(engine, dry_run=False)
        assert done["success"] and done["applied"] == 2, done
        patched = bad.read_text(encoding="utf-8")
        assert "# keep this comment" in patched and "# reviewed by flight" in patched
        import yaml

        entries = yaml.safe_load(patched)["corrections"]
        assert [bool(e.get("applied_at")) for e in entries] == [True, True, True]
        assert entries[0]["aliases"] == ["Houston", "MOCR"]
        assert entries[2]["applied_at"] == "2020-01-01T00:00:00Z"
        forwarded = await engine.entity_by_name("liminis", "Houston")
        assert forwarded is not None and forwarded.name == "Mission Control"
        facts = (await reads.get_edges_by_uuids(engine, [edge]))["edges"]
        assert facts and facts[0]["invalid_at"] is not None
        again = await apply_corrections(engine, dry_run=False)
        assert again["applied"] == 0 and again["skipped"] == 3, again
    finally:
        engine.close()


async def test_corrections_need_a_workspace_root(engine: Engine) -> None:
    from lcg.curation.corrections import validate_corrections
    from lcg.errors import ConfigError

    with pytest.raises(ConfigError, match="LIMINIS_WORKSPACE_ROOT not set"):
        await validate_corrections(engine)
