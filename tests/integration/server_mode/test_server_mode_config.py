"""Server mode: the engine opens the store `LCG_STORAGE` names, `knowledge_status`
says which store serves the graph (backend, server, role), and `lcg wal export` / `lcg wal
import` move a workspace between the embedded store and a FalkorDB server through the plain
JSONL WAL, byte-identical after a round trip."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner  # noqa: TID251  CLI tests drive click's own runner
from rebuild_jobs import rebuild_and_wait
from rpc_support import ServiceProcess, short_socket_dir, wait_healthy

from lcg import Engine, Entity, Settings, open_engine
from lcg.admin.walmove import EXPORT_FILE, export_wal, import_wal
from lcg.cli.main import cli
from lcg.errors import InvalidRequestError, StorageError
from lcg.service.registry import dispatch
from lcg.service.rpc.client import RpcClient
from lcg.storage.store import engine_version
from lcg.wal.layout import group_dir
from lcg.wal.records import encode_batch, entity_op

pytestmark = pytest.mark.anyio


def test_an_unreachable_server_is_a_storage_error_and_creates_no_database(tmp_path: Path) -> None:
    settings = Settings.for_home(
        tmp_path / ".lcg", embedder="hash", storage="falkordb", falkordb_url="redis://127.0.0.1:1"
    )
    with pytest.raises(StorageError, match=r"cannot reach FalkorDB at 127\.0\.0\.1:1"):
        open_engine(settings)
    assert not settings.db_path.exists()


async def test_status_reports_the_embedded_store(engine: Engine) -> None:
    status = await dispatch(engine, "knowledge_status", {})
    assert status["storage"] == {
        "backend": "kuzu",
        "server": str(engine.settings.db_path),
        "role": "embedded",
        "engine": engine_version(engine.settings.embedded_store),
    }


def _server_settings(home: Path, url: str, password: str | None = None) -> Settings:
    return Settings.for_home(
        home,
        embedder="hash",
        extractor="heuristic",
        storage="falkordb",
        falkordb_url=url,
        falkordb_password=password,
    )


@pytest.fixture
def empty_server(falkordb_url: str) -> str:
    from lcg.storage.falkordb.backend import FalkorBackend

    server = FalkorBackend(falkordb_url)
    try:
        server.client.flushall()
    finally:
        server.close()
    return falkordb_url


async def test_status_reports_the_server_its_role_and_never_the_password(
    tmp_path: Path, empty_server: str
) -> None:
    from lcg.storage.falkordb.backend import FalkorBackend

    secret = "s3cret-pass"
    admin = FalkorBackend(empty_server)
    admin.client.config_set("requirepass", secret)
    try:
        host_port = empty_server.split("://", 1)[1]
        engine = open_engine(_server_settings(tmp_path / ".lcg", empty_server, secret))
        try:
            await dispatch(engine, "knowledge_assert_entity", {"name": "Ana", "group_id": "g"})
            status = await dispatch(engine, "knowledge_status", {})
        finally:
            engine.close()
    finally:
        authed = FalkorBackend(empty_server, password=secret)
        authed.client.config_set("requirepass", "")
        authed.close()
        admin.close()
    storage = status["storage"]
    assert storage["backend"] == "falkordb"
    assert storage["server"] == f"redis://{host_port}"
    assert storage["role"] == "master"  # INFO replication of a lone server
    assert secret not in repr(status)
    assert status["entity_count"] == 1


async def _populate(engine: Engine) -> None:
    """Two groups: extracted episodes, caller facts with a supersession, a deletion."""
    for group, text in (
        ("apollo", "Neil Armstrong commanded Apollo 11. Buzz Aldrin flew with Neil Armstrong."),
        ("atlas", "Ana works on Atlas. Atlas ships the Orbit release."),
    ):
        await dispatch(
            engine,
            "knowledge_add_episode",
            {"name": f"{group}-1", "episode_body": text, "group_id": group},
        )
    for day, leader in (("2025-01-01", "Ana"), ("2025-03-01", "Bo")):
        await dispatch(
            engine,
            "knowledge_add_facts",
            {
                "group_id": "atlas",
                "reference_time": day,
                "entities": [{"name": leader}, {"name": "Atlas"}],
                "facts": [
                    {
                        "source": leader,
                        "target": "Atlas",
                        "relation_type": "LEADS",
                        "fact": f"{leader} leads Atlas.",
                    }
                ],
            },
        )
    made = await dispatch(
        engine,
        "knowledge_add_episode",
        {"name": "gone", "episode_body": "Temporary note about Orbit.", "group_id": "atlas"},
    )
    await dispatch(engine, "knowledge_delete_episode", {"episode_uuid": made["episode_uuid"]})


async def _answers(engine: Engine) -> dict[str, Any]:
    """What the methods answer, without the store-dependent status fields."""
    status = await dispatch(engine, "knowledge_status", {})
    out: dict[str, Any] = {
        k: status[k] for k in ("entity_count", "relationship_count", "episode_count")
    }
    for group in ("apollo", "atlas"):
        found = await dispatch(
            engine, "knowledge_find_entities", {"query": "Atlas Armstrong", "group_ids": [group]}
        )
        out[f"entities {group}"] = sorted((n["uuid"], n["name"]) for n in found["nodes"])
    facts = await dispatch(
        engine, "knowledge_find_relationships", {"query": "leads Atlas", "group_ids": ["atlas"]}
    )
    out["facts"] = sorted((f["uuid"], f["fact"], f.get("invalid_at") or "") for f in facts["facts"])
    timeline = await dispatch(
        engine, "knowledge_get_entity_timeline", {"name": "Atlas", "group_id": "atlas"}
    )
    out["timeline"] = [(f["uuid"], f["status"]) for f in timeline["facts"]]
    return out


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.jsonl"))}


async def test_kuzu_to_falkordb_and_back_through_the_wal_is_identical(
    tmp_path: Path, empty_server: str
) -> None:
    embedded = Settings.for_home(tmp_path / "kuzu" / ".lcg", embedder="hash", extractor="heuristic")
    engine = open_engine(embedded)
    try:
        await _populate(engine)
        before = await _answers(engine)
        first = export_wal(engine, tmp_path / "one")
    finally:
        engine.close()
    # What is compared below: a superseded fact among current ones, entities of both groups.
    assert [status for _, status in before["timeline"]].count("superseded") == 1
    assert before["entities apollo"] and before["entities atlas"] and before["facts"]
    assert set(first["groups"]) == {"apollo", "atlas"}
    assert all(g["lines_left_out"] == 0 for g in first["groups"].values())
    assert (group_dir(tmp_path / "one", "atlas") / EXPORT_FILE).is_file()

    server = open_engine(_server_settings(tmp_path / "server" / ".lcg", empty_server))
    try:
        imported = import_wal(server, tmp_path / "one")
        assert {g: v["lines"] for g, v in imported["groups"].items()} == {
            g: v["lines"] for g, v in first["groups"].items()
        }
        assert await _answers(server) == before
        export_wal(server, tmp_path / "two")
    finally:
        server.close()
    assert _files(tmp_path / "two") == _files(tmp_path / "one")

    # ... and back into a fresh embedded workspace, which answers the same again.
    back = open_engine(
        Settings.for_home(tmp_path / "back" / ".lcg", embedder="hash", extractor="heuristic")
    )
    try:
        import_wal(back, tmp_path / "two")
        assert await _answers(back) == before
        export_wal(back, tmp_path / "three")
    finally:
        back.close()
    assert _files(tmp_path / "three") == _files(tmp_path / "one")


async def test_import_refuses_a_group_that_holds_data_and_changes_nothing(
    tmp_path: Path, empty_server: str
) -> None:
    embedded = Settings.for_home(tmp_path / "kuzu" / ".lcg", embedder="hash", extractor="heuristic")
    engine = open_engine(embedded)
    try:
        await _populate(engine)
        export_wal(engine, tmp_path / "out")
        with pytest.raises(InvalidRequestError, match="empty directory"):
            export_wal(engine, tmp_path / "out")
    finally:
        engine.close()
    server = open_engine(_server_settings(tmp_path / "server" / ".lcg", empty_server))
    try:
        await dispatch(server, "knowledge_assert_entity", {"name": "Zed", "group_id": "atlas"})
        status = await dispatch(server, "knowledge_status", {})
        with pytest.raises(InvalidRequestError, match="'atlas' already holds data"):
            import_wal(server, tmp_path / "out")
        after = await dispatch(server, "knowledge_status", {})
        assert (after["entity_count"], after["episode_count"]) == (
            status["entity_count"],
            status["episode_count"],
        )
    finally:
        server.close()


def test_the_cli_exports_and_imports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / ".lcg"
    monkeypatch.setenv("LCG_EMBEDDER", "hash")
    monkeypatch.setenv("LCG_EXTRACTOR", "heuristic")
    runner = CliRunner()
    engine = open_engine(Settings.for_home(home, embedder="hash", extractor="heuristic"))
    try:
        import anyio

        anyio.run(dispatch, engine, "knowledge_assert_entity", {"name": "Ana", "group_id": "g"})
    finally:
        engine.close()
    out = runner.invoke(cli, ["--home", str(home), "wal", "export", str(tmp_path / "x")])
    assert out.exit_code == 0, out.output
    assert '"g"' in out.output
    fresh = tmp_path / "fresh" / ".lcg"
    done = runner.invoke(cli, ["--home", str(fresh), "wal", "import", str(tmp_path / "x")])
    assert done.exit_code == 0, done.output
    again = runner.invoke(cli, ["--home", str(fresh), "wal", "export", str(tmp_path / "y")])
    assert again.exit_code == 0, again.output
    assert _files(tmp_path / "y") == _files(tmp_path / "x")


def _append_to_stream_only(url: str, group: str, name: str) -> None:
    """Another writer's batch that reached the group's stream but not its graph (its graph
    change failed after the append, or its process died between them)."""
    from lcg.storage.falkordb.backend import _APPEND, FalkorBackend, FalkorReader
    from lcg.storage.falkordb.keys import stream_key

    server = FalkorBackend(url)
    try:
        position = FalkorReader(server).position(group)
        ops = [entity_op(Entity(str(uuid.uuid4()), group, name, created_at=datetime.now(UTC)))]
        lines = encode_batch(position, "2025-01-01T00:00:00Z", ops)
        server.client.eval(
            _APPEND, 1, stream_key(group), position, f"{position + 1}-0", position, b"".join(lines)
        )
    finally:
        server.close()


def _stream(url: str, group: str) -> list[Any]:
    from lcg.storage.falkordb.backend import FalkorBackend

    server = FalkorBackend(url)
    try:
        return list(server.stream_records(group))
    finally:
        server.close()


async def _entity_names(engine: Engine, group: str) -> list[str]:
    nodes = await dispatch(engine, "knowledge_get_nodes_by_group", {"group_ids": [group]})
    return sorted(n["name"] for n in nodes["nodes"])


async def test_a_stream_ahead_of_its_graph_is_caught_up_at_open_and_on_a_lost_race(
    tmp_path: Path, empty_server: str
) -> None:
    settings = _server_settings(tmp_path / ".lcg", empty_server)
    engine = open_engine(settings)
    try:
        await dispatch(engine, "knowledge_assert_entity", {"name": "Ana", "group_id": "g"})
    finally:
        engine.close()
    _append_to_stream_only(empty_server, "g", "Bo")
    engine = open_engine(settings)  # the open applies the stream's tail to the graph
    try:
        assert await _entity_names(engine, "g") == ["Ana", "Bo"]
        _append_to_stream_only(empty_server, "g", "Cy")
        # The first commit lands at the graph's old position and loses (GroupMovedError): the
        # engine applies the stream's tail, catches its indexes up and retries the write.
        await dispatch(engine, "knowledge_assert_entity", {"name": "Di", "group_id": "g"})
        assert await _entity_names(engine, "g") == ["Ana", "Bo", "Cy", "Di"]
        assert (await dispatch(engine, "knowledge_find_entities", {"query": "Cy"}))["count"] == 1
        seqs = [r.seq for r in _stream(empty_server, "g")]
        assert seqs == list(range(len(seqs)))  # every line once, no gap
    finally:
        engine.close()


def test_lcg_serve_on_a_falkordb_server(tmp_path: Path, empty_server: str) -> None:
    """`LCG_STORAGE=falkordb lcg serve`, a process of its own, answers writes, reads and
    status from the server."""
    env = {
        "LCG_STORAGE": "falkordb",
        "LCG_FALKORDB_URL": empty_server,
        "LCG_EMBEDDER": "hash",
        "LCG_EXTRACTOR": "heuristic",
    }
    with short_socket_dir() as directory:
        path = directory / "s.sock"
        service = ServiceProcess(tmp_path, path, env=env).start()
        try:
            wait_healthy(path)
            with RpcClient(path, timeout=30) as client:
                client.call(
                    "knowledge_add_episode",
                    {"name": "n", "episode_body": "Ana leads Atlas.", "group_id": "g"},
                )
                found = client.call("knowledge_find_entities", {"query": "Atlas"})
                status = client.call("knowledge_status", {})
        finally:
            assert service.stop() == 0
    # Atlas by its name first, then Ana, whose summary (the episode's sentence) names Atlas.
    assert [n["name"] for n in found["nodes"]] == ["Atlas", "Ana"]
    assert status["storage"]["backend"] == "falkordb"
    assert status["episode_count"] == 1
    assert not (tmp_path / ".lcg" / "db").exists() or not any((tmp_path / ".lcg" / "db").iterdir())


async def test_status_reports_each_groups_stream_in_server_mode(
    tmp_path: Path, empty_server: str
) -> None:
    """In server mode the WAL is a stream per group on the server: `wal` (the default group)
    and `wal_groups` describe those streams — entries, bytes, last seq, what the graph holds —
    instead of the (absent) JSONL files."""
    engine = open_engine(_server_settings(tmp_path / ".lcg", empty_server))
    try:
        await dispatch(engine, "knowledge_assert_entity", {"name": "Ana", "group_id": "g"})
        await dispatch(engine, "knowledge_assert_entity", {"name": "Bo", "group_id": "g"})
        await dispatch(engine, "knowledge_assert_entity", {"name": "Cy"})  # the default group
        status = await dispatch(engine, "knowledge_status", {})
    finally:
        engine.close()
    g = status["wal_groups"]["g"]
    assert g["stream"] == "{lcg:g}:wal"
    assert g["entries"] == 2
    assert g["byte_size"] > 0
    assert g["max_seq"] == g["applied_seq"] >= 1
    assert g["hydration_status"] == "hydrated"
    assert g["generation_status"] == "not_applicable"
    wal = status["wal"]
    assert wal["exists"] is True
    assert wal["file_count"] == 0
    assert wal["entries"] == 1
    assert wal["max_seq"] == wal["applied_seq"]
    assert set(status["wal_groups"]) == {"g", "liminis"}


async def test_a_tail_rebuild_applies_the_streams_lines_again_in_server_mode(
    tmp_path: Path, empty_server: str
) -> None:
    """`knowledge_rebuild_from_wal` with from_seq > 0 on a server: the stream's lines from
    from_seq on are applied again to the group's rows (a row lost from the graph comes back);
    to_seq is refused with the reason, and nothing changes."""
    from lcg.storage.falkordb.backend import FalkorBackend
    from lcg.storage.falkordb.keys import graph_key

    engine = open_engine(_server_settings(tmp_path / ".lcg", empty_server))
    try:
        for name in ("Ana", "Bo", "Cy"):
            await dispatch(engine, "knowledge_assert_entity", {"name": name, "group_id": "g"})
        lost = await _entity_names(engine, "g")
        server = FalkorBackend(empty_server)
        try:
            server.client.execute_command(
                "GRAPH.QUERY", graph_key("g"), "MATCH (e:Entity {name: 'Cy'}) DELETE e"
            )
            max_seq = server.stream_records("g")[-1].seq
        finally:
            server.close()
        assert await _entity_names(engine, "g") == ["Ana", "Bo"]
        with pytest.raises(InvalidRequestError, match="to_seq is refused") as refused:
            await dispatch(
                engine,
                "knowledge_rebuild_from_wal",
                {"group_id": "g", "from_seq": 1, "to_seq": 1},
            )
        assert refused.value.field == "to_seq"
        assert await _entity_names(engine, "g") == ["Ana", "Bo"]
        result = await rebuild_and_wait(engine, {"group_id": "g", "from_seq": 1})
        assert result["success"] is True
        assert result["mutations_replayed"] == max_seq  # lines 1..max_seq
        assert await _entity_names(engine, "g") == lost == ["Ana", "Bo", "Cy"]
        found = await dispatch(
            engine, "knowledge_find_entities", {"query": "Cy", "group_ids": ["g"]}
        )
        assert [n["name"] for n in found["nodes"]] == ["Cy"]
        status = await dispatch(engine, "knowledge_status", {})
        assert status["wal_groups"]["g"]["hydration_status"] == "hydrated"
    finally:
        engine.close()
