"""The checkpoint (mark) store of docs/api.md §checkpoints: names, exclusive records, reachability."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lcg.errors import ConflictError, InvalidRequestError, NotFoundError
from lcg.wal import marks
from lcg.wal.layout import GENERATION_FILE, ordered_files, read_generation
from lcg.wal.records import Op
from lcg.wal.writer import GroupStream

RULE = "must be 1-200 chars of [A-Za-z0-9_-]"


@pytest.mark.parametrize("name", ["a", "Z", "0", "-", "_", "good-Name_42", "x" * 200])
def test_valid_names(name: str) -> None:
    assert marks.validate_name(name) == name


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("", '""'),
        ("a b", '"a b"'),
        ("x" * 201, '"' + "x" * 201 + '"'),
        ("café", '"café"'),
        ("a/b", '"a/b"'),
        ("..", '".."'),
        ("a.b", '"a.b"'),
        ("ok\n", '"ok\\n"'),
        ('q"uote', '"q\\"uote"'),
        ("back\\slash", '"back\\\\slash"'),
        ("tab\there", '"tab\\there"'),
        ("nul\x00", '"nul\\0"'),
        ("bell\x07", '"bell\\u{7}"'),
    ],
)
def test_invalid_names_have_the_reference_message(name: str, shown: str) -> None:
    with pytest.raises(marks.CheckpointNameError) as info:
        marks.validate_name(name)
    err = info.value
    assert isinstance(err, InvalidRequestError) and err.field == "name"
    assert err.message == f"invalid checkpoint name {shown}: {RULE}"
    assert err.wire_message() == err.message  # no "IPC error: " prefix (docs/api.md §errors)


def _records(group: Path, name: str) -> list[str]:
    return sorted(p.name for p in (group / ".checkpoints" / name).iterdir())


def test_create_is_exclusive_and_delete_tombstones(tmp_path: Path) -> None:
    group = tmp_path / "liminis"
    group.mkdir()
    mark = marks.create_mark(group, "before-import", 7, "gen-1", now_ms=1234)
    assert (mark.seq, mark.generation_number, mark.wal_generation) == (7, 1, "gen-1")
    g1 = group / ".checkpoints" / "before-import" / "g1.create.json"
    assert json.loads(g1.read_text()) == {
        "name": "before-import",
        "seq": 7,
        "created_at_ms": 1234,
        "wal_generation": "gen-1",
    }
    created_bytes = g1.read_bytes()
    with pytest.raises(marks.CheckpointExistsError) as info:
        marks.create_mark(group, "before-import", 9, "gen-1")
    assert isinstance(info.value, ConflictError)
    assert info.value.wire_message() == 'checkpoint "before-import" already exists'
    assert _records(group, "before-import") == ["g1.create.json"]

    marks.delete_mark(group, "before-import", now_ms=2000)
    assert json.loads((g1.parent / "g1.delete.json").read_text()) == {
        "name": "before-import",
        "deleted_at_ms": 2000,
    }
    assert marks.read_active(group, "before-import") is None
    assert marks.list_marks(group) == []
    with pytest.raises(marks.CheckpointNotFoundError) as gone:
        marks.delete_mark(group, "before-import")
    assert isinstance(gone.value, NotFoundError)
    assert gone.value.wire_message() == 'checkpoint "before-import" not found'

    again = marks.create_mark(group, "before-import", None, None)
    assert again.generation_number == 2 and again.seq is None
    assert _records(group, "before-import") == [
        "g1.create.json",
        "g1.delete.json",
        "g2.create.json",
    ]
    assert g1.read_bytes() == created_bytes  # create records are never rewritten
    with pytest.raises(marks.CheckpointExistsError):
        marks.create_mark(group, "before-import", 1, None)


def test_delete_of_a_name_never_created_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(marks.CheckpointNotFoundError, match='checkpoint "nope" not found'):
        marks.delete_mark(tmp_path, "nope")
    with pytest.raises(marks.CheckpointNameError):
        marks.delete_mark(tmp_path, "no pe")


def test_an_unparseable_active_record_still_blocks_the_name(tmp_path: Path) -> None:
    mark_dir = tmp_path / ".checkpoints" / "m"
    mark_dir.mkdir(parents=True)
    (mark_dir / "g1.create.json").write_text("{torn")
    assert marks.read_active(tmp_path, "m") is None
    with pytest.raises(marks.CheckpointExistsError):
        marks.create_mark(tmp_path, "m", 1, None)


def _append(stream: GroupStream, n: int) -> None:
    for _ in range(n):
        stream.append([Op("group.purge", {})])


def _wire(group: Path) -> dict[str, dict[str, object]]:
    return {m.mark.name: m.to_wire() for m in marks.list_marks(group)}


def test_reachability_follows_bounds_and_generation(tmp_path: Path) -> None:
    group = tmp_path / "liminis"
    stream = GroupStream("liminis", group, 0, 3)  # rotate every 3 lines
    generation = read_generation(group)
    assert generation is not None
    marks.create_mark(group, "empty", None, generation)
    _append(stream, 2)  # seqs 0-1
    marks.create_mark(group, "at-1", 1, generation)
    marks.create_mark(group, "ahead", 5, generation)
    listed = _wire(group)
    assert list(listed) == ["ahead", "at-1", "empty"]  # sorted by name
    assert listed["at-1"] == {
        "name": "at-1",
        "seq": 1,
        "reachable": True,
        "wal_min_seq": 0,
        "wal_max_seq": 1,
        "generation": generation,
    }
    assert listed["ahead"]["reachable"] is False  # beyond the end of the log
    assert listed["empty"]["reachable"] is True

    _append(stream, 7)  # seqs 2-8, over several rotated files
    stream.close()
    assert len(ordered_files(group)) >= 3
    listed = _wire(group)
    assert {n: m["reachable"] for n, m in listed.items()} == {
        "ahead": True,
        "at-1": True,
        "empty": True,
    }
    assert listed["at-1"]["wal_max_seq"] == 8

    # The head of the log is gone (pruned): no seq can be replayed from 0 any more.
    ordered_files(group)[0].unlink()
    listed = _wire(group)
    assert listed["at-1"]["wal_min_seq"] == 3
    assert {n: m["reachable"] for n, m in listed.items()} == {
        "ahead": False,
        "at-1": False,
        "empty": True,
    }


def test_a_new_generation_makes_every_mark_unreachable(tmp_path: Path) -> None:
    group = tmp_path / "g"
    stream = GroupStream("g", group, 0, 100)
    _append(stream, 3)
    stream.close()
    old = read_generation(group)
    marks.create_mark(group, "m", 2, old)
    marks.create_mark(group, "null-seq", None, old)
    marks.create_mark(group, "unknown-gen", 2, None)
    assert all(m["reachable"] for m in _wire(group).values())
    (group / GENERATION_FILE).write_text(json.dumps({"generation": "republished"}))
    listed = _wire(group)
    assert listed["m"]["reachable"] is False
    assert listed["null-seq"]["reachable"] is False
    assert listed["unknown-gen"]["reachable"] is True  # one side unknown: bounds decide
    (group / GENERATION_FILE).unlink()  # generation unknown now: bounds decide
    assert all(m["reachable"] for m in _wire(group).values())


def test_list_of_a_group_without_a_store_is_empty(tmp_path: Path) -> None:
    assert marks.list_marks(tmp_path / "missing") == []
    assert marks.list_marks(tmp_path) == []


def test_a_record_name_with_a_trailing_newline_is_not_a_record(tmp_path: Path) -> None:
    # `^...$` matched "g1.delete.json\n": a stray file deleted the mark as a tombstone would.
    group = tmp_path / "liminis"
    group.mkdir()
    mark = marks.create_mark(group, "keep", 3, "gen-1", now_ms=1)
    stray = group / ".checkpoints" / "keep" / "g1.delete.json\n"
    stray.write_text(json.dumps({"name": "keep", "deleted_at_ms": 2}))
    assert marks.read_active(group, "keep") == mark
