"""Architecture: imports flow one way (cli -> service -> engine -> subsystems), and only
`lcg/storage/` talks to Kuzu. Ruff's banned-api rule is lifted per directory, which lifts every
ban in those files; this walk over the import statements is the check that cannot be lifted."""

from __future__ import annotations

import ast
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


def sources() -> dict[str, set[str]]:
    return {str(p.relative_to(SRC.parent)): imports_of(p) for p in sorted(SRC.rglob("*.py"))}


def _names(imports: set[str], *prefixes: str) -> list[str]:
    return sorted(i for i in imports if any(i == p or i.startswith(p + ".") for p in prefixes))


def test_the_walk_sees_the_whole_package() -> None:
    files = sources()
    assert "lcg/engine/kernel.py" in files and "lcg/storage/store.py" in files
    assert "kuzu" in files["lcg/storage/store.py"]
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
    offenders = {
        path: _names(imports, "lcg.service", "lcg.cli")
        for path, imports in sources().items()
        if not path.startswith(("lcg/service/", "lcg/cli/"))
    }
    assert {p: names for p, names in offenders.items() if names} == {}


def test_the_service_layer_never_imports_the_cli() -> None:
    offenders = {
        path: _names(imports, "lcg.cli")
        for path, imports in sources().items()
        if path.startswith("lcg/service/")
    }
    assert {p: names for p, names in offenders.items() if names} == {}


def test_only_storage_imports_kuzu() -> None:
    offenders = {
        path: _names(imports, "kuzu")
        for path, imports in sources().items()
        if not path.startswith("lcg/storage/")
    }
    assert {p: names for p, names in offenders.items() if names} == {}


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
