"""The lcg package ships only the project's own text: the third-party corpus in examples/apollo/
(Simple English Wikipedia, CC BY-SA 4.0) is test and benchmark data and never package data.

A wheel carries the package's modules and the files that the `[tool.setuptools.package-data]`
globs match under src/lcg/, symlinks followed (src/lcg/examples/ links into examples/). Checked
from pyproject.toml and the tree, the globs expanded relative to the package as setuptools does:
no build backend, no package index.
"""

from __future__ import annotations

import hashlib
import tomllib
from pathlib import Path

from lcg.cli.demo import SOURCE
from lcg.cli.demo_time import CHANGELOG

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "lcg"
THIRD_PARTY = ROOT / "examples" / "apollo"


def _globs() -> list[str]:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    package_data: dict[str, list[str]] = pyproject["tool"]["setuptools"]["package-data"]
    assert set(package_data) == {"lcg"}, package_data
    return package_data["lcg"]


def _shipped() -> set[Path]:
    files = set(PACKAGE.rglob("*.py"))
    for pattern in _globs():
        files.update(path for path in PACKAGE.glob(pattern) if path.is_file())
    return files


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_no_shipped_file_is_third_party_text_linked_copied_or_from_outside_the_repository() -> None:
    third_party = {_digest(p): p for p in THIRD_PARTY.rglob("*") if p.is_file()}
    assert third_party, f"{THIRD_PARTY} holds no file: the check below would check nothing"
    found = []
    for path in sorted(_shipped()):
        target = path.resolve()
        if target.is_relative_to(THIRD_PARTY) or not target.is_relative_to(ROOT):
            found.append(f"{path.relative_to(ROOT)} -> {target}")
        elif _digest(path) in third_party:
            found.append(f"{path.relative_to(ROOT)}: a copy of {third_party[_digest(path)]}")
    assert not found, "package data that must not ship:\n" + "\n".join(found)


def test_no_package_data_glob_and_no_entry_of_src_lcg_names_the_apollo_corpus() -> None:
    assert [g for g in _globs() if "apollo" in g.lower()] == []
    entries = [p for p in PACKAGE.rglob("*") if "apollo" in p.name.lower()]
    assert entries == []
    links = [p for p in PACKAGE.rglob("*") if p.is_symlink()]
    assert links, "src/lcg/examples/ holds the demo's files as symlinks"
    outside = [p for p in links if not p.resolve().is_relative_to(ROOT / "examples")]
    into_apollo = [p for p in links if p.resolve().is_relative_to(THIRD_PARTY)]
    assert outside == [] and into_apollo == []


def test_what_lcg_demo_reads_is_package_data() -> None:
    # A plain install has no checkout: the demo reads its files from the installed package.
    shipped = _shipped()
    for relative in (SOURCE, CHANGELOG):
        assert PACKAGE / relative in shipped, relative
        assert (PACKAGE / relative).resolve().is_file()


def test_the_package_reads_no_data_from_outside_the_repository() -> None:
    # ../shared/data/ (apollo, beam, changelogs) is for tests and benchmarks: no default of lcg's
    # own (`lcg eval --corpus`, the demo) may look there.
    outside = "shared/" + "data"  # in pieces, so that this file does not match itself
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if outside in line
    ]
    assert found == []
