"""The ops CLI: `lcg export` / `lcg import` and `lcg wal dump|mark|marks|rebuild|recover`.

- export/import round trip on a 200-episode graph with a cross-group fact: counts and every row
  (episodes, entities, facts, mentions, hops, embedding records) equal in a fresh workspace;
  importing the same file again writes nothing (not even a WAL line); the imported workspace's
  WAL alone rebuilds it;
- the wal commands work on an engine the command opens, and through a running service.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
from click.testing import CliRunner  # noqa: TID251  CLI tests drive click's own runner
from graph_invariants import snapshot
from rpc_support import running_server, wait_settled

from lcg import Engine, Entity, Episode, EpisodeCommit, Fact, Settings, open_engine
from lcg.cli.main import cli
from lcg.curation.pointers import Endpoint, add_cross_group_edge
from lcg.storage.store import delete_database_files
from lcg.wal.layout import ordered_files

CREW = ("Jim Lovell", "Jack Swigert", "Fred Haise", "Gene Kranz", "Ken Mattingly")
CRAFT = ("Odyssey", "Aquarius", "Saturn V", "Service Module", "Mission Control")
START = datetime(1970, 4, 11, 19, 13, tzinfo=UTC)


async def build_graph(engine: Engine, episodes: int = 200) -> None:
    """`episodes` dated notes over two groups, each with entities, facts and mentions."""
    known: dict[tuple[str, str], str] = {}
    for i in range(episodes):
        group = "apollo" if i % 3 else "ground"
        when = START + timedelta(minutes=7 * i)
        person, craft = CREW[i % len(CREW)], CRAFT[(i // 2) % len(CRAFT)]
        fresh = []
        for name in (person, craft, f"Event {i // 10}"):
            if (group, name) not in known:
                known[(group, name)] = str(uuid.uuid4())
                fresh.append(Entity(known[(group, name)], group, name, created_at=when))
        ep = Episode(
            uuid=str(uuid.uuid4()),
            group_id=group,
            name=f"note-{i}",
            content=f"At T+{i * 7} minutes {person} reported on {craft}.",
            source_description=f"log.md:{i}",
            source_file="log.md",
            created_at=when,
            valid_at=when,
        )
        fact = Fact(
            uuid=str(uuid.uuid4()),
            group_id=group,
            source_uuid=known[(group, person)],
            target_uuid=known[(group, craft)],
            name="REPORTED_ON",
            fact=f"{person} reported on {craft} at T+{i * 7}",
            episodes=(ep.uuid,),
            valid_at=when,
            created_at=when,
        )
        await engine.commit_episode(
            EpisodeCommit(
                group_id=group,
                episode=ep,
                entities=fresh,
                facts=[fact],
                mentions=[known[(group, person)], known[(group, craft)]],
            )
        )


def _rows(engine: Engine) -> dict[str, list[Any]]:
    snap = snapshot(engine)
    snap.pop("meta")  # positions and generations belong to each workspace's own WAL
    return snap


def _invoke(*args: str) -> Any:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _wal_lines(settings: Settings) -> int:
    return sum(
        len(p.read_bytes().splitlines())
        for g in settings.wal_dir.iterdir()
        if g.is_dir()
        for p in ordered_files(g)
    )


def test_export_import_round_trip_is_idempotent(tmp_path: Path) -> None:
    source = Settings.for_home(tmp_path / "src" / ".lcg", kuzu_buffer_pool_mb=128)
    engine = open_engine(source)
    try:
        anyio.run(build_graph, engine)
        # A cross-group fact, in a group imported before the groups its ends live in.
        edge = anyio.run(
            add_cross_group_edge,
            engine,
            "TALKED_TO",
            Endpoint(source_group_id="ground", endpoint_name="Gene Kranz"),
            Endpoint(source_group_id="apollo", endpoint_name="Jim Lovell"),
            "annotations",
            "Kranz talked to Lovell",
            None,
            None,
        )
        assert edge["source_node_uuid"] and edge["target_node_uuid"]
        original = _rows(engine)
    finally:
        engine.close()
    assert len(original["episodes"]) == 200 and len(original["mentions"]) == 400

    out = tmp_path / "graph.jsonl"
    exported = _invoke("--home", str(source.home), "export", str(out))
    assert exported["episodes"] == 200 and exported["facts"] == len(original["facts"])
    header = json.loads(out.read_text(encoding="utf-8").splitlines()[0])
    assert header["kind"] == "header" and header["schema_version"] >= 1
    assert "embedding" not in out.read_text(encoding="utf-8")

    fresh = Settings.for_home(tmp_path / "dst" / ".lcg", kuzu_buffer_pool_mb=128)
    first = _invoke("--home", str(fresh.home), "import", str(out))
    assert first["written"]["episodes"] == 200 and first["unchanged"] == 0, first
    lines = _wal_lines(fresh)
    engine = open_engine(fresh)
    try:
        imported = _rows(engine)
    finally:
        engine.close()
    assert {k: len(v) for k, v in imported.items()} == {k: len(v) for k, v in original.items()}
    assert imported == original

    second = _invoke("--home", str(fresh.home), "import", str(out))
    assert second["written"] == dict.fromkeys(("episodes", "entities", "facts", "mentions"), 0)
    assert _wal_lines(fresh) == lines, "a second import writes no WAL line"

    delete_database_files(fresh.db_path)
    engine = open_engine(fresh)
    try:
        assert _rows(engine) == original, "the imported workspace's WAL rebuilds it"
    finally:
        engine.close()


def test_wal_commands_on_a_local_engine(settings: Settings, tmp_path: Path) -> None:
    engine = open_engine(settings)
    try:
        anyio.run(build_graph, engine, 12)
    finally:
        engine.close()
    home = str(settings.home)
    mark = _invoke("--home", home, "wal", "mark", "before", "--group", "apollo")
    assert mark["success"] and mark["seq"] is not None
    listed = _invoke("--home", home, "wal", "marks", "--group", "apollo")
    assert [m["name"] for m in listed["checkpoints"]] == ["before"]
    assert listed["checkpoints"][0]["reachable"] is True
    target = tmp_path / "compacted"
    dumped = _invoke("--home", home, "wal", "dump", "--target-dir", str(target))
    assert dumped["success"], dumped
    assert (target / "apollo").is_dir()
    rebuilt = _invoke("--home", home, "wal", "rebuild", "--group", "apollo", "--force-clear")
    assert rebuilt["success"] and rebuilt["failed_lines"] == 0, rebuilt
    dry = _invoke(
        "--home", home, "wal", "rebuild", "--group", "ground", "--from-seq", "1", "--dry-run"
    )
    assert dry["dry_run"] is True
    recovered = _invoke(
        "--home", home, "wal", "recover", "--strategy", "rebuild_from_workspace_wal"
    )
    assert recovered["success"], recovered
    deleted = _invoke("--home", home, "wal", "mark", "before", "--group", "apollo", "--delete")
    assert deleted["success"], deleted


def test_wal_and_export_go_through_a_running_service(settings: Settings, tmp_path: Path) -> None:
    with running_server(settings) as (server, path, _):
        wait_settled(server)
        engine = server.engine
        assert engine is not None
        anyio.run(build_graph, engine, 9)
        home, sock = str(settings.home), str(path)
        mark = _invoke("--home", home, "wal", "mark", "m1", "--group", "apollo", "--socket", sock)
        assert mark["success"], mark
        rebuilt = _invoke(
            "--home", home, "wal", "rebuild", "--group", "apollo", "--force-clear", "--socket", sock
        )
        assert rebuilt["success"] and rebuilt["mutations_replayed"] > 0, rebuilt
        full = _invoke("--home", home, "wal", "recover", "--socket", sock)
        assert full["success"], full
        out = tmp_path / "served.jsonl"
        exported = _invoke(
            "--home", home, "export", str(out), "--group", "ground", "--socket", sock
        )
        assert exported["groups"] == ["ground"] and exported["episodes"] == 3, exported
        again = _invoke("--home", home, "import", str(out), "--socket", sock)
        assert again["unchanged"] > 0 and sum(again["written"].values()) == 0, again
