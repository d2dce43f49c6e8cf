"""The code graph (lcg.code): structure ingest of a working tree, history from git,
and the questions asked of it — on a real Kuzu database and a real git repository the test
builds. No source body is ever stored."""

from __future__ import annotations

import json
import tempfile
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

pytest.importorskip("tree_sitter_language_pack")

from code_support import git

from lcg.admin.walmove import export_wal
from lcg.code.history import ingest_history
from lcg.code.ingest import ingest_tree
from lcg.code.queries import callers_and_callees, code_changes, symbols_at, where_defined
from lcg.engine import Engine, EpisodeCommit
from lcg.errors import InvalidRequestError
from lcg.models import Episode
from lcg.service.registry import dispatch

BOTH_STORAGES = True  # the code graph runs in server mode too


def _wal(engine: Engine) -> bytes:
    """Every WAL line the engine logged, wherever it keeps them (files, or a server's streams)."""
    with tempfile.TemporaryDirectory() as tmp:
        export_wal(engine, Path(tmp) / "wal")
        return b"".join(p.read_bytes() for p in sorted((Path(tmp) / "wal").rglob("*.jsonl")))


pytestmark = pytest.mark.anyio

GROUP = "code"

A_V1 = '''"""Module a."""


def foo(x):
    """Return x doubled."""
    secret_body_line = x * 2
    return secret_body_line


class Bar:
    def m(self):
        return foo(1)
'''

A_V2 = A_V1.replace("def foo(x):", "def foo(x, y):").replace("x * 2", "x * y")

B_V1 = """from a import foo


def use():
    return foo(3, 4)
"""


T0 = 1_700_000_000


def _db(when: datetime) -> str:
    return when.strftime("%Y-%m-%d %H:%M:%S")


def _commit(repo: Path, message: str, n: int) -> datetime:
    when = T0 + n * 3600
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message, when=when)
    return datetime.fromtimestamp(when, UTC)


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, list[datetime]]:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    times = []
    (repo / "a.py").write_text(A_V1)
    (repo / "b.py").write_text(B_V1)
    (repo / "README.md").write_text("not code\n")
    times.append(_commit(repo, "add a and b", 1))
    (repo / "a.py").write_text(A_V2)
    times.append(_commit(repo, "foo takes y", 2))
    git(repo, "mv", "a.py", "c.py")
    (repo / "b.py").write_text(B_V1.replace("from a import", "from c import"))
    times.append(_commit(repo, "rename a to c", 3))
    (repo / "c.py").write_text(
        A_V2.split("class Bar")[0].replace("def foo(x, y):", "def gone():")
        + "class Bar:\n    def m(self):\n        return 1\n"
    )
    times.append(_commit(repo, "drop foo", 4))
    return repo, times


