"""Server mode: the passes that make several commits — the code graph's sync and
history, corrections, graph import — when one of their commits loses the race to another
process (`GroupMovedError`: another engine on the same FalkorDB committed to the group between
the pass's plan and its commit). A sync, a correction and an import page are planned again
against the caught-up graph and committed; a history batch is refused with `ConflictError`
(nothing of it applied) and a re-run resumes.

Two engines on one server stand for two processes. Engine A's follower thread is stopped so
that it cannot catch up between B's commit and A's (as when B commits within A's follower
round): A's commit then lands behind the group's stream and loses."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio.from_thread
import pytest
from code_support import git

from lcg import Engine, Settings, open_engine
from lcg.errors import ConflictError
from lcg.service.registry import dispatch
from lcg.storage.backend import GraphReader

pytestmark = pytest.mark.anyio

GROUP = "g"


@pytest.fixture
def engines(tmp_path: Path, falkordb_url: str) -> Iterator[tuple[Engine, Engine]]:
    """Engines A and B on one emptied FalkorDB; A's follower thread stopped."""
    from lcg.storage.falkordb.backend import FalkorBackend

    server = FalkorBackend(falkordb_url)
    try:
        server.client.flushall()
    finally:
        server.close()

    def settings(name: str) -> Settings:
        return Settings.for_home(
            tmp_path / name,
            embedder="hash",
            extractor="heuristic",
            storage="falkordb",
            falkordb_url=falkordb_url,
            workspace_root=str(tmp_path / "ws"),
        )

    a = open_engine(settings("a"))
    try:
        b = open_engine(settings("b"))
    except BaseException:
        a.close()
        raise
    a._follow.stop()  # A learns of B's commits only when its own commit loses the race
    try:
        yield a, b
    finally:
        a.close()
        b.close()


async def _assert(engine: Engine, name: str, group: str = GROUP) -> dict[str, Any]:
    return await dispatch(engine, "knowledge_assert_entity", {"name": name, "group_id": group})


def _stream_seqs(engine: Engine, group: str = GROUP) -> list[int]:
    return [r.seq for r in engine._db.stream_records(group, 0)]


async def _names(engine: Engine, group: str = GROUP) -> list[str]:
    nodes = await dispatch(engine, "knowledge_get_nodes_by_group", {"group_ids": [group]})
    return sorted(n["name"] for n in nodes["nodes"])


def _once(action: Callable[[], None]) -> Callable[[], None]:
    """`action` the first time it is called, nothing after."""
    done: list[bool] = []

    def run() -> None:
        if not done:
            done.append(True)
            action()

    return run


