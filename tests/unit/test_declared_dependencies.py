"""Every third-party module the package imports is declared in pyproject.toml.

A plain `pip install lcg` installs only `[project] dependencies`, so the rule is:

- an import that runs when its module is imported (module or class level, not under
  `if TYPE_CHECKING:`, not inside a `try` that catches ImportError) needs a distribution listed
  in `dependencies`;
- an import that runs only when called (inside a function) or that is guarded by
  `except ImportError` may also come from an optional extra (`fastembed`,
  `sentence-transformers`): the command that needs it checks for it and names the extra;
- nothing under src/lcg may import a tool of the `dev` extra or an undeclared package at all.

Modules map to distributions through `importlib.metadata.packages_distributions()`; a module of
an extra that is not installed here (CI installs neither embedding extra) falls back to its own
name, normalised as a distribution name (`sentence_transformers` -> `sentence-transformers`).
"""

from __future__ import annotations

import ast
import functools
import re
import sys
import tomllib
from dataclasses import dataclass
from importlib.metadata import packages_distributions, version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "lcg"


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(spec: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", spec)
    assert match, f"cannot read a distribution name from {spec!r}"
    return _normalise(match.group(1))


def _declared() -> tuple[set[str], set[str]]:
    """(required distributions, distributions of the runtime extras: every extra but dev)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    required = {_requirement_name(s) for s in project["dependencies"]}
    extras = {
        _requirement_name(s)
        for name, specs in project.get("optional-dependencies", {}).items()
        if name != "dev"
        for s in specs
    }
    return required, extras


@dataclass(frozen=True)
class Import:
    module: str  # top-level module name
    where: str  # file:line
    eager: bool  # runs when the importing module is imported


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _catches_import_error(node: ast.Try) -> bool:
    for handler in node.handlers:
        names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        for name in names:
            if isinstance(name, ast.Name) and name.id in {"ImportError", "ModuleNotFoundError"}:
                return True
    return False


def _imports(path: Path) -> list[Import]:
    found: list[Import] = []
    rel = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path

    def visit(node: ast.AST, eager: bool) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.append(Import(alias.name.split(".")[0], f"{rel}:{node.lineno}", eager))
            return
        if isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module:
                found.append(Import(node.module.split(".")[0], f"{rel}:{node.lineno}", eager))
            return
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            eager = False  # runs when called, not when imported
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:  # the `else` of TYPE_CHECKING does run
                visit(child, eager)
            return  # the type checker's imports never run
        if isinstance(node, ast.Try) and _catches_import_error(node):
            for child in node.body:
                visit(child, False)  # guarded: absence is handled
            for part in (node.handlers, node.orelse, node.finalbody):
                for child in part:
                    visit(child, eager)
            return
        for child in ast.iter_child_nodes(node):
            visit(child, eager)

    visit(ast.parse(path.read_text(encoding="utf-8"), str(path)), True)
    return found


def _third_party(imports: list[Import]) -> list[Import]:
    local = {"lcg", "__future__"}
    return [i for i in imports if i.module not in sys.stdlib_module_names and i.module not in local]


@functools.cache
def _installed() -> dict[str, list[str]]:
    return dict(packages_distributions())


def _distributions(module: str) -> set[str]:
    names = _installed().get(module)
    return {_normalise(n) for n in names} if names else {_normalise(module)}


def _violations(imports: list[Import]) -> list[str]:
    required, extras = _declared()
    problems = []
    for item in imports:
        dists = _distributions(item.module)
        if dists & required:
            continue
        if not item.eager and dists & extras:
            continue
        why = (
            "is imported at module import time but is not in [project] dependencies"
            if dists & extras
            else "is not declared in pyproject.toml (dependencies or a runtime extra)"
        )
        problems.append(f"{item.where}: {item.module} ({'/'.join(sorted(dists))}) {why}")
    return problems


def test_every_runtime_import_is_declared() -> None:
    imports = [i for path in sorted(PACKAGE.rglob("*.py")) for i in _imports(path)]
    third_party = _third_party(imports)
    assert {i.module for i in third_party} >= {"kuzu", "numpy", "click"}  # the walk sees imports
    assert _violations(third_party) == []


def test_the_rule_tells_eager_from_lazy_and_guarded_imports(tmp_path: Path) -> None:
    source = tmp_path / "sample.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "import numpy\n"
        "import fastembed\n"  # an extra, eagerly: refused
        "import undeclared_thing\n"  # declared nowhere: refused
        "if TYPE_CHECKING:\n"
        "    import sentence_transformers\n"  # never runs: ignored
        "try:\n"
        "    import sentence_transformers\n"  # guarded: an extra may be absent
        "except ImportError:\n"
        "    sentence_transformers = None\n"
        "def load():\n"
        "    import fastembed\n"  # lazy: fine for an extra
        "    import pytest\n"  # lazy, but a dev tool: refused
        "class C:\n"
        "    import pyarrow\n"  # class bodies run at import time: a required dependency, fine
    )
    found = _imports(source)
    eager = {(i.module, i.eager) for i in _third_party(found)}
    assert eager == {
        ("numpy", True),
        ("fastembed", True),
        ("undeclared_thing", True),
        ("sentence_transformers", False),
        ("fastembed", False),
        ("pytest", False),
        ("pyarrow", True),
    }
    problems = _violations(_third_party(found))
    flagged = sorted(p.split(": ", 1)[1].split(" ")[0] for p in problems)
    assert flagged == ["fastembed", "pytest", "undeclared_thing"]


# -- the dev tools are pinned ---------------------------------------------------------------------
# Exact versions, so that lint, type checks and tests give the same verdict on every machine, and
# the virtualenv the Makefile builds has exactly those versions. Raising a pin is a commit of its
# own, noted in CHANGELOG.md.
DEV_REQUIREMENT = re.compile(r"^(?P<name>[A-Za-z0-9_.-]+)(?P<extras>\[[^\]]*\])?(?P<spec>.*)$")


def dev_requirements() -> list[tuple[str, str]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    out = []
    for line in project["optional-dependencies"]["dev"]:
        match = DEV_REQUIREMENT.match(line.replace(" ", ""))
        assert match, line
        if match["name"] == "lcg":  # the project's own extras, not a tool
            continue
        out.append((match["name"], match["spec"]))
    return out


def test_every_dev_tool_is_pinned_to_one_version() -> None:
    loose = [
        f"{name}{spec}" for name, spec in dev_requirements() if not re.fullmatch(r"==[\w.]+", spec)
    ]
    assert loose == [], "pin these with ==: " + ", ".join(loose)


def test_the_installed_dev_tools_are_the_pinned_versions() -> None:
    wrong = {
        name: (spec[2:], version(name))
        for name, spec in dev_requirements()
        if version(name) != spec[2:]
    }
    assert wrong == {}, "(pinned, installed): rebuild the virtualenv (make clean; make test)"
