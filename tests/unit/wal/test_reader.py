"""lcg.wal.reader: records in seq order, with honest counts of what was passed over."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest

from lcg.wal.reader import ReadStats, iter_records, parse_line
from lcg.wal.records import Op, WalRecord, encode_batch, encode_line, seal

TS = "2024-01-01T00:00:00.000000+00:00"


def line(seq: int) -> bytes:
    return encode_line(seq, TS, Op("episode.delete", {"uuid": f"u{seq}"}))


def edited(raw: bytes, old: bytes, new: bytes) -> bytes:
    """`raw` with `old` replaced by `new` and its checksum made to match: what a newer lcg (or
    damage a checksum cannot catch) might have written."""
    value = orjson.loads(raw.replace(old, new))
    del value["crc"]
    return seal(orjson.dumps(value))


def read(
    directory: Path, from_seq: int = 0, to_seq: int | None = None
) -> tuple[list[int], ReadStats]:
    stats = ReadStats()
    return [r.seq for r in iter_records(directory, from_seq, to_seq, stats)], stats


def test_files_are_read_in_order_of_their_first_seq_not_their_name(tmp_path: Path) -> None:
    (tmp_path / "a_latest_name.jsonl").write_bytes(line(4) + line(5))
    (tmp_path / "z_earliest_name.jsonl").write_bytes(line(0) + line(1))
    (tmp_path / "m.jsonl").write_bytes(line(2) + line(3))
    seqs, stats = read(tmp_path)
    assert seqs == [0, 1, 2, 3, 4, 5]
    assert (stats.files_total, stats.files_processed) == (3, 3)


def test_records_carry_their_seq_ts_op_and_data(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_bytes(line(7))
    assert list(iter_records(tmp_path)) == [
        WalRecord(7, TS, "episode.delete", {"uuid": "u7"}, more=0, at=0)
    ]


@pytest.mark.parametrize(
    ("from_seq", "to_seq", "expected"),
    [
        (0, None, [0, 1, 2, 3, 4]),
        (2, None, [2, 3, 4]),
        (1, 3, [1, 2, 3]),
        (3, 3, [3]),
        (9, None, []),
    ],
)
def test_records_outside_from_and_to_seq_are_skipped(
    tmp_path: Path, from_seq: int, to_seq: int | None, expected: list[int]
) -> None:
    (tmp_path / "a.jsonl").write_bytes(b"".join(line(s) for s in range(3)))
    (tmp_path / "b.jsonl").write_bytes(line(3) + line(4))
    seqs, stats = read(tmp_path, from_seq=from_seq, to_seq=to_seq)
    assert seqs == expected
    assert stats.unparseable == 0


@pytest.mark.parametrize(
    "bad",
    [
        b"not json",
        b"[1, 2]",
        b'"text"',
        b'{"seq": -1, "ts": "", "op": "x", "data": {}}',
        b'{"seq": true, "ts": "", "op": "x", "data": {}}',
        b'{"seq": 1.0, "ts": "", "op": "x", "data": {}}',
        b'{"seq": "1", "ts": "", "op": "x", "data": {}}',
        b'{"ts": "", "op": "x", "data": {}}',
        b'{"seq": 1, "ts": "", "op": 5, "data": {}}',
        b'{"seq": 1, "ts": "", "op": "x", "data": []}',
        b'{"seq": 1, "ts": "", "op": "x"}',
        b'{"seq":1,"ts":"","op":"x","da',
    ],
    ids=[
        "garbage",
        "array",
        "string",
        "negative-seq",
        "boolean-seq",
        "float-seq",
        "string-seq",
        "no-seq",
        "numeric-op",
        "list-data",
        "no-data",
        "cut-short",
    ],
)
def test_unparseable_lines_in_the_middle_are_counted_and_passed_over(
    tmp_path: Path, bad: bytes
) -> None:
    (tmp_path / "a.jsonl").write_bytes(line(0) + bad + b"\n" + line(1))
    seqs, stats = read(tmp_path)
    assert seqs == [0, 1]
    assert (stats.unparseable, stats.torn_tail) == (1, 0)
    assert stats.unparseable_samples == ["a.jsonl:2"]
    assert parse_line(bad) is None


def test_a_torn_final_line_is_counted_apart_from_unparseable_lines(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_bytes(line(0) + b"junk\n" + line(1) + b'{"seq":2,"ts":"20')
    seqs, stats = read(tmp_path)
    assert seqs == [0, 1]
    assert (stats.unparseable, stats.torn_tail) == (1, 1)
    assert stats.unparseable_samples == ["a.jsonl:2"]


def test_an_unparseable_final_line_with_its_newline_is_not_torn(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_bytes(line(0) + b"junk\n")
    _, stats = read(tmp_path)
    assert (stats.unparseable, stats.torn_tail) == (1, 0)


def test_a_complete_final_record_without_its_newline_is_read(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_bytes(line(0) + line(1).rstrip(b"\n"))
    seqs, stats = read(tmp_path)
    assert seqs == [0, 1]
    assert (stats.unparseable, stats.torn_tail) == (0, 0)


def test_blank_lines_are_neither_records_nor_unparseable(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_bytes(b"\n" + line(0) + b"   \n\n" + line(1) + b"\n")
    seqs, stats = read(tmp_path)
    assert seqs == [0, 1]
    assert (stats.unparseable, stats.torn_tail) == (0, 0)


def test_only_five_unparseable_samples_are_kept(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_bytes(b"junk\n" * 8 + line(0))
    seqs, stats = read(tmp_path)
    assert seqs == [0]
    assert stats.unparseable == 8
    assert stats.unparseable_samples == [f"a.jsonl:{n}" for n in range(1, 6)]


def test_a_record_without_a_string_ts_reads_with_an_empty_ts() -> None:
    record = parse_line(b'{"seq": 3, "ts": 12, "op": "group.purge", "data": {}}')
    assert record == WalRecord(3, "", "group.purge", {})


def test_reading_never_modifies_the_files(tmp_path: Path) -> None:
    content = line(0) + b"junk\n" + line(1) + b'{"torn'
    path = tmp_path / "a.jsonl"
    path.write_bytes(content)
    read(tmp_path)
    assert path.read_bytes() == content
    assert [p.name for p in tmp_path.iterdir()] == ["a.jsonl"]


def test_a_missing_directory_reads_as_empty(tmp_path: Path) -> None:
    seqs, stats = read(tmp_path / "absent")
    assert seqs == []
    assert stats.files_total == 0


def _batch(first: int, size: int) -> list[bytes]:
    ops = [Op("group.purge", {}) for _ in range(size)]
    return encode_batch(first, "2024-01-01T00:00:00.000000+00:00", ops)


def test_a_batch_is_yielded_only_once_its_last_line_is_read(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_bytes(b"".join(_batch(0, 3)) + b"".join(_batch(3, 2)[:1]))
    seqs, stats = read(tmp_path)
    assert seqs == [0, 1, 2]
    assert stats.incomplete_batch_lines == 1


def test_a_batch_interrupted_by_another_is_dropped_whole(tmp_path: Path) -> None:
    broken = _batch(0, 3)[:2]  # its third line never made it; the next batch starts at seq 2
    (tmp_path / "a.jsonl").write_bytes(b"".join(broken) + b"".join(_batch(2, 2)))
    seqs, stats = read(tmp_path)
    assert seqs == [2, 3]
    assert stats.incomplete_batch_lines == 2


def test_a_negative_or_non_integer_more_makes_the_line_unparseable() -> None:
    assert parse_line(b'{"seq":1,"ts":"","op":"group.purge","data":{},"more":-1}') is None
    assert parse_line(b'{"seq":1,"ts":"","op":"group.purge","data":{},"more":"2"}') is None


def _episode_batch(first: int, size: int) -> list[bytes]:
    ops = [Op("episode.delete", {"uuid": f"u{first + i}"}) for i in range(size)]
    return encode_batch(first, TS, ops)


@pytest.mark.parametrize("broken", [0, 1, 4, 7])
def test_a_batch_with_an_unreadable_line_is_not_yielded_at_all(tmp_path: Path, broken: int) -> None:
    """The readable lines after (or before) a corrupt one are no batch."""
    lines = _episode_batch(1, 8)
    lines[broken] = b'{"seq":' + b"#" * 20 + b"\n"
    (tmp_path / "a.jsonl").write_bytes(line(0) + b"".join(lines) + line(9))
    seqs, stats = read(tmp_path)
    assert seqs == [0, 9]
    assert stats.unparseable == 1
    assert stats.corrupt_batch_lines == 7
    assert [(x.file, x.first_seq, x.last_seq, x.lines_dropped) for x in stats.lost] == [
        ("a.jsonl", 1, 8, 7)
    ]


@pytest.mark.parametrize("unknown", [0, 3, 7])
def test_a_batch_with_an_unknown_operation_is_not_yielded_at_all(
    tmp_path: Path, unknown: int
) -> None:
    """A line this version cannot apply costs its whole batch, reported like a corrupt one
    (before, it was skipped and the other seven lines applied)."""
    lines = _episode_batch(1, 8)
    lines[unknown] = edited(lines[unknown], b'"episode.delete"', b'"episode.teleport"')
    (tmp_path / "a.jsonl").write_bytes(line(0) + b"".join(lines) + line(9))
    seqs, stats = read(tmp_path)
    assert seqs == [0, 9]
    assert (stats.unrecognised, stats.corrupt_batch_lines, stats.unparseable) == (1, 7, 0)
    assert [(x.file, x.first_seq, x.last_seq, x.lines_dropped) for x in stats.lost] == [
        ("a.jsonl", 1, 8, 8)
    ]


def test_a_single_line_with_an_unknown_operation_is_reported_lost(tmp_path: Path) -> None:
    odd = edited(line(1), b'"episode.delete"', b'"episode.teleport"')
    (tmp_path / "a.jsonl").write_bytes(line(0) + odd + line(2))
    seqs, stats = read(tmp_path)
    assert seqs == [0, 2]
    assert (stats.unrecognised, stats.corrupt_batch_lines) == (1, 0)
    assert [(x.first_seq, x.last_seq, x.lines_dropped) for x in stats.lost] == [(1, 1, 1)]


def test_a_corrupt_first_line_of_a_file_loses_the_batch_it_began(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_bytes(line(0))
    lines = _episode_batch(1, 3)
    (tmp_path / "b.jsonl").write_bytes(b"garbage\n" + lines[1] + lines[2] + line(4))
    seqs, stats = read(tmp_path)
    assert seqs == [0, 4]
    assert [(x.file, x.first_seq, x.last_seq) for x in stats.lost] == [("b.jsonl", 1, 3)]


def test_a_batch_whose_more_was_damaged_into_another_number_is_not_yielded(
    tmp_path: Path,
) -> None:
    lines = _episode_batch(0, 8)
    lines[1] = edited(lines[1], b'"more":6', b'"more":5')
    (tmp_path / "a.jsonl").write_bytes(b"".join(lines) + line(8))
    seqs, _ = read(tmp_path)
    assert seqs == [8]


def test_unreadable_lines_holding_no_seq_cost_nothing(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_bytes(line(0) + b"junk\n" + b"".join(_episode_batch(1, 3)))
    seqs, stats = read(tmp_path)
    assert seqs == [0, 1, 2, 3]
    assert stats.lost == []


def _legacy(raw: bytes) -> bytes:
    """A line as written before lines carried `at` (their place in the batch) or a checksum."""
    return re.sub(rb',"at":\d+|,"crc":"[0-9a-f]{8}"', b"", raw)


def test_a_batch_of_its_own_among_unreadable_lines_is_reported(tmp_path: Path) -> None:
    """A line says it begins its batch (`at` 0): it is applied; the unreadable seq is a loss."""
    (tmp_path / "a.jsonl").write_bytes(line(0) + b"junk\n" + line(2) + line(3))
    seqs, stats = read(tmp_path)
    assert seqs == [0, 2, 3]
    assert [(x.first_seq, x.last_seq, x.lines_dropped) for x in stats.lost] == [(1, 1, 0)]


def test_an_older_line_after_a_gap_of_unreadable_lines_is_not_trusted(tmp_path: Path) -> None:
    """Without `at`, its batch may have begun among the unreadable lines: passed over, reported."""
    content = b"".join(_legacy(x) for x in (line(0), b"junk\n", line(2), line(3)))
    (tmp_path / "a.jsonl").write_bytes(content)
    seqs, stats = read(tmp_path)
    assert seqs == [0, 3]
    assert [(x.first_seq, x.last_seq, x.lines_dropped) for x in stats.lost] == [(1, 2, 1)]


def test_an_older_batch_with_a_corrupt_head_is_not_yielded(tmp_path: Path) -> None:
    lines = [_legacy(x) for x in _episode_batch(1, 8)]
    assert all(b'"at"' not in x for x in lines)
    lines[0] = b"garbage\n"
    (tmp_path / "a.jsonl").write_bytes(_legacy(line(0)) + b"".join(lines) + _legacy(line(9)))
    seqs, stats = read(tmp_path)
    assert seqs == [0, 9]
    assert [(x.first_seq, x.last_seq, x.lines_dropped) for x in stats.lost] == [(1, 8, 7)]


def test_unreadable_lines_ending_a_file_are_a_loss_of_unknown_end(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_bytes(line(0) + b"junk\n")
    (tmp_path / "b.jsonl").write_bytes(line(2))
    seqs, stats = read(tmp_path)
    assert seqs == [0, 2]
    assert [(x.file, x.first_seq, x.last_seq) for x in stats.lost] == [("a.jsonl", 1, None)]


def test_losses_outside_the_range_read_are_not_reported(tmp_path: Path) -> None:
    lines = _episode_batch(1, 3)
    (tmp_path / "a.jsonl").write_bytes(line(0) + b"junk\n" + lines[1] + lines[2] + line(4))
    seqs, stats = read(tmp_path, from_seq=4)
    assert seqs == [4]
    assert stats.lost == []


def test_a_batch_straddling_to_seq_is_left_out_whole(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_bytes(line(0) + b"".join(_episode_batch(1, 3)) + line(4))
    assert read(tmp_path, to_seq=2)[0] == [0]
    assert read(tmp_path, to_seq=3)[0] == [0, 1, 2, 3]


def test_seqs_no_line_holds_are_a_gap(tmp_path: Path) -> None:
    """A file of the stream deleted: nothing unreadable, yet seqs 2..4 are gone."""
    (tmp_path / "a.jsonl").write_bytes(line(0) + line(1))
    (tmp_path / "c.jsonl").write_bytes(line(5) + line(6))
    seqs, stats = read(tmp_path)
    assert seqs == [0, 1, 5, 6]
    assert stats.gaps == [("c.jsonl", 2, 4)] and stats.lost == []


def test_lines_cut_out_of_a_file_are_a_gap(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_bytes(line(0) + line(3))
    assert read(tmp_path)[1].gaps == [("a.jsonl", 1, 2)]


def test_unreadable_lines_are_a_loss_not_a_gap(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_bytes(line(0) + b"junk\n")
    (tmp_path / "b.jsonl").write_bytes(line(2))
    assert read(tmp_path)[1].gaps == []