async def test_history_follows_git_commit_by_commit(
    engine: Engine, repo: tuple[Path, list[datetime]]
) -> None:
    path, times = repo
    report = await ingest_history(engine, path, GROUP)
    assert report.commits_walked == 4 and report.episodes == 4
    per = report.per_commit
    assert sorted(per[0]["added"]) == ["a.Bar", "a.Bar.m", "a.foo", "b.use"]
    assert per[0]["removed"] == []
    assert per[1]["added"] == [] and per[1]["removed"] == []
    assert per[1]["signature_changed"] == ["a.foo"]
    # git renamed a.py to c.py: its symbols are renamed (RENAMED_TO), not removed and added.
    assert per[2]["added"] == [] and per[2]["removed"] == []
    assert sorted(per[2]["renamed"]) == [
        ["a.Bar", "c.Bar"],
        ["a.Bar.m", "c.Bar.m"],
        ["a.foo", "c.foo"],
    ]
    # foo became gone() with the same body: a rename in place.
    assert per[3]["added"] == [] and per[3]["removed"] == []
    assert per[3]["renamed"] == [["c.foo", "c.gone"]]

    # As-of reads at each commit time show the symbols of that commit.
    expected = [
        {"a.foo", "a.Bar", "a.Bar.m", "b.use"},
        {"a.foo", "a.Bar", "a.Bar.m", "b.use"},
        {"c.foo", "c.Bar", "c.Bar.m", "b.use"},
        {"c.gone", "c.Bar", "c.Bar.m", "b.use"},
    ]
    for when, names in zip(times, expected, strict=True):
        assert set(await symbols_at(engine, GROUP, when)) == names
    before = await symbols_at(engine, GROUP, times[0] - timedelta(seconds=1))
    assert before == {}
    at1 = await symbols_at(engine, GROUP, times[0])
    at2 = await symbols_at(engine, GROUP, times[1])
    assert at1["a.foo"]["signature"] == "def foo(x)"
    assert at2["a.foo"]["signature"] == "def foo(x, y)"

    # What changed between two dates.
    changes = await code_changes(engine, GROUP, times[0], times[1])
    assert changes["signature_changed"] == [
        {"name": "a.foo", "before": "def foo(x)", "after": "def foo(x, y)"}
    ]
    changes = await code_changes(engine, GROUP, times[1], times[3], "c.py")
    assert changes["added"] == [] and changes["removed"] == []
    assert changes["renamed"] == [
        {"from": "a.Bar", "to": "c.Bar"},
        {"from": "a.Bar.m", "to": "c.Bar.m"},
        {"from": "a.foo", "to": "c.gone"},
    ]

    # The rename kept the File entity; where-is and callers answer with locations.
    found = await where_defined(engine, GROUP, "c.py")
    assert [s["name"] for s in found["symbols"]] == ["c.py"]
    attrs = await engine.read(
        lambda conn: conn.rows("MATCH (e:Entity) WHERE e.name = 'c.py' RETURN e.attributes", {})
    )
    assert json.loads(json.loads(attrs[0][0])["renamed_from"]) == ["a.py"]
    bar_m = (await where_defined(engine, GROUP, "c.Bar.m"))["symbols"][0]
    assert bar_m["location"] == "c.py:4-6" or bar_m["location"].startswith("c.py:")
    calls = await callers_and_callees(engine, GROUP, "b.use", as_of=times[2])
    assert [c["name"] for c in calls["callees"]] == ["c.foo"]
    calls = await callers_and_callees(engine, GROUP, "b.use")
    assert calls["callees"] == []  # c.foo is gone; the call is not resolved, not guessed

    # Incremental: nothing new, nothing walked.
    again = await ingest_history(engine, path, GROUP)
    assert again.commits_walked == 0
    (path / "d.py").write_text("def d():\n    return 1\n")
    _commit(path, "add d", 5)
    again = await ingest_history(engine, path, GROUP)
    assert again.commits_walked == 1 and again.per_commit[0]["added"] == ["d.d"]

    # No body line anywhere: not in the WAL, not in the database.
    wal = _wal(engine)
    assert b"secret_body_line" not in wal and b"foo(x)" in wal
    rows = await engine.read(
        lambda conn: (
            conn.rows("MATCH (e:Entity) RETURN e.name + e.summary + e.attributes", {})
            + conn.rows("MATCH (f:Fact) RETURN f.fact + f.attributes", {})
            + conn.rows("MATCH (ep:Episode) RETURN ep.content", {})
        )
    )
    assert rows and not any("secret_body_line" in str(r[0]) for r in rows)


