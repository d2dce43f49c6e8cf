"""Code history against git itself: the symbols each commit adds and removes, as the
history ingest reports them and as the graph's as-of reads show them, match what git holds at
each commit (every Python file of the commit's tree read with `git show` and listed with the
standard library's `ast`, independently of tree-sitter); committing many episodes per engine
commit leaves the same graph as one by one; no body line reaches the WAL or the database. On a
real Kuzu database and on a real FalkorDB, and a git repository the test builds."""

from __future__ import annotations

import ast
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("tree_sitter_language_pack")

from code_support import git

from lcg.admin.walmove import export_wal
from lcg.code.history import ingest_history
from lcg.code.queries import symbols_at
from lcg.engine import Engine

pytestmark = pytest.mark.anyio

BOTH_STORAGES = True  # the code graph runs in server mode too


def _wal(engine: Engine) -> bytes:
    """Every WAL line the engine logged, wherever it keeps them (files, or a server's streams)."""
    with tempfile.TemporaryDirectory() as tmp:
        export_wal(engine, Path(tmp) / "wal")
        return b"".join(p.read_bytes() for p in sorted((Path(tmp) / "wal").rglob("*.jsonl")))


T0 = 1_700_000_000


def _function(name: str, args: str, n: int, indent: str = "") -> str:
    body = f"{indent}    body_line_{name}_{n} = {n}\n{indent}    return body_line_{name}_{n}\n"
    return f"{indent}def {name}({args}):\n{body}\n"


def _module(spec: dict[str, Any], n: int) -> str:
    """A module from a spec: {"functions": {name: args}, "classes": {name: [methods]}}."""
    text = '"""A module."""\n\n'
    for name, args in spec.get("functions", {}).items():
        text += _function(name, args, n)
    for cls, methods in spec.get("classes", {}).items():
        text += f"class {cls}:\n"
        for method in methods or ["__init__"]:
            text += _function(method, "self", n, "    ")
    return text


# Each step: the files of the tree after the commit (a spec, or None: deleted), and renames.
STEPS: list[tuple[dict[str, dict[str, Any] | None], list[tuple[str, str]]]] = [
    (
        {
            "alpha.py": {"functions": {"parse": "x", "load": "path"}, "classes": {"Cfg": ["get"]}},
            "beta.py": {"functions": {"run": ""}},
        },
        [],
    ),
    ({"alpha.py": {"functions": {"parse": "x, strict", "load": "path"}, "classes": {}}}, []),
    ({"gamma.py": {"classes": {"Worker": ["start", "stop"], "Pool": ["size"]}}}, []),
    ({"beta.py": None}, []),
    ({}, [("gamma.py", "delta.py")]),
    (
        {
            "delta.py": {"classes": {"Worker": ["start", "pause"], "Pool": ["size"]}},
            "alpha.py": {"functions": {"parse": "x, strict"}, "classes": {"Cfg": ["get", "put"]}},
        },
        [],
    ),
    ({"notes.md": None}, []),  # a commit without source changes
    (
        {
            "beta.py": {"functions": {"run": "", "again": "n"}},
            "epsilon.py": {"functions": {"solo": ""}},
        },
        [],
    ),
    ({"epsilon.py": None, "alpha.py": {"functions": {"parse": "x"}}}, []),
]


def _build(repo: Path) -> list[str]:
    """The repository of STEPS; returns the commit shas, oldest first."""
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    # A user's configuration must not change what the walk reads.
    for key, value in (("log.showRoot", "false"), ("color.ui", "always"), ("diff.renames", "0")):
        git(repo, "config", key, value)
    shas: list[str] = []
    for n, (files, renames) in enumerate(STEPS):
        for old, new in renames:
            git(repo, "mv", old, new)
        for path, spec in files.items():
            target = repo / path
            if path.endswith(".md"):
                target.write_text(f"note {n}\n")
            elif spec is None:
                target.unlink()
            else:
                target.write_text(_module(spec, n))
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", f"step {n}", when=T0 + n * 3600)
        shas.append(git(repo, "rev-parse", "HEAD").strip())
    return shas


def _symbols_ingit(repo: Path, sha: str) -> set[str]:
    """Qualified names of the classes, functions and methods of every Python file of the
    commit's tree, read from git and listed with `ast`."""
    names: set[str] = set()
    for path in git(repo, "ls-tree", "-r", "--name-only", sha).split():
        if not path.endswith(".py"):
            continue
        module = path.removesuffix(".py").replace("/", ".")
        tree = ast.parse(git(repo, "show", f"{sha}:{path}"))
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.ClassDef):
                names.add(f"{module}.{node.name}")
            if isinstance(node, ast.ClassDef):
                names.update(
                    f"{module}.{node.name}.{item.name}"
                    for item in node.body
                    if isinstance(item, ast.FunctionDef)
                )
    return names


