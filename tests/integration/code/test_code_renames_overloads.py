"""The code graph a user can trust (docs/code-graph.md): an overloaded name is one symbol with one
current signature fact, and a symbol git renamed, or moved with an unchanged body, is superseded
by a `RENAMED_TO` fact rather than removed and added again. On a real Kuzu database and git
repositories the tests build."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("tree_sitter_language_pack")

from code_support import git

from lcg.admin.rebuild import rebuild_from_wal
from lcg.code.history import ingest_history
from lcg.code.ingest import ingest_tree
from lcg.code.queries import code_changes, where_defined
from lcg.engine import Engine

pytestmark = pytest.mark.anyio

BOTH_STORAGES = True  # the code graph runs in server mode too

T0 = 1_700_000_000
HELPER = '''def helper(rows, key):
    """Index rows by key."""
    out = {}
    for row in rows:
        out[row[key]] = row
    return out
'''


def _current(engine: Engine, predicate: str) -> Any:
    return engine.read(
        lambda conn: conn.rows(
            "MATCH (s:Entity)-[:RELATES_TO]->(f:Fact)-[:RELATES_TO]->(t:Entity) "
            "WHERE f.name = $p AND f.invalid_at IS NULL AND f.expired_at IS NULL "
            "RETURN s.name, t.name, f.fact, f.attributes ORDER BY t.name",
            {"p": predicate},
        )
    )


async def test_an_overloaded_function_has_one_current_signature(
    engine: Engine, tmp_path: Path
) -> None:
    root = tmp_path / "tree"
    root.mkdir()
    overloads = (
        "from typing import overload\n\n@overload\ndef get(key: int) -> int: ...\n"
        "@overload\ndef get(key: str) -> str: ...\ndef get(key):\n    return key\n"
    )
    (root / "m.py").write_text(overloads)
    await ingest_tree(engine, root, "g")
    defines = [r for r in await _current(engine, "DEFINES") if r[1] == "m.get"]
    assert len(defines) == 1
    assert json.loads(defines[0][3])["detail"].splitlines() == [
        "def get(key: int) -> int",
        "def get(key: str) -> str",
        "def get(key)",
    ]
    found = (await where_defined(engine, "g", "m.get"))["symbols"]
    assert [s["signature"] for s in found] == ["def get(key)"]
    assert json.loads(found[0]["variants"]) == [
        "def get(key: int) -> int",
        "def get(key: str) -> str",
        "def get(key)",
    ]

    # One more variant: the fact is re-signed (one ends, one starts), still one current.
    (root / "m.py").write_text(
        overloads.replace(
            "def get(key):", "@overload\ndef get(key: bytes) -> bytes: ...\ndef get(key):"
        )
    )
    again = await ingest_tree(engine, root, "g")
    assert again.batch is not None and again.batch.signatures_changed == ["m.get"]
    defines = [r for r in await _current(engine, "DEFINES") if r[1] == "m.get"]
    assert len(defines) == 1
    assert "def get(key: bytes) -> bytes" in json.loads(defines[0][3])["detail"].splitlines()


async def test_a_move_with_an_unchanged_body_renames_the_symbol(
    engine: Engine, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "a.py").write_text(HELPER + "\n\ndef stays():\n    return helper([], 'id')\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "add helper", when=T0)
    # helper moves to b.py (a.py still exists), and its body is unchanged.
    (repo / "a.py").write_text(
        "from b import helper\n\n\ndef stays():\n    return helper([], 'id')\n"
    )
    (repo / "b.py").write_text(HELPER)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "move helper", when=T0 + 3600)
    # a trivial body moved is too common to tell apart: removed and added.
    (repo / "b.py").write_text(HELPER + "\n\ndef tiny():\n    pass\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "tiny", when=T0 + 7200)
    (repo / "b.py").write_text(HELPER + "\n\ndef small():\n    pass\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "tiny renamed", when=T0 + 10800)

    report = await ingest_history(engine, repo, "g")
    per = report.per_commit
    assert per[1]["renamed"] == [["a.helper", "b.helper"]]
    assert per[1]["added"] == [] and per[1]["removed"] == []
    assert per[3]["renamed"] == [] and per[3]["added"] == ["b.small"]
    assert per[3]["removed"] == ["b.tiny"]

    renamed = await _current(engine, "RENAMED_TO")
    assert [(r[0], r[1], r[2]) for r in renamed] == [
        ("a.helper", "b.helper", "a.helper renamed to b.helper")
    ]
    old = (await where_defined(engine, "g", "a.helper"))["symbols"][0]
    assert old["present"] is False and old["renamed_to"] == "b.helper"
    changes = await code_changes(
        engine,
        "g",
        datetime.fromtimestamp(T0, UTC),
        datetime.fromtimestamp(T0 + 3600, UTC),
    )
    assert changes["renamed"] == [{"from": "a.helper", "to": "b.helper"}]
    assert changes["added"] == [] and changes["removed"] == []

    # Later changes of b.py keep the rename: no file owns it, so no sync ends it.
    (repo / "b.py").write_text(HELPER.replace("out = {}", "out: dict = {}"))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "edit helper", when=T0 + 14400)
    await ingest_history(engine, repo, "g")
    assert len(await _current(engine, "RENAMED_TO")) == 1

    # The WAL is the source of truth: a rebuild from it keeps the rename.
    before = await _current(engine, "RENAMED_TO")
    done = await rebuild_from_wal(engine, "g", force_clear=True)
    assert done.get("dry_run") is not True
    assert await _current(engine, "RENAMED_TO") == before
    old = (await where_defined(engine, "g", "a.helper"))["symbols"][0]
    assert old["renamed_to"] == "b.helper"