async def test_tree_ingest_is_idempotent_and_incremental(engine: Engine, tmp_path: Path) -> None:
    root = tmp_path / "tree"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "core.py").write_text(A_V1)
    (root / "pkg" / "use.py").write_text(
        "from pkg.core import foo\n\ndef run():\n    return foo(1)\n"
    )
    (root / "web.ts").write_text(
        "import {helper} from './util';\n/** Greets. */\nexport class Greeter extends Base {\n"
        "  greet(name: string): string { return helper(name); }\n}\nclass Base {}\n"
    )
    (root / "util.ts").write_text("export function helper(x: string): string { return x; }\n")
    (root / "main.go").write_text(
        "package main\n\n// Run runs.\nfunc Run(a int) int { return Twice(a) }\n\n"
        "func Twice(a int) int { return a * 2 }\n\ntype T struct{}\n\nfunc (t *T) M() { t.N() }\n\nfunc (t *T) N() {}\n"
    )
    (root / "lib.rs").write_text(
        "/// Adds.\npub fn add(a: i32) -> i32 { helper(a) }\nfn helper(a: i32) -> i32 { a }\n"
        "struct S;\ntrait Tr { fn m(&self); }\nimpl Tr for S { fn m(&self) { self.n(); } }\n"
        "impl S { fn n(&self) {} }\n"
    )
    (root / "broken.py").write_text("def broken(:\n    pass\n")
    (root / "blob.py").write_bytes(b"\x00\x01binary")
    (root / "gen.go").write_text("// Code generated by x. DO NOT EDIT.\npackage main\n")
    outside = tmp_path / "outside.py"
    outside.write_text("def secret():\n    pass\n")
    (root / "link.py").symlink_to(outside)

    first = await ingest_tree(engine, root, GROUP)
    skipped = {s["path"]: s["reason"] for s in first.skipped}
    assert set(skipped) == {"broken.py", "blob.py", "gen.go", "link.py"}
    assert "syntax error" in skipped["broken.py"] and "binary" in skipped["blob.py"]
    assert "generated" in skipped["gen.go"] and "outside" in skipped["link.py"]
    assert first.files_parsed == 7 and first.batch is not None

    names = set(await symbols_at(engine, GROUP, datetime.now(UTC)))
    assert {"pkg.core.foo", "pkg.core.Bar.m", "pkg.use.run"} <= names
    assert {"web.Greeter", "web.Greeter.greet", "util.helper"} <= names
    assert {"main.Run", "main.Twice", "main.T", "main.T.M", "main.T.N"} <= names
    assert {"crate.add", "crate.helper", "crate.S", "crate.Tr.m", "crate.S.m"} <= names
    go = await callers_and_callees(engine, GROUP, "main.Run")
    assert [c["name"] for c in go["callees"]] == ["main.Twice"]
    method = await callers_and_callees(engine, GROUP, "main.T.M")
    assert [c["name"] for c in method["callees"]] == ["main.T.N"]
    rust = await callers_and_callees(engine, GROUP, "crate.add")
    assert [c["name"] for c in rust["callees"]] == ["crate.helper"]
    assert (await where_defined(engine, GROUP, "crate.add"))["symbols"][0]["doc"] == "Adds."
    run = await callers_and_callees(engine, GROUP, "pkg.use.run")
    assert [c["name"] for c in run["callees"]] == ["pkg.core.foo"]
    greet = await callers_and_callees(engine, GROUP, "web.Greeter.greet")
    assert [c["name"] for c in greet["callees"]] == ["util.helper"]
    foo = await where_defined(engine, GROUP, "foo")
    assert foo["symbols"][0]["location"] == "pkg/core.py:4-7"
    assert foo["symbols"][0]["doc"] == "Return x doubled."
    assert foo["symbols"][0]["signature"] == "def foo(x)"

    wal_before = _wal(engine)
    second = await ingest_tree(engine, root, GROUP)
    assert second.batch is None and second.files_unchanged == 7
    assert _wal(engine) == wal_before

    (root / "pkg" / "core.py").write_text(A_V2)
    third = await ingest_tree(engine, root, GROUP)
    assert third.files_parsed == 1 and third.files_unchanged == 6
    assert third.batch is not None and third.batch.signatures_changed == ["pkg.core.foo"]

    (root / "pkg" / "use.py").unlink()
    fourth = await ingest_tree(engine, root, GROUP)
    assert fourth.files_deleted == 1 and fourth.batch is not None
    assert fourth.batch.symbols_removed == ["pkg.use.run"]
    assert "pkg.use.run" not in await symbols_at(engine, GROUP, datetime.now(UTC))


