"""Asking from the shell: `lcg changes`, `lcg timeline`, `lcg search`, `lcg as-of`, `lcg facts`
and `lcg context` print tables that fit an 80-column terminal, `--json` prints the wire result,
errors are the wire method's, and a running service answers in place of the files; one-group
reads take the workspace's only group (or the only group holding the name)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from changelog_support import LEAD_MARIA, LEAD_PRIYA, G, write_changelog
from click.testing import CliRunner
from rpc_support import running_server, wait_settled

from lcg import Engine, Settings, open_engine
from lcg.cli.main import cli
from lcg.errors import InvalidRequestError
from lcg.service.registry import dispatch


def _changelog(settings: Settings, *, also: str | None = None) -> None:
    """The scripted changelog in group `changelog` (and one entity in group `also`)."""
    engine = open_engine(settings)
    try:

        async def call(method: str, params: dict[str, Any]) -> dict[str, Any]:
            return await dispatch(engine, method, params)

        anyio.run(write_changelog, call)
        if also is not None:
            anyio.run(
                dispatch, engine, "knowledge_assert_entity", {"name": "Atlas", "group_id": also}
            )
    finally:
        engine.close()


def _lcg(home: Path, *args: str, code: int = 0) -> str:
    result = CliRunner().invoke(
        cli, ["--home", str(home), *args], env={"COLUMNS": "80"}, catch_exceptions=False
    )
    assert result.exit_code == code, result.output
    return result.stdout


def _fits(text: str) -> list[str]:
    lines = text.splitlines()
    assert lines and all(len(line) <= 80 for line in lines), text
    return lines


def test_changes_and_timeline_print_tables_that_fit_80_columns(settings: Settings) -> None:
    _changelog(settings)
    out = _lcg(settings.home, "changes", "--since", "2025-05-01", "--until", "2025-09-01")
    lines = _fits(out)
    assert lines[0].split() == ["date", "change", "fact"]
    assert any(line.startswith("2025-05-05") and "started" in line for line in lines)
    assert lines[-1].endswith("from 2025-05-01 to 2025-09-01")
    wire = json.loads(
        _lcg(settings.home, "changes", "--since", "2025-05-01", "--until", "2025-09-01", "--json")
    )
    assert lines[-1].startswith(f"{wire['count']} changes")
    out = _lcg(settings.home, "timeline", "Atlas")
    lines = _fits(out)
    assert lines[0] == f"Atlas (group {G})"
    assert lines[1].split()[:4] == ["valid", "from", "until", "status"]
    maria = next(line for line in lines if LEAD_MARIA[:30] in line)
    assert maria.split()[:3] == ["2025-01-06", "2025-04-01", "superseded"]
    priya = next(line for line in lines if LEAD_PRIYA[:30] in line)
    assert priya.split()[:2] == ["2025-04-01", "current"]


def test_the_other_query_commands_answer_as_their_methods(settings: Settings) -> None:
    _changelog(settings)
    home = settings.home
    lines = _fits(_lcg(home, "as-of", "2025-02-15", "leads the Atlas project"))
    assert any(LEAD_MARIA in line for line in lines)
    assert not any(LEAD_PRIYA in line for line in lines)
    wire = json.loads(_lcg(home, "search", "Atlas", "--kind", "entities", "--json"))
    assert "Atlas" in [n["name"] for n in wire["nodes"]]
    _fits(_lcg(home, "search", "Atlas", "--kind", "entities"))
    _fits(_lcg(home, "facts", "--all"))
    current = [f["fact"] for f in json.loads(_lcg(home, "facts", "--json"))["facts"]]
    every = [f["fact"] for f in json.loads(_lcg(home, "facts", "--all", "--json"))["facts"]]
    assert LEAD_PRIYA in current and LEAD_MARIA not in current and LEAD_MARIA in every
    assert "Priya Shah" in _lcg(home, "context", "Who leads Atlas?")
    # The method's own validation error (`lcg.cli.main.main` prints it and exits with its code).
    result = CliRunner().invoke(
        cli, ["--home", str(home), "changes", "--since", "2025-09-01", "--until", "2025-05-01"]
    )
    assert isinstance(result.exception, InvalidRequestError)
    assert result.exception.field == "until"


def test_a_name_in_several_groups_needs_a_group_and_the_error_names_them(
    settings: Settings,
) -> None:
    _changelog(settings, also="notes")
    result = CliRunner().invoke(cli, ["--home", str(settings.home), "timeline", "Atlas"])
    assert isinstance(result.exception, InvalidRequestError)
    assert result.exception.field == "group_id"
    assert "(changelog, notes)" in result.exception.message
    assert "Maria Lopez" in _lcg(settings.home, "timeline", "Maria Lopez")  # only in changelog
    assert "no facts" in _lcg(settings.home, "timeline", "Atlas", "--group", "notes")


def test_the_wire_timeline_takes_the_group_holding_the_name(engine: Engine) -> None:
    async def run() -> None:
        async def call(method: str, params: dict[str, Any]) -> dict[str, Any]:
            return await dispatch(engine, method, params)

        await write_changelog(call)
        timeline = await call("knowledge_get_entity_timeline", {"name": "Atlas"})
        assert timeline["entity"]["group_id"] == G and timeline["count"] > 0

    anyio.run(run)


def test_the_code_reads_take_the_only_group(engine: Engine, tmp_path: Path) -> None:
    pytest.importorskip("tree_sitter_language_pack")
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "tool.py").write_text("def greet(name):\n    return name\n")

    async def run() -> None:
        async def call(method: str, params: dict[str, Any]) -> dict[str, Any]:
            return await dispatch(engine, method, params)

        await call("knowledge_code_ingest", {"path": str(repo), "group_id": "code"})
        where = await call("knowledge_code_where", {"name": "greet"})
        assert [s["name"] for s in where["symbols"]] == ["tool.greet"]
        await call("knowledge_assert_entity", {"name": "Zed", "group_id": "other"})
        with pytest.raises(InvalidRequestError) as caught:
            await call("knowledge_code_where", {"name": "greet"})
        assert caught.value.field == "group_id" and "(code, other)" in caught.value.message

    anyio.run(run)


def test_a_running_service_answers_the_query_commands(settings: Settings) -> None:
    _changelog(settings)
    with running_server(settings) as (server, path, _):
        wait_settled(server)
        out = _lcg(settings.home, "timeline", "Atlas", "--socket", str(path))
        assert LEAD_PRIYA in out


def test_facts_with_the_same_start_read_in_the_same_order_on_every_run(engine: Engine) -> None:
    """Six facts of one episode share their start: the timeline orders them by their text (by
    their random uuids, any order of the 720 could come out)."""
    texts = [f"Atlas uses tool {c}." for c in "FBDACE"]
    anyio.run(
        dispatch,
        engine,
        "knowledge_add_facts",
        {
            "reference_time": "2025-01-01",
            "entities": [{"name": "Atlas"}, *({"name": f"tool {c}"} for c in "FBDACE")],
            "facts": [
                {"source": "Atlas", "target": f"tool {c}", "relation_type": "USES", "fact": t}
                for c, t in zip("FBDACE", texts, strict=True)
            ],
        },
    )
    timeline = anyio.run(dispatch, engine, "knowledge_get_entity_timeline", {"name": "Atlas"})
    assert [f["fact"] for f in timeline["facts"]] == sorted(texts)
