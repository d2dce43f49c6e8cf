"""lcg.wal.writer: seq continuity, rotation, whole batches, undo of the last batch, torn tails."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from lcg.errors import ConflictError, WalError
from lcg.wal.layout import GENERATION_FILE, ordered_files, read_generation
from lcg.wal.reader import ReadStats, iter_records
from lcg.wal.records import Op, encode_line
from lcg.wal.writer import GroupStream, Wal

FILE_NAME = re.compile(r"^\d{8}_\d{6}_[0-9a-f]{6}_\d{4}\.jsonl$")


def ops(n: int, size: int = 0) -> list[Op]:
    return [Op("episode.delete", {"uuid": f"u{i}", "pad": "x" * size}) for i in range(n)]


def stream(directory: Path, max_bytes: int = 0, max_events: int = 10_000) -> GroupStream:
    return GroupStream("g", directory, max_bytes, max_events)


def seqs_by_file(directory: Path) -> list[list[int]]:
    return [
        [json.loads(raw)["seq"] for raw in path.read_bytes().splitlines()]
        for path in ordered_files(directory)
    ]


def all_seqs(directory: Path) -> list[int]:
    return [r.seq for r in iter_records(directory)]


def test_seqs_start_at_zero_and_continue_across_writer_instances(tmp_path: Path) -> None:
    first = stream(tmp_path)
    assert first.append(ops(3)) == (0, 2)
    assert first.append(ops(1)) == (3, 3)
    first.close()
    second = stream(tmp_path)
    assert second.next_seq == 4
    assert second.append(ops(2)) == (4, 5)
    second.close()
    assert all_seqs(tmp_path) == [0, 1, 2, 3, 4, 5]
    assert len(ordered_files(tmp_path)) == 2  # each writer starts its own file


def test_seqs_continue_after_the_highest_seq_on_disk_even_with_gaps(tmp_path: Path) -> None:
    (tmp_path / "old.jsonl").write_bytes(
        encode_line(0, "", Op("group.purge", {})) + encode_line(41, "", Op("group.purge", {}))
    )
    writer = stream(tmp_path)
    assert writer.append(ops(1)) == (42, 42)
    writer.close()


def test_wal_streams_resume_after_a_dropped_stream(tmp_path: Path) -> None:
    wal = Wal(tmp_path)
    assert wal.append("g", ops(2)) == (0, 1)
    wal.drop_stream("g")
    assert wal.append("g", ops(1)) == (2, 2)
    wal.close()
    wal = Wal(tmp_path)
    assert wal.append("g", ops(1)) == (3, 3)
    wal.close()


def test_lines_are_compact_json_with_seq_ts_op_data_in_order(tmp_path: Path) -> None:
    writer = stream(tmp_path)
    writer.append([Op("episode.delete", {"uuid": "é"})])
    writer.close()
    (path,) = ordered_files(tmp_path)
    assert FILE_NAME.match(path.name)
    raw = path.read_bytes()
    assert raw.endswith(b"\n") and raw.count(b"\n") == 1
    record = json.loads(raw)
    assert list(record) == ["seq", "ts", "op", "data", "at", "crc"]  # `at`: its place in the batch
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00", record["ts"])
    assert record["data"] == {"uuid": "é"}
    assert b": " not in raw and b", " not in raw


def test_a_new_stream_directory_gets_a_generation(tmp_path: Path) -> None:
    writer = stream(tmp_path / "g")
    assert writer.generation is not None
    assert read_generation(tmp_path / "g") == writer.generation
    writer.close()
    assert stream(tmp_path / "g").generation == writer.generation


def test_a_populated_directory_without_a_generation_is_not_given_one(tmp_path: Path) -> None:
    (tmp_path / "old.jsonl").write_bytes(encode_line(0, "", Op("group.purge", {})))
    writer = stream(tmp_path)
    assert writer.generation is None
    assert not (tmp_path / GENERATION_FILE).exists()


def test_rotation_by_events_starts_a_new_file_before_passing_the_limit(tmp_path: Path) -> None:
    writer = stream(tmp_path, max_events=3)
    for _ in range(4):
        writer.append(ops(1))
    writer.append(ops(2))
    writer.append(ops(1))
    writer.close()
    assert seqs_by_file(tmp_path) == [[0, 1, 2], [3, 4, 5], [6]]
    assert writer.rotations == 2


def test_rotation_by_bytes_starts_a_new_file_before_passing_the_limit(tmp_path: Path) -> None:
    size = len(encode_line(0, "2024-01-01T00:00:00.000000+00:00", ops(1, 100)[0]))
    writer = stream(tmp_path, max_bytes=2 * size + size // 2)
    for _ in range(5):
        writer.append(ops(1, 100))
    writer.close()
    assert seqs_by_file(tmp_path) == [[0, 1], [2, 3], [4]]
    assert all(p.stat().st_size <= 2 * size + size // 2 for p in ordered_files(tmp_path))


def test_zero_max_bytes_disables_rotation_by_bytes(tmp_path: Path) -> None:
    writer = stream(tmp_path, max_bytes=0, max_events=100)
    for _ in range(10):
        writer.append(ops(1, 1000))
    writer.close()
    assert len(ordered_files(tmp_path)) == 1


def test_an_oversized_batch_is_written_whole_in_a_file_of_its_own(tmp_path: Path) -> None:
    writer = stream(tmp_path, max_events=2, max_bytes=200)
    writer.append(ops(1))
    writer.append(ops(5, 100))  # more events and more bytes than a file may hold
    writer.append(ops(1))
    writer.close()
    assert seqs_by_file(tmp_path) == [[0], [1, 2, 3, 4, 5], [6]]


def test_an_oversized_first_batch_goes_into_the_first_file(tmp_path: Path) -> None:
    writer = stream(tmp_path, max_events=2)
    writer.append(ops(4))
    writer.close()
    assert seqs_by_file(tmp_path) == [[0, 1, 2, 3]]
    assert writer.rotations == 0


def test_an_empty_batch_is_refused(tmp_path: Path) -> None:
    writer = stream(tmp_path)
    with pytest.raises(ValueError):
        writer.append([])
    assert writer.next_seq == 0


def test_truncate_from_undoes_the_latest_batch(tmp_path: Path) -> None:
    writer = stream(tmp_path)
    writer.append(ops(2))
    (path,) = ordered_files(tmp_path)
    kept = path.read_bytes()
    assert writer.append(ops(3)) == (2, 4)
    writer.truncate_from(2)
    assert path.read_bytes() == kept
    assert writer.next_seq == 2
    assert writer.append(ops(1)) == (2, 2)
    writer.close()
    assert all_seqs(tmp_path) == [0, 1, 2]


def test_truncate_from_restores_the_rotation_counters(tmp_path: Path) -> None:
    writer = stream(tmp_path, max_events=3)
    writer.append(ops(2))
    writer.append(ops(1))
    writer.truncate_from(2)
    writer.append(ops(1))  # fits again: 2 + 1 <= 3
    writer.close()
    assert seqs_by_file(tmp_path) == [[0, 1, 2]]


def test_truncate_from_after_a_rotation_leaves_the_earlier_file_intact(tmp_path: Path) -> None:
    writer = stream(tmp_path, max_events=2)
    writer.append(ops(2))
    writer.append(ops(2))
    writer.truncate_from(2)
    assert writer.append(ops(1)) == (2, 2)
    writer.close()
    assert all_seqs(tmp_path) == [0, 1, 2]


@pytest.mark.parametrize(
    "first_seq", [0, 1, 3, 99], ids=["older-batch", "inside-an-older-batch", "next", "far"]
)
def test_truncate_from_refuses_anything_but_the_latest_batch(
    tmp_path: Path, first_seq: int
) -> None:
    writer = stream(tmp_path)
    writer.append(ops(2))
    writer.append(ops(1))  # the latest batch starts at 2
    (path,) = ordered_files(tmp_path)
    before = path.read_bytes()
    with pytest.raises(WalError):
        writer.truncate_from(first_seq)
    assert path.read_bytes() == before
    assert writer.next_seq == 3
    writer.close()


def test_the_latest_batch_can_be_undone_only_once(tmp_path: Path) -> None:
    writer = stream(tmp_path)
    writer.append(ops(2))
    writer.append(ops(1))
    writer.truncate_from(2)
    (path,) = ordered_files(tmp_path)
    before = path.read_bytes()
    for first_seq in (2, 0):
        with pytest.raises(WalError):
            writer.truncate_from(first_seq)
    assert path.read_bytes() == before
    writer.close()


def test_truncate_from_on_a_fresh_stream_is_refused(tmp_path: Path) -> None:
    with pytest.raises(WalError):
        stream(tmp_path).truncate_from(0)


def test_a_torn_final_line_is_cut_when_the_stream_is_opened(tmp_path: Path) -> None:
    writer = stream(tmp_path)
    writer.append(ops(3))
    writer.close()
    (path,) = ordered_files(tmp_path)
    good = path.read_bytes()
    torn = b'{"seq":3,"ts":"2024-01-01T00:00:00.000000+00:00","op":"episode.de'
    path.write_bytes(good + torn)
    reopened = stream(tmp_path)
    assert reopened.torn_tail is not None
    assert reopened.torn_tail.path == path
    assert reopened.torn_tail.bytes_dropped == len(torn)
    assert path.read_bytes() == good
    assert reopened.append(ops(1)) == (3, 3)
    reopened.close()
    stats = ReadStats()
    assert [r.seq for r in iter_records(tmp_path, stats=stats)] == [0, 1, 2, 3]
    assert (stats.torn_tail, stats.unparseable) == (0, 0)


def test_an_unparseable_final_line_is_cut_when_the_stream_is_opened(tmp_path: Path) -> None:
    writer = stream(tmp_path)
    writer.append(ops(2))
    writer.close()
    (path,) = ordered_files(tmp_path)
    good = path.read_bytes()
    path.write_bytes(good + b"{not json}\n")
    reopened = stream(tmp_path)
    assert reopened.torn_tail is not None and reopened.torn_tail.bytes_dropped == 11
    assert path.read_bytes() == good
    reopened.close()


def test_a_file_holding_only_a_torn_line_is_emptied(tmp_path: Path) -> None:
    writer = stream(tmp_path)
    writer.append(ops(2))
    writer.close()
    (tmp_path / "99999999_999999_ffffff_0000.jsonl").write_bytes(b'{"seq":2,"ts":"20')
    reopened = stream(tmp_path)
    assert reopened.torn_tail is not None and reopened.torn_tail.bytes_dropped == 17
    assert reopened.next_seq == 2
    reopened.close()


@pytest.mark.parametrize(
    "content",
    [b"", b"\n", b'{"seq":0,"ts":"","op":"group.purge","data":{}}\n'],
    ids=["empty", "blank-line", "clean"],
)
def test_a_clean_stream_is_left_untouched(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "a.jsonl"
    path.write_bytes(content)
    writer = stream(tmp_path)
    assert writer.torn_tail is None
    assert path.read_bytes() == content
    writer.close()


def test_only_the_latest_file_is_repaired(tmp_path: Path) -> None:
    early = tmp_path / "b.jsonl"
    early.write_bytes(encode_line(0, "", Op("group.purge", {})) + b"{torn")
    late = tmp_path / "a.jsonl"
    late.write_bytes(encode_line(1, "", Op("group.purge", {})))
    writer = stream(tmp_path)
    assert writer.torn_tail is None
    assert early.read_bytes().endswith(b"{torn")
    writer.close()


def test_open_all_reports_every_repaired_group(tmp_path: Path) -> None:
    wal = Wal(tmp_path)
    wal.append("a", ops(1))
    wal.append("team/ops", ops(1))
    wal.append("clean", ops(1))
    wal.close()
    for group in ("a", "team%2Fops"):
        (path,) = ordered_files(tmp_path / group)
        path.write_bytes(path.read_bytes() + b'{"seq":1')
    wal = Wal(tmp_path)
    torn = wal.open_all()
    assert sorted(t.group_id for t in torn) == ["a", "team/ops"]
    assert all(t.bytes_dropped == 8 for t in torn)
    wal.close()


def test_a_group_colliding_by_case_with_an_existing_directory_is_refused(tmp_path: Path) -> None:
    wal = Wal(tmp_path)
    wal.append("Team", ops(1))
    with pytest.raises(ConflictError) as info:
        wal.stream("team")
    assert "team" in info.value.wire_message()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["Team"]
    wal.close()


# -- multi-group commits: a crash between two groups' appends -------------------------


def _commit(wal: Wal, parts: list[tuple[str, int]], *, stop_after: int | None = None) -> None:
    """Append a multi-group commit's batches as the engine does; `stop_after` appends only the
    first that many (a crash between two appends)."""
    mark = wal.plan_commit(parts)
    assert mark is not None
    for i, (group, n) in enumerate(parts):
        if stop_after is not None and i >= stop_after:
            return
        wal.stream(group).append(ops(n), mark)


def test_a_commit_that_reached_every_group_is_kept(tmp_path: Path) -> None:
    wal = Wal(tmp_path)
    wal.append("a", ops(2))
    _commit(wal, [("a", 1), ("b", 2)])
    wal.close()
    reopened = Wal(tmp_path)
    assert reopened.open_all() == []
    assert all_seqs(tmp_path / "a") == [0, 1, 2]
    assert all_seqs(tmp_path / "b") == [0, 1]
    reopened.close()


def test_a_commit_cut_short_between_groups_is_cut_from_the_groups_it_reached(
    tmp_path: Path,
) -> None:
    wal = Wal(tmp_path)
    wal.append("a", ops(2))
    wal.append("c", ops(1))
    _commit(wal, [("a", 1), ("c", 2), ("b", 3)], stop_after=2)
    wal.close()
    reopened = Wal(tmp_path)
    torn = sorted(reopened.open_all(), key=lambda t: t.group_id)
    assert [(t.group_id, t.first_seq, t.lines, t.commit_groups) for t in torn] == [
        ("a", 2, 1, ("a", "b", "c")),
        ("c", 1, 2, ("a", "b", "c")),
    ]
    assert torn[0].to_wire()["commit_groups"] == ["a", "b", "c"]
    assert all(t.bytes_dropped > 0 for t in torn)
    assert all_seqs(tmp_path / "a") == [0, 1]
    assert all_seqs(tmp_path / "c") == [0]
    # Writing resumes at the seqs the cut batches had taken.
    assert reopened.append("a", ops(1)) == (2, 2)
    assert reopened.stream("c").next_seq == 1
    reopened.close()


def test_a_commit_with_two_batches_in_one_group_is_cut_whole(tmp_path: Path) -> None:
    wal = Wal(tmp_path)
    wal.append("a", ops(1))
    _commit(wal, [("a", 1), ("a", 2), ("b", 1)], stop_after=2)
    wal.close()
    reopened = Wal(tmp_path)
    torn = reopened.open_all()
    assert [(t.group_id, t.first_seq, t.lines) for t in torn] == [("a", 2, 2), ("a", 1, 1)]
    assert all_seqs(tmp_path / "a") == [0]
    reopened.close()


def test_a_torn_last_append_of_a_commit_cuts_the_whole_commit(tmp_path: Path) -> None:
    wal = Wal(tmp_path)
    _commit(wal, [("a", 1), ("b", 2)])
    wal.close()
    last = ordered_files(tmp_path / "b")[-1]
    last.write_bytes(last.read_bytes()[:-20])  # b's batch torn by the crash
    reopened = Wal(tmp_path)
    torn = sorted(reopened.open_all(), key=lambda t: t.group_id)
    assert [(t.group_id, t.commit_groups) for t in torn] == [("a", ("a", "b")), ("b", ())]
    assert all_seqs(tmp_path / "a") == []
    assert all_seqs(tmp_path / "b") == []
    reopened.close()
