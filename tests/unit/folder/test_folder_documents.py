"""Reading documents: front matter, titles, dating rules and JSON Lines records."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from lcg.folder.documents import Document, DocumentError, read_documents, split_front_matter


def write(path: Path, text: str, mtime: float | None = None) -> Path:
    path.write_text(text, encoding="utf-8")
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def read(path: Path, name: str | None = None) -> list[Document]:
    return read_documents(path, name or path.name, path.read_bytes())


def test_front_matter_dates_win_in_their_documented_order(tmp_path: Path) -> None:
    path = write(
        tmp_path / "2020-01-01-note.md",
        "---\ntitle: Release 2\nupdated: 2025-04-02\ncreated: 2025-03-14T09:30:00+02:00\n---\n"
        "# Heading\n\nBody.",
    )
    (d,) = read(path)
    assert d.title == "Release 2"
    assert d.reference_time == datetime(2025, 3, 14, 7, 30, tzinfo=UTC)  # created before updated
    assert d.time_origin == "front_matter"
    assert d.text.startswith("# Heading")


def test_a_date_in_the_file_name_is_used_without_front_matter(tmp_path: Path) -> None:
    (d,) = read(write(tmp_path / "2025-03-14-launch.md", "# Launch day\n\nText."))
    assert d.reference_time == datetime(2025, 3, 14, tzinfo=UTC)
    assert d.time_origin == "file_name"
    assert d.title == "Launch day"


def test_an_undated_file_falls_back_to_its_mtime_and_says_so(tmp_path: Path) -> None:
    (d,) = read(write(tmp_path / "notes.txt", "Plain text.", mtime=1_700_000_000))
    assert d.reference_time == datetime.fromtimestamp(1_700_000_000, tz=UTC)
    assert d.time_origin == "mtime"
    assert d.title == "notes"


def test_an_impossible_date_in_a_name_is_not_a_date(tmp_path: Path) -> None:
    (d,) = read(write(tmp_path / "2025-13-45-x.md", "Text.", mtime=1_700_000_000))
    assert d.time_origin == "mtime"


def test_front_matter_that_is_not_valid_yaml_is_dropped_and_reported() -> None:
    # Broken front matter is metadata, not prose; it was ingested as body text.
    meta, body, problem = split_front_matter("---\n: [unclosed\n---\nBody")
    assert meta == {}
    assert body == "Body"
    assert problem is not None and "not valid YAML" in problem


def test_a_block_that_is_yaml_but_not_a_mapping_is_not_front_matter() -> None:
    meta, body, problem = split_front_matter("---\n- a list\n---\nBody")
    assert meta == {} and body.startswith("---") and problem is None


def test_jsonl_records_become_documents_with_their_own_keys_and_dates(tmp_path: Path) -> None:
    path = write(
        tmp_path / "log.jsonl",
        '{"_header": true}\n'
        '{"title": "Apollo 13", "revision_id": 42, "prose": "It launched."}\n'
        "\n"
        '{"id": "m2", "text": "Second.", "date": "2024-05-01"}\n'
        '{"message": "Third, with no id."}\n',
    )
    docs = read(path)
    assert [(d.key, d.title, d.text) for d in docs] == [
        ("42", "Apollo 13", "It launched."),
        ("m2", "log:4", "Second."),
        ("L5", "log:5", "Third, with no id."),
    ]
    assert docs[1].reference_time == datetime(2024, 5, 1, tzinfo=UTC)
    assert docs[1].time_origin == "record"
    assert docs[0].time_origin == "mtime"


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("bad.md", b"\xff\xfe\xfa", "not UTF-8"),
        ("bad.jsonl", b'{"text": "ok"}\n{broken\n', "bad.jsonl:2: not JSON"),
        ("list.jsonl", b"[1, 2]\n", "must be a JSON object"),
    ],
)
def test_unreadable_files_are_reported_with_their_place(
    tmp_path: Path, name: str, data: bytes, message: str
) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(DocumentError, match=message):
        read(path)


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("2025-13-45", "'2025-13-45'"),  # YAML's timestamp type raised ValueError out of the parser
        ("next tuesday", "'next tuesday'"),
        ("12/03/2025", "'12/03/2025'"),
        ("2025", "2025"),
    ],
)
def test_a_bad_front_matter_date_is_reported_and_the_file_falls_back(
    tmp_path: Path, value: str, shown: str
) -> None:
    # One bad date crashed the run; unparseable ones were silently ignored.
    path = write(
        tmp_path / "note.md", f"---\ntitle: T\ndate: {value}\n---\nBody.", mtime=1_700_000_000
    )
    (d,) = read(path)
    assert d.time_origin == "mtime"
    assert d.reference_time == datetime.fromtimestamp(1_700_000_000, tz=UTC)
    assert d.title == "T" and d.text == "Body."
    (note,) = d.notes
    assert f"date: {shown} is not a date" in note
    assert "modification time" in note


def test_a_bad_front_matter_date_falls_back_to_the_date_in_the_file_name(tmp_path: Path) -> None:
    (d,) = read(write(tmp_path / "2025-03-14-x.md", "---\ndate: soon\n---\nBody."))
    assert (d.time_origin, d.reference_time) == ("file_name", datetime(2025, 3, 14, tzinfo=UTC))
    assert "the date in the file name" in d.notes[0]


def test_broken_yaml_front_matter_is_not_ingested_as_text_and_is_reported(
    tmp_path: Path,
) -> None:
    path = write(tmp_path / "note.md", '---\ntitle: "unclosed\ndate: 2025-03-14\n---\nBody.')
    (d,) = read(path)
    assert d.text == "Body."
    assert d.time_origin == "mtime"
    assert len(d.notes) == 1 and "front matter is not valid YAML" in d.notes[0]


def test_good_front_matter_has_no_notes(tmp_path: Path) -> None:
    (d,) = read(write(tmp_path / "note.md", "---\ndate: 2025-03-14\n---\nBody."))
    assert d.notes == ()


def test_a_hard_wrapped_markdown_paragraph_and_list_item_are_read_whole(tmp_path: Path) -> None:
    """A statement wrapped at a line break reaches the extractor as one line (a plain text
    file keeps its lines: only Markdown/RST structure says what a paragraph is)."""
    text = (
        "# Notes\n\n"
        "Werkzeug now assumes UTF-8 as filesystem encoding on Unix if Python\n"
        "detects it as ASCII.\n\n"
        "- Maya Chen moved from the search team\n"
        "  to the ledger team.\n"
        "- The ledger was rewritten in Rust.\n\n"
        "```\ncode stays\nas it is\n```\n"
    )
    md = tmp_path / "notes.md"
    md.write_text(text)
    [doc] = read_documents(md, "notes.md", md.read_bytes())
    lines = doc.text.splitlines()
    assert (
        "Werkzeug now assumes UTF-8 as filesystem encoding on Unix if Python detects it as ASCII."
        in lines
    )
    assert "- Maya Chen moved from the search team to the ledger team." in lines
    assert "- The ledger was rewritten in Rust." in lines
    assert "code stays" in lines and "as it is" in lines
    txt = tmp_path / "notes.txt"
    txt.write_text(text)
    [plain] = read_documents(txt, "notes.txt", txt.read_bytes())
    assert "detects it as ASCII." in plain.text.splitlines()
