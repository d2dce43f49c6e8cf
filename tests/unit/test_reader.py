"""lcg.wal.reader: records in seq order, with honest counts of what was passed over."""

from __future__ import annotations

from pathlib import Path

import pytest

from lcg.wal.reader import ReadStats, iter_records, parse_line
from lcg.wal.records import Op, WalRecord, encode_batch, encode_line

TS = "2024-01-01T00:00:00.000000+00:00"


def line(seq: int) -> bytes:
    return encode_line(seq, TS, Op("episode.delete", {"uuid": f"u{seq}"}))


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
    assert list(iter_records(tmp_path)) == [WalRecord(7, TS, "episode.delete", {"uuid": "u7"})]


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
