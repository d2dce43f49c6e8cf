"""The same fact told again by a new episode is a mention of the stored fact, not a copy: same
source, target, relation type, sentence and `valid_at`, whether the stored fact is current,
superseded or was stored already ended (docs/facts.md). Episode ingest and knowledge_add_facts
both go through the ingest layer's fact planning; each runs on Kuzu and on FalkorDB."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from changelog_support import fact
from click.testing import CliRunner  # noqa: TID251  a folder ingest drives click's own runner

from lcg import Engine, Settings, open_engine
from lcg.cli.main import cli
from lcg.service.registry import dispatch

BOTH_STORAGES = True
SETTINGS_OVERRIDES = {"extractor": "heuristic"}  # episode ingest with no model

pytestmark = pytest.mark.anyio

ANA = "Ana leads Atlas."
BO = "Bo leads Atlas."


async def _leads(engine: Engine) -> None:
    """The README's two calls: Ana leads Atlas from January, Bo from March (retiring Ana)."""
    await dispatch(
        engine,
        "knowledge_add_facts",
        {
            "reference_time": "2025-01-01",
            "entities": [{"name": "Ana"}, {"name": "Atlas"}],
            "facts": [fact("Ana", "LEADS", "Atlas", ANA)],
        },
    )
    await dispatch(
        engine,
        "knowledge_add_facts",
        {
            "reference_time": "2025-03-01",
            "entities": [{"name": "Bo"}],
            "facts": [fact("Bo", "LEADS", "Atlas", BO)],
        },
    )


async def _every_fact(engine: Engine) -> list[dict[str, Any]]:
    out = await dispatch(
        engine, "knowledge_list_relationships", {"include_invalidated": True, "limit": 100}
    )
    facts: list[dict[str, Any]] = out["facts"]
    return facts


async def test_a_superseded_fact_told_again_gains_a_mention(engine: Engine) -> None:
    await _leads(engine)
    await _leads(engine)
    then = await dispatch(
        engine, "knowledge_find_relationships", {"query": "leads Atlas", "as_of": "2025-02-01"}
    )
    assert [f["fact"] for f in then["facts"]] == [ANA]
    facts = await _every_fact(engine)
    assert sorted(f["fact"] for f in facts) == [ANA, BO]
    episodes = (await dispatch(engine, "knowledge_get_episodes", {"last_n": 10}))["episodes"]
    assert len(episodes) == 4
    timeline = await dispatch(engine, "knowledge_get_entity_timeline", {"name": "Atlas"})
    assert [(f["fact"], f["status"]) for f in timeline["facts"]] == [
        (ANA, "superseded"),
        (BO, "current"),
    ]
    # Another start is another fact.
    await dispatch(
        engine,
        "knowledge_add_facts",
        {
            "reference_time": "2025-01-15",
            "entities": [{"name": "Ana"}, {"name": "Atlas"}],
            "facts": [fact("Ana", "LEADS", "Atlas", ANA)],
        },
    )
    assert len(await _every_fact(engine)) == 3


async def test_the_fact_told_again_after_a_restart_merges_too(settings: Settings) -> None:
    """The superseded fact is found from what the group's index loads from the store after a
    restart, not only from what this process committed."""
    for _ in range(2):
        engine = open_engine(settings)
        try:
            await _leads(engine)
            facts = await _every_fact(engine)
        finally:
            engine.close()
    assert sorted(f["fact"] for f in facts) == [ANA, BO]


async def test_a_fact_stored_already_ended_told_again_gains_a_mention(engine: Engine) -> None:
    """Bo's fact first, then Ana's older one (stored already ended where Bo's begins), twice."""
    await _leads(engine)
    facts = await _every_fact(engine)
    await dispatch(
        engine,
        "knowledge_add_facts",
        {
            "reference_time": "2025-01-01",
            "entities": [{"name": "Ana"}, {"name": "Atlas"}],
            "facts": [fact("Ana", "LEADS", "Atlas", ANA)],
        },
    )
    assert len(await _every_fact(engine)) == len(facts)


async def test_an_episode_ingested_twice_adds_no_copy(engine: Engine) -> None:
    for _ in range(2):
        for day, text in (
            ("2025-01-01", "Maria Lopez leads the Atlas project."),
            ("2025-03-01", "Priya Shah now leads the Atlas project."),
        ):
            await dispatch(
                engine,
                "knowledge_add_episode",
                {"name": f"note {day}", "episode_body": text, "reference_time": day},
            )
    assert sorted(f["fact"] for f in await _every_fact(engine)) == [
        "Maria Lopez leads the Atlas project.",
        "Priya Shah now leads the Atlas project.",
    ]


def test_a_folder_ingested_again_with_a_copy_adds_no_copy(tmp_path: Path) -> None:
    """`lcg ingest` of a history, then again with a copy of its first entry (the same date)."""
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "2025-01-01-lead.md").write_text("Maria Lopez leads the Atlas project.\n")
    (notes / "2025-03-01-lead.md").write_text("Priya Shah now leads the Atlas project.\n")
    home = tmp_path / ".lcg"
    env = {"LCG_EXTRACTOR": "heuristic", "LCG_EMBEDDER": "hash"}
    for _ in range(2):
        result = CliRunner().invoke(cli, ["--home", str(home), "ingest", str(notes)], env=env)
        assert result.exit_code == 0, result.output
        (notes / "2025-01-01-copy.md").write_text("Maria Lopez leads the Atlas project.\n")
    engine = open_engine(Settings.for_home(home, embedder="hash"))
    try:
        facts = anyio.run(_every_fact, engine)
    finally:
        engine.close()
    assert sorted(f["fact"] for f in facts) == [
        "Maria Lopez leads the Atlas project.",
        "Priya Shah now leads the Atlas project.",
    ]
