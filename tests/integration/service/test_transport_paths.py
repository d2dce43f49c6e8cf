"""Paths named over the socket, MCP or HTTP stay inside the workspace (lcg.service.paths).

`knowledge_export_graph` could overwrite any file the process could write, a relative path
resolved against the service's working directory, `knowledge_dump_wal` wrote anywhere but the
live WAL, and `knowledge_import_graph`'s error told whether any path existed. These tests pin
the rules: relative paths resolve in the export directory; outside paths and symlinks out are
refused with one message whatever exists there; an existing file is replaced only with
`overwrite: true`. The CLI, the local user, still writes where it is told (test_cli_ops).

"Inside" compares resolved paths by components, never by string prefix: a sibling folder whose
name starts with the workspace's or the export directory's (`.lcg-evil` beside `.lcg`) is
outside, and a workspace file whose name starts with one of lcg's state entries
(`embeddings-backup.jsonl` beside `embeddings/`) is not that state.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from rpc_support import running_server, wait_settled
from ui_support import assert_error_shape, request, running_http

from lcg import ConflictError, Engine, InvalidRequestError, Settings, open_engine
from lcg.service.registry import REGISTRY, dispatch
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


# Every method that names a file or directory of this machine, and the field that names it.
CONFINED = {
    "knowledge_export_graph": "path",
    "knowledge_import_graph": "path",
    "knowledge_dump_wal": "target_dir",
}


def test_the_confined_methods_are_every_method_that_names_a_file() -> None:
    # A new method with a path field must join CONFINED (and so the sibling test below) or be
    # listed here with the reason it is not a file of this machine or not confined.
    not_confined = {
        ("knowledge_delete_by_source", "source_file"),  # a source label, never opened
        ("knowledge_process_chunk", "source_file"),  # likewise
        ("knowledge_code_changes", "path"),  # a prefix of symbol paths in the graph
        ("knowledge_code_ingest", "path"),  # reads a repository anywhere (docs/code-graph.md)
    }
    named = {
        (name, field)
        for name, method in REGISTRY.items()
        for field in method.params.model_fields
        if any(word in field for word in ("path", "dir", "file"))
    }
    assert named == set(CONFINED.items()) | not_confined


@pytest.fixture(params=["workspace", "export directory"])
def rooted(
    request: pytest.FixtureRequest, settings: Settings, tmp_path: Path
) -> Iterator[tuple[Path, Engine]]:
    """An engine and one of the two roots transports may use: the workspace (with the export
    directory inside it, the default), or an export directory of its own (`LCG_EXPORT_DIR`)."""
    if request.param == "workspace":
        chosen, root = settings, settings.home
    else:
        chosen = dataclasses.replace(settings, export_dir=tmp_path / "out")
        root = chosen.exports
    engine = open_engine(chosen)
    try:
        yield root, engine
    finally:
        engine.close()


@pytest.mark.parametrize("method", sorted(CONFINED))
async def test_a_sibling_sharing_a_roots_name_is_outside(
    rooted: tuple[Path, Engine], method: str
) -> None:
    root, engine = rooted
    await _populate(engine)
    sibling = root.with_name(root.name + "-evil")  # .lcg-evil beside .lcg, out-evil beside out
    sibling.mkdir()
    secret = sibling / "secret"
    # A real export file: an import wrongly let through would read it without complaint.
    made = await dispatch(engine, "knowledge_export_graph", {"path": "graph.jsonl"})
    shutil.copy(made["path"], secret)
    before = secret.read_bytes()
    field = CONFINED[method]
    targets = {
        "knowledge_export_graph": [secret, sibling / "new.jsonl"],
        "knowledge_import_graph": [secret],
        "knowledge_dump_wal": [sibling / "dump"],
    }[method]
    up = len(engine.settings.exports.relative_to(root.parent).parts)  # .. back to the parent
    for target in targets:
        relative = Path(*[".."] * up, target.relative_to(root.parent))
        for raw in (str(target), str(relative)):
            params: dict[str, object] = {field: raw}
            if method == "knowledge_export_graph":
                params["overwrite"] = True
            with pytest.raises(InvalidRequestError) as info:
                await dispatch(engine, method, params)
            assert info.value.field == field, raw
            assert "outside the workspace" in info.value.message, raw
    assert secret.read_bytes() == before
    assert sorted(p.name for p in sibling.iterdir()) == ["secret"]


async def test_a_workspace_file_named_like_lcgs_state_is_not_that_state(engine: Engine) -> None:
    await _populate(engine)
    home = engine.settings.home
    # Beside the WAL directory, the database directory, the embedding cache, the ontology.
    names = ["wal-backup.jsonl", "db-backup.jsonl", "embeddings-backup.jsonl", "ontology.yaml.bak"]
    for name in names:
        done = await dispatch(engine, "knowledge_export_graph", {"path": f"../{name}"})
        assert done["path"] == str(home / name)
        assert (home / name).read_text().startswith('{"kind":"header"')
    with pytest.raises(InvalidRequestError, match="overlaps"):
        await dispatch(engine, "knowledge_export_graph", {"path": "../embeddings/x.jsonl"})


def _sibling_calls(settings: Settings) -> tuple[Path, list[tuple[str, dict[str, object]]]]:
    """A folder beside the workspace sharing its name (`.lcg-evil`) holding a file, and a call
    of every confined method that names something in it."""
    sibling = settings.home.with_name(settings.home.name + "-evil")
    sibling.mkdir()
    (sibling / "secret").write_text("do not touch\n")
    return sibling, [
        ("knowledge_export_graph", {"path": str(sibling / "secret"), "overwrite": True}),
        ("knowledge_import_graph", {"path": str(sibling / "secret")}),
        ("knowledge_dump_wal", {"target_dir": str(sibling / "dump")}),
    ]


def test_over_http_a_sibling_of_the_workspace_is_refused(
    settings: Settings, engine: Engine
) -> None:
    sibling, calls = _sibling_calls(settings)
    with running_http(settings, engine, scopes="read,write,admin") as service:
        for method, params in calls:
            status, _, body = request(service, "POST", f"/api/{method}", params)
            assert status == 400, (method, body)
            error = assert_error_shape(body)
            assert "outside the workspace" in error["message"], method
            assert error["data"] == {"field": CONFINED[method]}
    assert (sibling / "secret").read_text() == "do not touch\n"
    assert sorted(p.name for p in sibling.iterdir()) == ["secret"]


def test_over_the_socket_a_sibling_of_the_workspace_is_refused(settings: Settings) -> None:
    sibling, calls = _sibling_calls(settings)
    with running_server(settings) as (server, path, _):
        wait_settled(server)
        with RpcClient(path) as client:
            for method, params in calls:
                with pytest.raises(RpcError) as info:
                    client.call(method, params)
                assert "outside the workspace" in info.value.message, method
    assert (sibling / "secret").read_text() == "do not touch\n"
    assert sorted(p.name for p in sibling.iterdir()) == ["secret"]