async def test_methods_answer_through_dispatch(
    engine: Engine, repo: tuple[Path, list[datetime]]
) -> None:
    path, times = repo
    done = await dispatch(
        engine, "knowledge_code_ingest", {"path": str(path), "group_id": GROUP, "history": "all"}
    )
    assert done["commits_walked"] == 4
    where = await dispatch(engine, "knowledge_code_where", {"name": "m", "group_id": GROUP})
    assert [s["name"] for s in where["symbols"]] == ["a.Bar.m", "c.Bar.m"]
    assert [s["present"] for s in where["symbols"]] == [False, True]
    calls = await dispatch(
        engine,
        "knowledge_code_calls",
        {"name": "a.foo", "group_id": GROUP, "as_of": times[0].isoformat()},
    )
    assert sorted(c["name"] for c in calls["callers"]) == ["a.Bar.m", "b.use"]
    changes = await dispatch(
        engine,
        "knowledge_code_changes",
        {"since": times[2].isoformat(), "until": times[3].isoformat(), "group_id": GROUP},
    )
    assert changes["added"] == [] and changes["removed"] == []
    assert changes["renamed"] == [{"from": "c.foo", "to": "c.gone"}]
    timeline = await dispatch(
        engine, "knowledge_get_entity_timeline", {"name": "a.foo", "group_id": GROUP}
    )
    defines = [f for f in timeline["facts"] if f["name"] == "DEFINES"]
    assert [(f["fact"], f["valid_at"], f["invalid_at"]) for f in defines] == [
        ("a.py defines a.foo: def foo(x)", _db(times[0]), _db(times[1])),
        ("a.py defines a.foo: def foo(x, y)", _db(times[1]), _db(times[2])),
    ]
    with pytest.raises(InvalidRequestError):
        await dispatch(
            engine, "knowledge_code_ingest", {"path": str(path / "nope"), "group_id": GROUP}
        )
    context = await dispatch(
        engine, "knowledge_get_context", {"query": "c.gone", "group_ids": [GROUP], "hops": 0}
    )
    assert "c.gone (Code, Function) — c.py:4-7 def gone()" in context["context"]


async def test_a_repository_without_commits_is_refused(engine: Engine, tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    with pytest.raises(InvalidRequestError, match="no commits"):
        await ingest_history(engine, tmp_path, GROUP)


async def test_notes_that_name_a_symbol_are_linked_to_it(engine: Engine, tmp_path: Path) -> None:
    root = tmp_path / "tree"
    (root / "billing").mkdir(parents=True)
    (root / "billing" / "__init__.py").write_text("")
    (root / "billing" / "service.py").write_text(
        "class BillingService:\n    def charge(self):\n        pass\n\n"
        "def parse_config(path):\n    pass\n\ndef load():\n    pass\n"
    )
    text = (
        "We moved BillingService off MySQL; parse_config now validates paths. "
        "See billing/service.py. We load the data and charge() twice. The service is fine."
    )
    note = Episode(str(uuid.uuid4()), GROUP, "note", text, created_at=datetime.now(UTC))
    await engine.commit_episode(EpisodeCommit(GROUP, note))
    report = await ingest_tree(engine, root, GROUP)
    assert report.notes == {"notes_linked": 1, "mentions_added": 4}
    linked = await engine.read(
        lambda conn: conn.rows(
            "MATCH (ep:Episode {uuid: $u})-[:MENTIONS]->(e:Entity) RETURN e.name ORDER BY e.name",
            {"u": note.uuid},
        )
    )
    # "load" and "service" are ordinary words: not linked; charge() is written as a call.
    assert [r[0] for r in linked] == [
        "billing.service.BillingService",
        "billing.service.BillingService.charge",
        "billing.service.parse_config",
        "billing/service.py",
    ]
    (root / "billing" / "service.py").write_text(
        (root / "billing" / "service.py").read_text() + "\ndef extra_step():\n    pass\n"
    )
    again = await ingest_tree(engine, root, GROUP)
    assert again.notes == {"notes_linked": 0, "mentions_added": 0}


async def test_uncommitted_changes_sync_on_top_of_history(
    engine: Engine, repo: tuple[Path, list[datetime]]
) -> None:
    path, _ = repo
    await ingest_history(engine, path, GROUP)
    (path / "b.py").write_text(
        B_V1.replace("from a import", "from c import") + "\ndef wip():\n    pass\n"
    )
    synced = await ingest_tree(engine, path, GROUP)
    assert synced.files_parsed == 1 and synced.files_unchanged == 1
    assert synced.batch is not None and synced.batch.symbols_added == ["b.wip"]
    assert "b.wip" in await symbols_at(engine, GROUP, datetime.now(UTC))
