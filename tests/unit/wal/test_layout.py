"""lcg.wal.layout: group directory names (docs/api.md §layout), generation and bounds sidecars."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lcg.errors import InvalidRequestError
from lcg.wal import layout
from lcg.wal.layout import (
    BOUNDS_FILE,
    GENERATION_FILE,
    Bounds,
    decode_group,
    encode_group,
    ensure_generation,
    first_seq,
    group_dir,
    last_seq,
    list_groups,
    ordered_files,
    read_bounds,
    read_generation,
)


def line(seq: int) -> bytes:
    return json.dumps({"seq": seq, "ts": "", "op": "group.purge", "data": {}}).encode() + b"\n"


def write_stream(directory: Path, name: str, seqs: range | list[int], tail: bytes = b"") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_bytes(b"".join(line(s) for s in seqs) + tail)
    return path


# -- group names ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "group_id",
    ["liminis", "g", "team_1-A", "x" * 200, "0"],
)
def test_plain_group_ids_are_their_own_directory_names(group_id: str) -> None:
    assert encode_group(group_id) == group_id
    assert decode_group(group_id) == group_id


@pytest.mark.parametrize(
    ("group_id", "encoded"),
    [
        ("team/ops", "team%2Fops"),
        ("a.b", "a%2Eb"),
        (".", "%2E"),
        ("..", "%2E%2E"),
        ("a b", "a%20b"),
        ("100%", "100%25"),
        ("%2F", "%252F"),
        ("é", "%C3%A9"),
        ("日本", "%E6%97%A5%E6%9C%AC"),
        ("Ops:Lead", "Ops%3ALead"),
        ("x" * 201, None),  # too long to be plain, but every character is safe
    ],
)
def test_other_group_ids_are_percent_encoded_per_utf8_byte(
    group_id: str, encoded: str | None
) -> None:
    if encoded is None:
        with pytest.raises(InvalidRequestError):
            encode_group(group_id)
        return
    assert encode_group(group_id) == encoded
    assert decode_group(encoded) == group_id


@pytest.mark.parametrize(
    "group_id",
    ["/" * 66, "é" * 33, "a" * 197 + "/"],  # 198, 198 and 200 characters once encoded
)
def test_encoded_names_up_to_200_characters_are_valid(group_id: str) -> None:
    encoded = encode_group(group_id)
    assert len(encoded) <= 200
    assert decode_group(encoded) == group_id


@pytest.mark.parametrize(
    "group_id",
    ["", "/" * 67, "é" * 34, "a" * 198 + "/", "x" * 201],
    ids=["empty", "slashes-201", "accents-204", "mixed-201", "plain-201"],
)
def test_group_ids_that_cannot_be_encoded_are_invalid_requests(group_id: str) -> None:
    with pytest.raises(InvalidRequestError) as info:
        encode_group(group_id)
    assert info.value.field == "group_id"
    assert "1-200" in info.value.wire_message()


@pytest.mark.parametrize(
    "name",
    [
        ".checkpoints",  # a dot is outside the safe set, so a literal one is never a group
        "a.b",
        "a b",
        "",
        "%2",  # truncated escape
        "%ZZ",
        "%C3",  # not UTF-8
        "team%2fops",  # lower-case hex is not how lcg encodes
        "%41",  # "A" needs no escape, so this is not the encoding of any group
        "x" * 201,
    ],
)
def test_names_that_are_not_an_encoding_decode_to_none(name: str) -> None:
    assert decode_group(name) is None


@pytest.mark.parametrize("group_id", ["fuzz\n", "liminis\n", "a\nb"])
def test_a_newline_is_never_part_of_a_directory_name(group_id: str) -> None:
    # `^...$` matched "fuzz\n" (the `$` matches before a final newline): the group got a
    # directory with a newline in its name. It is not plain, so it is percent-encoded.
    encoded = encode_group(group_id)
    assert "\n" not in encoded
    assert encoded == group_id.replace("\n", "%0A")
    assert decode_group(encoded) == group_id


def test_a_directory_name_ending_in_a_newline_is_not_a_group(tmp_path: Path) -> None:
    (tmp_path / "fuzz\n").mkdir()
    (tmp_path / "liminis").mkdir()
    assert decode_group("fuzz\n") is None
    assert list_groups(tmp_path) == ["liminis"]


def test_group_dir_places_the_encoded_name_under_the_root(tmp_path: Path) -> None:
    assert group_dir(tmp_path, "team/ops") == tmp_path / "team%2Fops"


def test_list_groups_decodes_group_directories_and_ignores_everything_else(
    tmp_path: Path,
) -> None:
    for name in ("liminis", "team%2Fops", "%C3%A9", ".checkpoints", "not a group", "%41"):
        (tmp_path / name).mkdir()
    (tmp_path / "stray.jsonl").write_text("")
    (tmp_path / "file-group").write_text("")  # a plain name, but a file
    assert list_groups(tmp_path) == ["liminis", "team/ops", "é"]


def test_list_groups_of_a_missing_root_is_empty(tmp_path: Path) -> None:
    assert list_groups(tmp_path / "absent") == []


# -- generation ----------------------------------------------------------------------------------


def test_generation_is_minted_once_for_an_empty_directory(tmp_path: Path) -> None:
    first = ensure_generation(tmp_path)
    raw = (tmp_path / GENERATION_FILE).read_bytes()
    assert first is not None and first.strip()
    assert ensure_generation(tmp_path) == first
    assert (tmp_path / GENERATION_FILE).read_bytes() == raw
    assert read_generation(tmp_path) == first
    assert sorted(p.name for p in tmp_path.iterdir()) == [GENERATION_FILE]


def test_an_existing_generation_is_never_overwritten(tmp_path: Path) -> None:
    (tmp_path / GENERATION_FILE).write_text('{"generation": "published-elsewhere"}')
    assert ensure_generation(tmp_path) == "published-elsewhere"
    assert (tmp_path / GENERATION_FILE).read_text() == '{"generation": "published-elsewhere"}'


@pytest.mark.parametrize(
    "content",
    ['{"generation": "  "}', '{"generation": 7}', "[]", "not json", '{"other": "x"}', ""],
    ids=["blank", "number", "array", "garbage", "no-member", "empty-file"],
)
def test_an_unreadable_generation_reads_as_unknown_and_is_not_replaced(
    tmp_path: Path, content: str
) -> None:
    (tmp_path / GENERATION_FILE).write_text(content)
    assert read_generation(tmp_path) is None
    assert ensure_generation(tmp_path) is None
    assert (tmp_path / GENERATION_FILE).read_text() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == [GENERATION_FILE]


def test_a_populated_directory_without_generation_stays_without_one(tmp_path: Path) -> None:
    write_stream(tmp_path, "a.jsonl", range(3))
    assert ensure_generation(tmp_path) is None
    assert not (tmp_path / GENERATION_FILE).exists()


def test_a_missing_generation_reads_as_unknown(tmp_path: Path) -> None:
    assert read_generation(tmp_path) is None
    assert read_generation(tmp_path / "absent") is None


# -- first and last seq, file order --------------------------------------------------------------


def test_first_and_last_seq_skip_unparseable_lines_and_a_torn_tail(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_bytes(b"garbage\n[1]\n" + line(4) + line(5) + b"{bad\n" + line(6) + b'{"seq": 7, "t')
    assert first_seq(path) == 4
    assert last_seq(path) == 6


def test_seq_must_be_a_non_negative_integer(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_bytes(b'{"seq": true}\n{"seq": -1}\n{"seq": "3"}\n{"seq": 1.5}\n' + line(2))
    assert first_seq(path) == 2
    assert last_seq(path) == 2


def test_last_seq_looks_back_past_a_long_unparseable_tail(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_bytes(line(0) + line(1) + b"x" * 200_000 + b"\n" + b"y" * 70_000 + b"\n")
    assert last_seq(path) == 1


def test_files_without_a_parseable_seq_have_no_bounds(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    junk = tmp_path / "junk.jsonl"
    junk.write_bytes(b"junk\n")
    for path in (empty, junk, tmp_path / "absent.jsonl"):
        assert first_seq(path) is None
        assert last_seq(path) is None


def test_files_are_ordered_by_first_seq_not_by_name(tmp_path: Path) -> None:
    write_stream(tmp_path, "20990101_000000_ffffff_0000.jsonl", range(3))
    write_stream(tmp_path, "19700101_000000_000000_0000.jsonl", range(10, 12))
    write_stream(tmp_path, "50000101_000000_aaaaaa_0000.jsonl", range(3, 10))
    (tmp_path / "00-junk.jsonl").write_bytes(b"junk\n")
    (tmp_path / "01-empty.jsonl").write_bytes(b"")
    (tmp_path / "notes.txt").write_text("not a stream file")
    assert [p.name for p in ordered_files(tmp_path)] == [
        "20990101_000000_ffffff_0000.jsonl",
        "50000101_000000_aaaaaa_0000.jsonl",
        "19700101_000000_000000_0000.jsonl",
        "00-junk.jsonl",
        "01-empty.jsonl",
    ]


def test_ordered_files_of_a_missing_directory_is_empty(tmp_path: Path) -> None:
    assert ordered_files(tmp_path / "absent") == []


# -- bounds cache --------------------------------------------------------------------------------


def test_bounds_are_the_lowest_first_and_highest_last_seq(tmp_path: Path) -> None:
    write_stream(tmp_path, "b.jsonl", range(5, 9), tail=b'{"seq": 99, "to')
    write_stream(tmp_path, "a.jsonl", range(2, 5))
    assert read_bounds(tmp_path) == Bounds(2, 8)
    cache = json.loads((tmp_path / BOUNDS_FILE).read_text())
    assert (cache["min_seq"], cache["max_seq"]) == (2, 8)
    assert (cache["min_seq_file"], cache["max_seq_file"]) == ("a.jsonl", "b.jsonl")


def test_bounds_of_an_empty_or_missing_directory_are_unknown(tmp_path: Path) -> None:
    assert read_bounds(tmp_path) == Bounds(None, None)
    assert read_bounds(tmp_path / "absent") == Bounds(None, None)
    assert not (tmp_path / BOUNDS_FILE).exists()


def test_read_bounds_can_leave_the_cache_unwritten(tmp_path: Path) -> None:
    write_stream(tmp_path, "a.jsonl", range(3))
    assert read_bounds(tmp_path, write_cache=False) == Bounds(0, 2)
    assert not (tmp_path / BOUNDS_FILE).exists()


def _doctor_cache(directory: Path, **changes: object) -> None:
    cache_path = directory / BOUNDS_FILE
    cache = json.loads(cache_path.read_text())
    cache.update(changes)
    cache_path.write_text(json.dumps(cache))


def test_a_matching_bounds_cache_is_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, first in (("a.jsonl", 0), ("b.jsonl", 3), ("c.jsonl", 6)):
        write_stream(tmp_path, name, range(first, first + 3))
    read_bounds(tmp_path)
    reads: list[str] = []
    for name in ("first_seq", "last_seq"):
        real = getattr(layout, name)
        monkeypatch.setattr(layout, name, lambda p, real=real: reads.append(p.name) or real(p))
    assert read_bounds(tmp_path) == Bounds(0, 8)
    # The cache was read instead of a rescan: only the two files it names were checked.
    assert sorted(reads) == ["a.jsonl", "c.jsonl"]


@pytest.mark.parametrize("resealed", [False, True])
def test_a_bounds_cache_the_wal_contradicts_is_derived_again(
    tmp_path: Path, resealed: bool
) -> None:
    """A damaged seq in the cache (its checksum made to match, or not) is never trusted: the
    next seq is derived from it."""
    write_stream(tmp_path, "a.jsonl", range(3))
    read_bounds(tmp_path)
    cache_path = tmp_path / BOUNDS_FILE
    cache = json.loads(cache_path.read_text())
    cache["max_seq"] = 1
    if resealed:
        del cache["crc"]
        cache["crc"] = layout._manifest_crc(cache)
    cache_path.write_text(json.dumps(cache))
    assert read_bounds(tmp_path) == Bounds(0, 2)
    assert json.loads(cache_path.read_text())["max_seq"] == 2


def test_the_bounds_cache_is_rescanned_when_the_last_file_grows(tmp_path: Path) -> None:
    path = write_stream(tmp_path, "a.jsonl", range(3))
    read_bounds(tmp_path)
    _doctor_cache(tmp_path, max_seq=200)
    with path.open("ab") as fh:
        fh.write(line(3))
    assert read_bounds(tmp_path) == Bounds(0, 3)
    assert json.loads((tmp_path / BOUNDS_FILE).read_text())["max_seq"] == 3


def test_the_bounds_cache_is_rescanned_when_a_file_is_added_or_removed(tmp_path: Path) -> None:
    write_stream(tmp_path, "a.jsonl", range(3))
    read_bounds(tmp_path)
    _doctor_cache(tmp_path, max_seq=200)
    extra = write_stream(tmp_path, "b.jsonl", range(3, 5))
    assert read_bounds(tmp_path) == Bounds(0, 4)
    _doctor_cache(tmp_path, min_seq=100)
    extra.unlink()
    assert read_bounds(tmp_path) == Bounds(0, 2)


def test_the_bounds_cache_is_rescanned_when_the_first_file_shrinks(tmp_path: Path) -> None:
    first = write_stream(tmp_path, "a.jsonl", range(3))
    write_stream(tmp_path, "b.jsonl", range(3, 5))
    read_bounds(tmp_path)
    _doctor_cache(tmp_path, min_seq=100)
    first.write_bytes(line(1) + line(2))
    assert read_bounds(tmp_path) == Bounds(1, 4)


@pytest.mark.parametrize(
    "content",
    [
        "not json",
        "",
        "[]",
        "null",
        '"text"',
        "7",
        "{}",
        '{"file_set_fingerprint": 1}',
    ],
    ids=["garbage", "empty", "array", "null", "string", "number", "no-members", "partial"],
)
def test_a_corrupt_bounds_cache_is_rescanned_and_rewritten(tmp_path: Path, content: str) -> None:
    write_stream(tmp_path, "a.jsonl", range(4))
    (tmp_path / BOUNDS_FILE).write_text(content)
    assert read_bounds(tmp_path) == Bounds(0, 3)
    assert json.loads((tmp_path / BOUNDS_FILE).read_text())["max_seq"] == 3


@pytest.mark.parametrize(
    "changes",
    [
        {"max_seq_file_size": "x"},
        {"min_seq_file_size": "x"},
        {"max_seq_file": ["a.jsonl"]},
        {"min_seq": "0"},
        {"max_seq": "3"},
        {"max_seq": True},
        {"max_seq": -1},
    ],
    ids=str,
)
def test_a_bounds_cache_with_wrongly_typed_members_is_rescanned(
    tmp_path: Path, changes: dict[str, object]
) -> None:
    write_stream(tmp_path, "a.jsonl", range(4))
    read_bounds(tmp_path)
    _doctor_cache(tmp_path, **changes)
    assert read_bounds(tmp_path) == Bounds(0, 3)


def test_bounds_leave_no_temporary_files(tmp_path: Path) -> None:
    write_stream(tmp_path, "a.jsonl", range(2))
    read_bounds(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [BOUNDS_FILE, "a.jsonl"]
