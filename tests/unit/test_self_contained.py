"""The repository is self-contained: code, tests and docs cite documents that are in it
(docs/design.md, the package READMEs, bench/results/), never an outside design note, a
platform notebook or an issue tracker's numbers, which a reader of the repository cannot open."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Built from pieces so that this file does not match itself.
CITATION = re.compile(
    "|".join(
        (
            "DESIGN" + r" ?§",
            "PLATFORM" + r"\.md",
            "shared/" + "notes",
            r"(?i:\b" + "issue" + r"s? #?\d+)",
        )
    )
)
TREES = ("src", "tests", "docs", "bench")
SUFFIXES = {".py", ".md", ".js", ".html", ".css", ".toml", ".txt", ".jsonl", ".json", ".yaml"}


def test_nothing_cites_a_document_outside_the_repository_or_an_issue_number() -> None:
    found = []
    for tree in TREES:
        for path in sorted((ROOT / tree).rglob("*")):
            # Symlinks (src/lcg/examples/) lead to the project's own text in examples/: checked too.
            if not path.is_file() or path.suffix not in SUFFIXES:
                continue
            for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                if CITATION.search(line):
                    found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:100]}")
    for name in ("README.md", "CHANGELOG.md", "Makefile", "pyproject.toml"):
        text = (ROOT / name).read_text()
        for number, line in enumerate(text.splitlines(), 1):
            if CITATION.search(line):
                found.append(f"{name}:{number}: {line.strip()[:100]}")
    assert not found, "citations of documents not in the repository:\n" + "\n".join(found)
