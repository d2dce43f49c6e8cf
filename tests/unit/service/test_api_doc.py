"""docs/api.md, lcg's wire reference, stays true to the declarations and reachable from the code:
its generated parameter tables are current, every registered method has a section, and every
`docs/api.md §...` citation in the code, tests and benchmarks (and every `§...` inside the
document) names one of its headings."""

from __future__ import annotations

import re
from pathlib import Path

from lcg.service import apidoc
from lcg.service.registry import REGISTRY

ROOT = Path(__file__).resolve().parents[3]
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


CITATION = re.compile(
    r"docs/api\.md\s+(§[A-Za-z0-9_.-]+(?:(?:,\s+(?:the [^,§]*,\s+)?|\s+and\s+)§[A-Za-z0-9_.-]+)*)"
)


def citations(paths: list[Path]) -> dict[str, set[str]]:
    """`path:line` -> the sections a `docs/api.md §a, §b` citation there names (a citation may
    run over a line break)."""
    found: dict[str, set[str]] = {}
    for path in paths:
        text = path.read_text(encoding="utf-8")
        for match in CITATION.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            where = f"{path.relative_to(ROOT)}:{line}"
            found.setdefault(where, set()).update(SECTION.findall(match.group(1)))
    return found


def test_the_citation_reader() -> None:
    text = "x (docs/api.md §a, §b-c and §d.e). docs/api.md\n§f, the job, §g; §h"
    matches = [SECTION.findall(m.group(1)) for m in CITATION.finditer(text)]
    assert matches == [["a", "b-c", "d.e"], ["f", "g"]]


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


def cited_files() -> list[Path]:
    """The code (Python and the UI's JavaScript), the tests and benchmarks (but this file, whose
    examples are not citations) and the prose documents."""
    code = [p for p in (ROOT / "src" / "lcg").rglob("*") if p.suffix in (".py", ".js")]
    checks = [
        p
        for folder in ("tests", "bench")
        for p in (ROOT / folder).rglob("*.py")
        if p != Path(__file__).resolve()
    ]
    return sorted([*code, *checks, ROOT / "README.md", *(ROOT / "docs").glob("*.md")])


def test_every_citation_in_the_code_names_a_heading() -> None:
    known = headings(DOC.read_text(encoding="utf-8"))
    cited = citations(cited_files())
    assert cited, "the code cites docs/api.md"
    unresolved = {where: s - known for where, s in cited.items() if s - known}
    assert unresolved == {}


def test_the_documents_own_references_resolve() -> None:
    text = DOC.read_text(encoding="utf-8")
    known = headings(text)
    assert set(SECTION.findall(text)) - known == set()


def test_the_code_no_longer_cites_the_outside_spec() -> None:
    """`API.md §x.y` pointed at a document outside the repository; the code, the tests, the
    benchmarks and the documents cite docs/api.md."""
    stale = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in cited_files()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "API.md" in line
    ]
    assert stale == []
