"""Changelogs as documents: release headings in their common forms, one dated document per
release, hard-wrapped bullets joined, the project named."""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from lcg.folder.changelog import is_changelog, parse_releases, project_name, unwrap
from lcg.folder.chunking import chunk_document
from lcg.folder.documents import DocumentError, read_documents

HEADINGS = """# Changelog

## [Unreleased]

- Drop support for Python 3.8

## 0.28.1 (6th December, 2024)

* Fix SSL case.

## [2.0.0] - 2025-01-05

- Add a thing.

## v2.10.0 (2024-11-20)

* Bump a thing.

## 0.17.1 (March 15th, 2021)

* Fix another thing.

Version 3.1.0
-------------

Released 2024-11-13

-   Require Werkzeug >= 3.1.
"""


def test_release_headings_in_every_common_form_give_version_and_date() -> None:
    releases, unreleased = parse_releases(HEADINGS)
    assert [(r.version, r.day) for r in releases] == [
        ("0.28.1", date(2024, 12, 6)),
        ("2.0.0", date(2025, 1, 5)),
        ("2.10.0", date(2024, 11, 20)),
        ("0.17.1", date(2021, 3, 15)),
        ("3.1.0", date(2024, 11, 13)),
    ]
    assert unreleased == ["[Unreleased]"]
    assert releases[-1].lines[-1].strip() == "-   Require Werkzeug >= 3.1."
    assert is_changelog(HEADINGS)


def test_a_document_with_dated_headings_but_no_versions_is_not_a_changelog() -> None:
    assert not is_changelog("# Notes\n\n## 2025-03-03\n\n- a\n\n## 2025-04-01\n\n- b\n")


def test_hard_wrapped_bullets_and_paragraphs_are_joined_onto_one_line() -> None:
    text = (
        "-   Werkzeug now assumes UTF-8 as filesystem encoding on Unix if Python\n"
        "    detected it as ASCII.\n"
        "    * a nested detail\n"
        "- Next.\n\nA paragraph\nwrapped.\n\n```\ncode\nlines\n```"
    )
    assert unwrap(text).splitlines() == [
        "-   Werkzeug now assumes UTF-8 as filesystem encoding on Unix if Python detected it as "
        "ASCII.",
        "    * a nested detail",
        "- Next.",
        "",
        "A paragraph wrapped.",
        "",
        "```",
        "code",
        "lines",
        "```",
    ]


def test_the_project_comes_from_front_matter_title_or_folder() -> None:
    assert project_name("flask", "Changelog", "x/CHANGES.md") == "flask"
    assert project_name(None, "httpx changelog", "CHANGELOG.md") == "httpx"
    assert project_name(None, "Change Log", "repos/poetry/CHANGELOG.md") == "poetry"
    assert project_name(None, "HISTORY", "pydantic/HISTORY.md") == "pydantic"
    assert project_name(None, "Changelog", "notes/atlas-changes.md") == "atlas-changes"


def test_a_changelog_file_becomes_one_dated_document_per_release_oldest_first(
    tmp_path: Path,
) -> None:
    path = tmp_path / "httpx" / "CHANGELOG.md"
    path.parent.mkdir()
    path.write_text(HEADINGS, encoding="utf-8")
    docs = read_documents(path, "httpx/CHANGELOG.md", path.read_bytes())
    titles = [(d.title, d.key, d.reference_time, d.time_origin) for d in docs]
    assert titles[0] == ("httpx 0.17.1", "0.17.1", datetime(2021, 3, 15, tzinfo=UTC), "release")
    assert [d.key for d in docs] == ["0.17.1", "3.1.0/requires/0", "2.10.0", "0.28.1", "2.0.0"]
    assert "changelog: section '[Unreleased]' has no release date" in docs[0].notes[0]
    chunk = chunk_document(docs[3], 2000)[0]
    assert chunk.text.splitlines()[:2] == [
        "Document: httpx 0.28.1",
        "Release: httpx 0.28.1 (2024-12-06)",
    ]


def test_reading_as_a_plain_document_or_forcing_a_changelog(tmp_path: Path) -> None:
    path = tmp_path / "CHANGELOG.md"
    path.write_text(HEADINGS, encoding="utf-8")
    assert len(read_documents(path, "CHANGELOG.md", path.read_bytes(), "document")) == 1
    plain = tmp_path / "notes.md"
    plain.write_text("# Notes\n\nNo releases here.\n", encoding="utf-8")
    with pytest.raises(DocumentError, match="no release heading has a date"):
        read_documents(plain, "notes.md", plain.read_bytes(), "changelog")
    docs = read_documents(path, "CHANGELOG.md", path.read_bytes(), "changelog", "acme")
    assert docs[0].title == "acme 0.17.1"