async def test_a_code_sync_that_lost_the_race_is_planned_again(
    engines: tuple[Engine, Engine], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("tree_sitter_language_pack")
    import lcg.code.sync as sync
    from lcg.code.ingest import ingest_tree
    from lcg.code.queries import where_defined

    a, b = engines
    root = tmp_path / "src"
    root.mkdir()
    (root / "m.py").write_text("def foo(x):\n    return x\n")
    read_state = sync.load_state
    reads: list[int] = []

    async def load_state_then_b_commits(*args: Any, **kwargs: Any) -> Any:
        state = await read_state(*args, **kwargs)
        reads.append(1)
        if len(reads) == 1:  # between A's read (its plan) and its commit, B commits
            await _assert(b, "Ana")
        return state

    monkeypatch.setattr(sync, "load_state", load_state_then_b_commits)
    report = await ingest_tree(a, root, GROUP)
    assert len(reads) == 2  # the lost race read the state again and planned again
    assert report.batch is not None and report.batch.episode_uuid is not None
    assert [s["name"] for s in (await where_defined(a, GROUP, "m.foo"))["symbols"]] == ["m.foo"]
    assert "Ana" in await _names(a)
    assert a._follow.status()["lost_races"] == 1
    seqs = _stream_seqs(a)
    assert seqs == list(range(len(seqs)))  # every line once, no gap
    again = await ingest_tree(a, root, GROUP)  # the graph holds the file: nothing to write
    assert again.files_unchanged == 1 and again.batch is None


async def test_a_code_history_batch_that_lost_the_race_is_refused_and_a_rerun_resumes(
    engines: tuple[Engine, Engine], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("tree_sitter_language_pack")
    import lcg.code.history as history
    from lcg.code.queries import symbols_at

    a, b = engines
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    for n, body in enumerate(("def one():\n    pass\n", "def two():\n    pass\n")):
        (repo / f"f{n}.py").write_text(body)
        git(repo, "add", ".", when=1_700_000_000 + n * 3600)
        git(repo, "commit", "-q", "-m", f"c{n}", when=1_700_000_000 + n * 3600)
    commit = a.commit_episode
    calls: list[int] = []

    async def b_commits_first(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 2:  # the second batch: B commits between its plan and its commit
            await _assert(b, "Ana")
        return await commit(*args, **kwargs)

    monkeypatch.setattr(a, "commit_episode", b_commits_first)
    with pytest.raises(ConflictError, match=r"nothing of the batch .* was applied"):
        await history.ingest_history(a, repo, GROUP, batch_episodes=1)
    monkeypatch.undo()

    def episodes(conn: GraphReader) -> list[str]:
        return sorted(
            str(r[0])
            for r in conn.rows(
                "MATCH (e:Episode) WHERE e.group_id = $g RETURN e.name", {"g": GROUP}
            )
        )

    assert len(await a.read(episodes)) == 1  # the first batch; nothing of the second
    report = await history.ingest_history(a, repo, GROUP, batch_episodes=1)
    assert report.commits_walked == 1  # resumed after the last commit stored
    assert len(await a.read(episodes)) == 2
    assert set(await symbols_at(a, GROUP, datetime.now(UTC))) == {"f0.one", "f1.two"}


async def test_a_correction_that_lost_the_race_is_planned_again(
    engines: tuple[Engine, Engine], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import lcg.curation.corrections as corrections

    a, b = engines
    added = await dispatch(
        a,
        "knowledge_add_facts",
        {
            "group_id": GROUP,
            "reference_time": "2025-01-01",
            "entities": [{"name": "Ana"}, {"name": "Atlas"}],
            "facts": [
                {"source": "Ana", "target": "Atlas", "relation_type": "LEADS", "fact": "Ana leads"}
            ],
        },
    )
    edge = added["fact_uuids"][0]
    await _assert(a, "Ana Quill")
    root = tmp_path / "ws"
    (root / ".liminis").mkdir(parents=True)
    (root / ".liminis" / "knowledge-corrections.yaml").write_text(
        "corrections:\n"
        f"  - {{id: r1, type: retract, edge_uuid: {edge}}}\n"
        "  - {id: s1, type: same_as, canonical: Ana, aliases: [Ana Quill]}\n"
    )
    real_now = corrections.now
    b_commits = _once(lambda: anyio.from_thread.run(_assert, b, "Bo"))

    def now_then_b_commits() -> Any:
        b_commits()  # the retract's plan is made; B commits before A's commit
        return real_now()

    monkeypatch.setattr(corrections, "now", now_then_b_commits)
    result = await dispatch(a, "knowledge_apply_corrections", {"dry_run": False})
    assert result["success"] is True, result
    assert result["applied"] == 2
    facts = await dispatch(a, "knowledge_get_edges_by_uuids", {"uuids": [edge]})
    assert facts["edges"][0]["invalid_at"] is not None
    assert "Bo" in await _names(a)
    text = (root / ".liminis" / "knowledge-corrections.yaml").read_text()
    assert text.count("applied_at") == 2
    assert a._follow.status()["lost_races"] == 1
    seqs = _stream_seqs(a)
    assert seqs == list(range(len(seqs)))


async def test_an_import_page_that_lost_the_race_is_compared_again(
    engines: tuple[Engine, Engine], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import lcg.curation.portable as portable

    a, b = engines
    for name in ("Ana", "Bo"):
        await _assert(b, name, "src")
    out = tmp_path / "graph.jsonl"
    await portable.export_graph(b, str(out), ["src"])
    text = out.read_text().replace('"src"', f'"{GROUP}"')
    out.write_text(text)
    await _assert(a, "Cy")
    changed = portable._changed
    b_commits = _once(lambda: anyio.from_thread.run(_assert, b, "Di"))

    def changed_then_b_commits(*args: Any) -> Any:
        fresh = changed(*args)
        b_commits()  # A compared the page with the graph; B commits before A's commit
        return fresh

    monkeypatch.setattr(portable, "_changed", changed_then_b_commits)
    result = await portable.import_graph(a, str(out))
    assert result["written"]["entities"] == 2
    assert await _names(a) == ["Ana", "Bo", "Cy", "Di"]
    assert a._follow.status()["lost_races"] == 1
    seqs = _stream_seqs(a)
    assert seqs == list(range(len(seqs)))


async def test_an_ontology_batch_that_lost_the_race_is_derived_again(
    engines: tuple[Engine, Engine], monkeypatch: pytest.MonkeyPatch
) -> None:
    import lcg.curation.retyping as retyping

    a, b = engines
    await dispatch(
        a,
        "knowledge_add_facts",
        {
            "group_id": GROUP,
            "reference_time": "2025-01-01",
            "entities": [{"name": "Neil"}, {"name": "Memo"}],
            "facts": [
                {"source": "Neil", "target": "Memo", "relation_type": "WROTE", "fact": "Neil wrote"}
            ],
        },
    )
    # The ontology arrives after the fact: its WROTE is then an alias to map.
    ontology = Path(str(a.settings.workspace_root)) / ".lcg" / "ontology.yaml"
    ontology.parent.mkdir(parents=True)
    ontology.write_text(
        "relation_types:\n  - name: AUTHORED\n    aliases: [WROTE]\n", encoding="utf-8"
    )
    real_fact_op = retyping.fact_op
    b_commits = _once(lambda: anyio.from_thread.run(_assert, b, "Bo"))

    def fact_op_then_b_commits(fact: Any) -> Any:
        b_commits()  # A derived the batch's rows under its lock; B commits before A's commit
        return real_fact_op(fact)

    monkeypatch.setattr(retyping, "fact_op", fact_op_then_b_commits)
    done = await dispatch(a, "knowledge_canonicalize_relations", {"group_id": GROUP})
    assert done["mapped_count"] == 1
    edges = await dispatch(a, "knowledge_get_edges_by_group", {"group_ids": [GROUP]})
    assert [e.get("relation_type") for e in edges["edges"]] == ["AUTHORED"]
    assert "Bo" in await _names(a)
    assert a._follow.status()["lost_races"] == 1
    seqs = _stream_seqs(a)
    assert seqs == list(range(len(seqs)))
