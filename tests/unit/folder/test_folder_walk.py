"""Finding sources: globs, ignore files at any depth, --exclude, hidden directories, files."""

from __future__ import annotations

from pathlib import Path

import pytest

from lcg.folder.walk import DEFAULT_GLOBS, find_sources, scan_sources


def tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def names(
    roots: list[Path],
    globs: tuple[str, ...] | list[str] = DEFAULT_GLOBS,
    excludes: tuple[str, ...] | list[str] = (),
) -> list[str]:
    return [s.source_file for s in find_sources(roots, globs, excludes)]


def test_default_globs_take_markdown_text_and_jsonl_at_every_depth(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {"a.md": "", "d/b.txt": "", "d/e/c.jsonl": "", "d/x.py": "", "d/y.json": ""},
    )
    assert names([root]) == ["a.md", "d/b.txt", "d/e/c.jsonl"]


def test_ignore_files_apply_below_their_directory_and_hidden_dirs_are_skipped(
    tmp_path: Path,
) -> None:
    root = tree(
        tmp_path,
        {
            ".gitignore": "drafts/\n",
            "drafts/x.md": "",
            "keep.md": "",
            "sub/.lcgignore": "secret*.md\n",
            "sub/secret1.md": "",
            "sub/open.md": "",
            "secret2.md": "",  # the sub/ ignore file does not reach up here
            ".git/info.md": "",
            ".lcg/state.md": "",
        },
    )
    assert names([root]) == ["keep.md", "secret2.md", "sub/open.md"]


def test_excludes_and_globs_given_on_the_command_line(tmp_path: Path) -> None:
    root = tree(tmp_path, {"a.md": "", "b.md": "", "notes/c.md": "", "t.txt": ""})
    assert names([root], excludes=["b.md", "notes/"]) == ["a.md", "t.txt"]
    assert names([root], globs=["notes/*.md"]) == ["notes/c.md"]


def test_a_file_root_is_named_by_its_file_name_and_duplicates_are_dropped(
    tmp_path: Path,
) -> None:
    root = tree(tmp_path, {"d/a.md": ""})
    assert names([root / "d" / "a.md", root / "d"]) == ["a.md"]


def test_a_missing_root_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no such file"):
        find_sources([tmp_path / "nope"])


def test_files_no_glob_takes_are_listed_as_skipped(tmp_path: Path) -> None:
    # A folder of PDFs reported "0 files ingested" and nothing else.
    root = tree(tmp_path, {"a.md": "x", "report.pdf": "%PDF", "sub/b.png": "", ".git/c.pdf": ""})
    scan = scan_sources([root])
    assert [s.source_file for s in scan.sources] == ["a.md"]
    assert [s.source_file for s in scan.skipped] == ["report.pdf", "sub/b.png"]
