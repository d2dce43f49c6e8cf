"""`lcg status` / `lcg cypher` go through a running service's socket (Kuzu allows one process
per database), and open the database themselves when no service answers."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
from click.testing import CliRunner
from rpc_support import running_server, short_socket_dir, wait_settled

from lcg.cli.main import cli
from lcg.config import Settings
from lcg.engine import open_engine
from lcg.graph import writes


def test_status_and_cypher_use_the_running_service(settings: Settings) -> None:
    with running_server(settings) as (server, path, _):
        wait_settled(server)
        engine = server.engine
        assert engine is not None
        anyio.run(writes.assert_entity, engine, "Margaret", "liminis")
        runner = CliRunner()
        home = str(settings.home)
        status = runner.invoke(cli, ["--home", home, "status", "--socket", str(path)])
        assert status.exit_code == 0, status.output
        assert json.loads(status.output)["entity_count"] == 1
        rows = runner.invoke(
            cli, ["--home", home, "cypher", "MATCH (e:Entity) RETURN e.name", "--socket", str(path)]
        )
        assert rows.exit_code == 0, rows.output
        assert json.loads(rows.output) == {"rows": [["Margaret"]]}


def test_status_opens_the_database_when_no_service_answers(settings: Settings) -> None:
    engine = open_engine(settings)
    anyio.run(writes.assert_entity, engine, "Barbara", "liminis")
    engine.close()
    with short_socket_dir() as directory:
        stale = directory / "gone.sock"
        stale.write_bytes(b"")  # a leftover path that nothing listens on
        result = CliRunner().invoke(
            cli, ["--home", str(settings.home), "status", "--socket", str(stale)]
        )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["entity_count"] == 1


def test_serve_refuses_a_socket_another_service_answers_on(
    settings: Settings, tmp_path: Path
) -> None:
    with running_server(settings) as (server, path, _):
        wait_settled(server)
        other = Settings.for_home(tmp_path / "other" / ".lcg")
        result = CliRunner().invoke(
            cli, ["--home", str(other.home), "serve", "--socket", str(path)]
        )
        assert result.exit_code != 0
        assert "already listening" in str(result.exception)
        assert path.exists()  # the live service's socket was not stolen
