"""docs/api.md, lcg's wire reference, stays true to the declarations and reachable from the code:
its generated parameter tables are current, every registered method has a section, and every
`docs/api.md §...` citation in the code (and every `§...` inside the document) names one of
its headings."""

from __future__ import annotations

import re
from pathlib import Path

from lcg.service import apidoc
from lcg.service.registry import REGISTRY

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "api.md"
SECTION = re.compile(r"§([A-Za-z0-9_.-]*[A-Za-z0-9_])")


def headings(text: str) -> set[str]:
    """The citable name of each heading: its first word (`### knowledge_status` ->
    `knowledge_status`, `## disk — ...` -> `disk`)."""
    return {
        line.lstrip("#").split()[0].strip("`")
        for line in text.splitlines()
        if re.match(r"#{1,4} \S", line)
    }


def citations(paths: list[Path]) -> dict[str, set[str]]:
    """`path:line` -> the sections cited on a line that names docs/api.md."""
    found: dict[str, set[str]] = {}
    for path in paths:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if "docs/api.md" in line:
                found[f"{path.relative_to(ROOT)}:{number}"] = set(SECTION.findall(line))
    return found


def test_the_generated_tables_are_current() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert apidoc.render(text) == text, "docs/api.md is stale: run `python -m lcg.service.apidoc`"


def test_every_registered_method_has_its_own_section() -> None:
    text = DOC.read_text(encoding="utf-8")
    names = headings(text)
    assert set(REGISTRY) <= names
    assert "## Methods not yet described" not in text
    for name in REGISTRY:
        section = text.split(f"\n### {name}\n", 1)[1].split("\n##", 1)[0]
        assert "**Result.**" in section or name == "knowledge_close", name


def test_the_heading_reader() -> None:
    assert headings("# t\n## disk — the WAL\n### `knowledge_status`\ntext #x\n") == {
        "t",
        "disk",
        "knowledge_status",
    }


def test_every_citation_in_the_code_names_a_heading() -> None:
    known = headings(DOC.read_text(encoding="utf-8"))
    sources = sorted((ROOT / "src" / "lcg").rglob("*.py"))
    cited = citations(sources)
    assert cited, "the code cites docs/api.md"
    unresolved = {where: s - known for where, s in cited.items() if s - known}
    assert unresolved == {}


def test_the_documents_own_references_resolve() -> None:
    text = DOC.read_text(encoding="utf-8")
    known = headings(text)
    assert set(SECTION.findall(text)) - known == set()
