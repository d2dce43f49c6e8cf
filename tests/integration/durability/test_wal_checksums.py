"""Every WAL line carries a checksum: single-bit flips anywhere in a WAL are all caught and
reported, none is applied, and no fact is then served without its endpoints; a WAL written
before lines carried checksums is still read."""

from __future__ import annotations

import random
import re

import pytest
from graph_invariants import assert_no_dangling_rows
from rebuild_jobs import rebuild_and_wait
from wal_faults import GROUP, commit_episode, lines, problems

from lcg import Settings, open_engine
from lcg.service.registry import dispatch
from lcg.storage.store import delete_database_files
from lcg.wal.layout import group_dir
from lcg.wal.reader import parse_line

pytestmark = pytest.mark.anyio

FLIPS = 30


def _covered(found: list[dict[str, object]], seq: int) -> bool:
    """Whether a reported problem's seq range takes in `seq` (an open end takes in all)."""
    for problem in found:
        first, last = problem.get("first_seq"), problem.get("last_seq")
        if problem["kind"] == "fact_without_endpoints":
            continue
        lo = first if isinstance(first, int) else 0
        hi = last if isinstance(last, int) else None
        if lo <= seq and (hi is None or seq <= hi):
            return True
    return False


@pytest.mark.slow
async def test_thirty_random_bit_flips_are_all_caught_and_none_is_served(
    settings: Settings,
) -> None:
    engine = open_engine(settings)
    try:
        for n in range(12):
            await commit_episode(engine, n, [3 * n + 1, 3 * n + 2, (3 * n + 5) % 40 + 1])
        for n in range(40):
            await dispatch(
                engine, "knowledge_assert_entity", {"name": f"Solo {n}", "group_id": GROUP}
            )
    finally:
        engine.close()
    written = lines(settings)
    rng = random.Random(20240607)
    chosen = sorted(rng.sample(range(len(written)), FLIPS))
    flipped: list[int] = []  # the seq of each damaged line
    for index in chosen:
        path, at, raw = written[index]
        record = parse_line(raw)
        assert record is not None
        content = path.read_bytes().split(b"\n")
        position = rng.randrange(len(raw))
        damaged = bytearray(raw)
        damaged[position] ^= 1 << rng.randrange(8)
        content[at] = bytes(damaged)
        path.write_bytes(b"\n".join(content))
        flipped.append(record.seq)
    assert len(set(flipped)) == FLIPS

    delete_database_files(settings.db_path)
    engine = open_engine(settings)
    try:
        found = await problems(engine)
        missed = [seq for seq in flipped if not _covered(found, seq)]
        assert missed == [], (missed, found)
        assert_no_dangling_rows(engine, "startup over 30 bit flips")
        await rebuild_and_wait(engine, {"group_id": GROUP, "force_clear": True})
        assert_no_dangling_rows(engine, "rebuild over 30 bit flips")
        found = await problems(engine)
        assert [seq for seq in flipped if not _covered(found, seq)] == []
    finally:
        engine.close()


async def test_a_damaged_line_that_is_still_valid_json_is_not_applied(settings: Settings) -> None:
    """A flip inside a name keeps the line valid JSON: before checksums it was applied."""
    engine = open_engine(settings)
    try:
        await dispatch(engine, "knowledge_assert_entity", {"name": "Ada", "group_id": GROUP})
        await dispatch(engine, "knowledge_assert_entity", {"name": "Grace", "group_id": GROUP})
    finally:
        engine.close()
    path, at, raw = lines(settings)[0]
    content = path.read_bytes().split(b"\n")
    content[at] = raw.replace(b'"Ada"', b'"Ida"')  # 'A' ^ 0x08 = 'I'
    path.write_bytes(b"\n".join(content))
    delete_database_files(settings.db_path)
    engine = open_engine(settings)
    try:
        nodes = await dispatch(engine, "knowledge_get_nodes_by_group", {"group_ids": [GROUP]})
        assert [n["name"] for n in nodes["nodes"]] == ["Grace"]
        (problem,) = await problems(engine)
        # The stream's first line: where its batch began is not known (None), it ends at 0.
        assert (problem["kind"], problem["first_seq"], problem["last_seq"]) == (
            "batch_not_applied",
            None,
            0,
        )
    finally:
        engine.close()


async def test_a_wal_written_before_checksums_is_read_whole(settings: Settings) -> None:
    """Today's lines with their `crc` member taken out are exactly the lines of the format
    before it: such a WAL replays whole and reports nothing."""
    engine = open_engine(settings)
    try:
        await commit_episode(engine, 0, [1, 2, 3])
        await dispatch(engine, "knowledge_assert_entity", {"name": "Ada", "group_id": GROUP})
    finally:
        engine.close()
    for path in group_dir(settings.wal_dir, GROUP).glob("*.jsonl"):
        path.write_bytes(re.sub(rb',"crc":"[0-9a-f]{8}"', b"", path.read_bytes()))
    assert all(b'"crc"' not in raw for _, _, raw in lines(settings))
    delete_database_files(settings.db_path)
    engine = open_engine(settings)
    try:
        nodes = await dispatch(engine, "knowledge_get_nodes_by_group", {"group_ids": [GROUP]})
        assert len(nodes["nodes"]) == 4
        edges = await dispatch(engine, "knowledge_get_edges_by_group", {"group_ids": [GROUP]})
        assert len(edges["edges"]) == 3
        assert await problems(engine) == []
        await dispatch(engine, "knowledge_assert_entity", {"name": "Grace", "group_id": GROUP})
    finally:
        engine.close()
    assert b'"crc"' in lines(settings)[-1][2]  # new lines carry one, in a new file