async def test_symbols_added_and_removed_per_commit_matchgit(
    engine: Engine, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    shas = _build(repo)
    report = await ingest_history(engine, repo, "many", batch_episodes=4)
    assert report.commits_walked == len(STEPS)
    reported = {c["sha"]: c for c in report.per_commit}
    before: set[str] = set()
    for n, sha in enumerate(shas):
        now = _symbols_ingit(repo, sha)
        added, removed = now - before, before - now
        # A file git renamed renames its symbols (RENAMED_TO), neither removed nor added.
        renamed = {
            (name, new.removesuffix(".py") + name[len(old.removesuffix(".py")) :])
            for old, new in STEPS[n][1]
            for name in removed
            if name.startswith(old.removesuffix(".py") + ".")
        }
        added -= {b for _, b in renamed}
        removed -= {a for a, _ in renamed}
        got = reported.get(sha, {"added": [], "removed": [], "renamed": []})
        assert (sorted(got["added"]), sorted(got["removed"])) == (
            sorted(added),
            sorted(removed),
        ), f"commit {n}"
        assert {tuple(pair) for pair in got["renamed"]} == renamed, f"commit {n}"
        when = datetime.fromtimestamp(T0 + n * 3600, UTC)
        assert set(await symbols_at(engine, "many", when)) == now, f"as of commit {n}"
        before = now
    assert sum(len(c["added"]) for c in report.per_commit) >= 15
    assert sum(len(c["removed"]) + len(c["renamed"]) for c in report.per_commit) >= 8
    assert sum(len(c["renamed"]) for c in report.per_commit) == 5
    assert await symbols_at(engine, "many", datetime.fromtimestamp(T0, UTC) - timedelta(1)) == {}

    # No line of any function body, at any commit, reached the WAL or the database.
    wal = _wal(engine)
    assert b"def parse(x, strict)" in wal
    assert b"body_line_" not in wal
    rows = await engine.read(
        lambda conn: (
            conn.rows("MATCH (e:Entity) RETURN e.name + e.summary + e.attributes", {})
            + conn.rows("MATCH (f:Fact) RETURN f.fact + f.attributes", {})
            + conn.rows("MATCH (ep:Episode) RETURN ep.content", {})
        )
    )
    assert rows and not any("body_line_" in str(r[0]) for r in rows)


def _graph(conn: Any, group: str) -> dict[str, Any]:
    """A group's code graph by names and times (uuids are derived from the group)."""
    facts = conn.rows(
        "MATCH (f:Fact), (s:Entity {uuid: f.source_uuid}), (t:Entity {uuid: f.target_uuid}) "
        "WHERE f.group_id = $g RETURN f.name, s.name, t.name, f.fact, f.valid_at, f.invalid_at, "
        "f.expired_at IS NULL, f.relation_type",
        {"g": group},
    )
    entities = conn.rows(
        "MATCH (e:Entity) WHERE e.group_id = $g RETURN e.name, e.labels, e.summary",
        {"g": group},
    )
    episodes = conn.rows(
        "MATCH (ep:Episode) WHERE ep.group_id = $g RETURN ep.name, ep.valid_at, ep.content, "
        "ep.source_description",
        {"g": group},
    )
    mentions = conn.rows(
        "MATCH (ep:Episode)-[:MENTIONS]->(e:Entity) WHERE ep.group_id = $g RETURN ep.name, e.name",
        {"g": group},
    )
    return {
        "facts": sorted(map(str, facts)),
        "entities": sorted(map(str, entities)),
        "episodes": sorted(map(str, episodes)),
        "mentions": sorted(map(str, mentions)),
    }


async def test_batched_history_leaves_the_graph_one_by_one_leaves(
    engine: Engine, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    _build(repo)
    one = await ingest_history(engine, repo, "one", batch_episodes=1)
    many = await ingest_history(engine, repo, "many", batch_episodes=64)
    assert one.per_commit == many.per_commit and one.episodes == many.episodes == 8
    graphs = await engine.read(lambda conn: (_graph(conn, "one"), _graph(conn, "many")))
    assert graphs[0]["facts"] and graphs[0]["episodes"]
    assert graphs[0] == graphs[1]
    # Facts started and ended inside one batch were stored ended (no supersession op for them).
    ended = await engine.read(
        lambda conn: conn.rows(
            "MATCH (f:Fact) WHERE f.group_id = 'many' AND f.invalid_at IS NOT NULL RETURN count(f)",
            {},
        )
    )
    assert sum(row[0] for row in ended) >= 8  # FalkorDB: one count per group's graph
