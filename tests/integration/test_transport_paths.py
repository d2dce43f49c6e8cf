"""Paths named over the socket, MCP or HTTP stay inside the workspace (lcg.service.paths).

`knowledge_export_graph` could overwrite any file the process could write, a relative path
resolved against the service's working directory, `knowledge_dump_wal` wrote anywhere but the
live WAL, and `knowledge_import_graph`'s error told whether any path existed. These tests pin
the rules: relative paths resolve in the export directory; outside paths and symlinks out are
refused with one message whatever exists there; an existing file is replaced only with
`overwrite: true`. The CLI, the local user, still writes where it is told (test_cli_ops).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from rpc_support import running_server, wait_settled

from lcg import ConflictError, Engine, InvalidRequestError, Settings
from lcg.service.registry import dispatch
from lcg.service.rpc.client import RpcClient, RpcError

pytestmark = pytest.mark.anyio


async def _populate(engine: Engine) -> None:
    await dispatch(engine, "knowledge_assert_entity", {"name": "Apollo 11"})


async def test_a_relative_path_lands_in_the_export_directory_and_is_private(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _populate(engine)
    monkeypatch.chdir(tmp_path)  # the service's working directory must not matter
    result = await dispatch(engine, "knowledge_export_graph", {"path": "graph.jsonl"})
    target = engine.settings.exports / "graph.jsonl"
    assert result["path"] == str(target)
    assert target.is_file() and not (tmp_path / "graph.jsonl").exists()
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert stat.S_IMODE(engine.settings.exports.stat().st_mode) == 0o700
    assert not [p for p in target.parent.iterdir() if p.name.startswith(".")]  # no temp left


async def test_an_existing_file_is_replaced_only_when_asked(engine: Engine) -> None:
    await _populate(engine)
    target = engine.settings.exports / "graph.jsonl"
    target.parent.mkdir(mode=0o700)
    target.write_text("precious\n")
    with pytest.raises(ConflictError, match="overwrite: true"):
        await dispatch(engine, "knowledge_export_graph", {"path": "graph.jsonl"})
    assert target.read_text() == "precious\n"
    result = await dispatch(
        engine, "knowledge_export_graph", {"path": "graph.jsonl", "overwrite": True}
    )
    assert result["entities"] == 1 and target.read_text().startswith('{"kind":"header"')


@pytest.mark.parametrize(
    "method", ["knowledge_export_graph", "knowledge_import_graph", "knowledge_dump_wal"]
)
async def test_outside_paths_are_refused_alike_whether_they_exist_or_not(
    engine: Engine, tmp_path: Path, method: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    existing = outside / "victim.jsonl"
    existing.write_text("do not touch\n")
    field = "target_dir" if method == "knowledge_dump_wal" else "path"
    messages = []
    for path in (existing, outside / "absent.jsonl", Path("../../outside/victim.jsonl")):
        params = {field: str(path), "overwrite": True} if "export" in method else {field: str(path)}
        with pytest.raises(InvalidRequestError) as info:
            await dispatch(engine, method, params)
        assert info.value.field == field
        messages.append(info.value.message.replace(str(path), "<path>"))
    assert len(set(messages)) == 1, messages
    assert "outside the workspace" in messages[0]
    assert existing.read_text() == "do not touch\n"
    assert sorted(p.name for p in outside.iterdir()) == ["victim.jsonl"]


async def test_a_symlink_out_of_the_workspace_is_refused(engine: Engine, tmp_path: Path) -> None:
    await _populate(engine)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.jsonl").write_text("do not touch\n")
    exports = engine.settings.exports
    exports.mkdir(mode=0o700)
    (exports / "escape").symlink_to(outside, target_is_directory=True)
    (exports / "link.jsonl").symlink_to(outside / "victim.jsonl")
    for method, params in (
        ("knowledge_export_graph", {"path": "escape/victim.jsonl", "overwrite": True}),
        ("knowledge_export_graph", {"path": "link.jsonl", "overwrite": True}),
        ("knowledge_export_graph", {"path": "escape/new.jsonl"}),
        ("knowledge_import_graph", {"path": "link.jsonl"}),
        ("knowledge_dump_wal", {"target_dir": "escape/dump"}),
    ):
        with pytest.raises(InvalidRequestError, match="outside the workspace"):
            await dispatch(engine, method, params)
    assert (outside / "victim.jsonl").read_text() == "do not touch\n"
    assert sorted(p.name for p in outside.iterdir()) == ["victim.jsonl"]


async def test_a_dump_inside_the_export_directory_works(engine: Engine) -> None:
    await _populate(engine)
    result = await dispatch(engine, "knowledge_dump_wal", {"target_dir": "dump"})
    target = engine.settings.exports / "dump"
    assert result["target_dir"] == str(target) and result["entities_dumped"] == 1
    assert sorted(p.name for p in target.iterdir()) == ["liminis"]


def test_an_export_directory_setting_is_where_relative_paths_go(
    settings: Settings, tmp_path: Path
) -> None:
    chosen = Settings.for_home(settings.home, export_dir=str(tmp_path / "shared-exports"))
    assert chosen.exports == tmp_path / "shared-exports"
    assert settings.exports == settings.home / "exports"


def test_over_the_socket_an_outside_path_is_refused(settings: Settings, tmp_path: Path) -> None:
    victim = tmp_path / "victim.jsonl"
    victim.write_text("do not touch\n")
    with running_server(settings) as (server, path, _):
        wait_settled(server)
        with RpcClient(path) as client:
            with pytest.raises(RpcError) as info:
                client.call("knowledge_export_graph", {"path": str(victim), "overwrite": True})
            assert "outside the workspace" in info.value.message
            with pytest.raises(RpcError) as info:
                client.call("knowledge_import_graph", {"path": "/etc/passwd"})
            assert "outside the workspace" in info.value.message
            assert "unexpected" not in info.value.message  # nothing read from the file
            done = client.call("knowledge_export_graph", {"path": "ok.jsonl"})
    assert victim.read_text() == "do not touch\n"
    assert Path(done["path"]) == settings.exports / "ok.jsonl"
    assert os.path.isfile(done["path"])
