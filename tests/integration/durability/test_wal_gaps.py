"""What the WAL lost is reported, kept beside the WAL, and never served by halves: a missing
file (a seq gap), a batch that cannot be applied, seqs only a deleted database held; a rebuild
leaves out the facts whose endpoints it could not restore."""

from __future__ import annotations

import pytest
from graph_invariants import assert_no_dangling_rows
from rebuild_jobs import rebuild_and_wait
from wal_faults import GROUP, commit_episode, lines, problems, relate, seqs, uid

from lcg import Fact, Settings, open_engine
from lcg.models import DEFAULT_GROUP_ID
from lcg.service.registry import dispatch
from lcg.storage.store import delete_database_files
from lcg.wal.layout import PROBLEMS_FILE, group_dir, ordered_files
from lcg.wal.records import Op, fact_op
from lcg.wal.writer import Wal

pytestmark = pytest.mark.anyio

SETTINGS_OVERRIDES = {"wal_max_events_per_file": 8}  # one episode batch per file


async def test_a_missing_wal_file_is_reported_and_a_rebuild_serves_no_fact_without_endpoints(
    settings: Settings,
) -> None:
    engine = open_engine(settings)
    try:
        await commit_episode(engine, 0, [1, 2, 3])
        await commit_episode(engine, 1, [4, 5, 6])
        await commit_episode(engine, 2, [7, 8, 9])
        await relate(engine, 4, 7, 3)  # a fact from an entity of the file deleted below
    finally:
        engine.close()
    files = ordered_files(group_dir(settings.wal_dir, GROUP))
    assert len(files) == 4
    files[1].unlink()  # seqs 8..15
    gap = {"group_id": GROUP, "kind": "seq_gap", "file": files[2].name}
    gap |= {"first_seq": 8, "last_seq": 15}

    engine = open_engine(settings)  # the database is whole: nothing to replay, yet reported
    try:
        assert await problems(engine) == [gap]
    finally:
        engine.close()

    delete_database_files(settings.db_path)
    engine = open_engine(settings)
    try:
        assert_no_dangling_rows(engine, "startup over a missing WAL file")
        dangling = {
            "group_id": GROUP,
            "kind": "fact_without_endpoints",
            "file": None,
            "first_seq": None,
            "last_seq": None,
            "count": 1,
            "facts": [uid(30_003)],
        }
        assert await problems(engine) == [gap, dangling]
        await rebuild_and_wait(engine, {"group_id": GROUP, "force_clear": True})
        assert_no_dangling_rows(engine, "rebuild over a missing WAL file")
        assert await problems(engine) == [gap, dangling]
    finally:
        engine.close()


async def test_seqs_only_a_deleted_database_held_stay_reported_and_are_never_reused(
    settings: Settings,
) -> None:
    """The WAL loses its last batch (seq 2), the database is ahead and says so; then the
    database is deleted: the record of seq 2 is beside the WAL, so it is still reported and
    seq 2 is still never handed out again."""
    engine = open_engine(settings)
    try:
        for name in ("Ada", "Grace", "Linus"):
            await dispatch(engine, "knowledge_assert_entity", {"name": name, "group_id": GROUP})
    finally:
        engine.close()
    path, _, raw = lines(settings)[-1]
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - len(raw) - 1])  # seq 2, a whole line, gone
    engine = open_engine(settings)
    try:
        found = await problems(engine)
    finally:
        engine.close()
    ahead = {"group_id": GROUP, "kind": "database_ahead_of_wal", "file": None}
    ahead |= {"first_seq": 2, "last_seq": 2}
    assert found == [ahead]

    delete_database_files(settings.db_path)
    engine = open_engine(settings)
    try:
        assert await problems(engine) == [ahead]
        await dispatch(engine, "knowledge_assert_entity", {"name": "Barbara", "group_id": GROUP})
        assert seqs(settings) == [0, 1, 3]
        assert await problems(engine) == [ahead]  # seq 2 skipped on purpose: no gap
    finally:
        engine.close()
    assert (group_dir(settings.wal_dir, GROUP) / PROBLEMS_FILE).stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("whole", [False, True], ids=["tail", "whole-stream"])
async def test_a_batch_that_cannot_be_applied_is_reported_in_status(
    settings: Settings, whole: bool
) -> None:
    """A well-formed line (its checksum holds) with a timestamp that is not one: its batch is
    not applied, and status says so, whether a tail replay or a whole one met it."""
    engine = open_engine(settings)
    try:
        await dispatch(engine, "knowledge_assert_entity", {"name": "Ada", "group_id": GROUP})
    finally:
        engine.close()
    wal = Wal(settings.wal_dir)
    try:
        bad = {"uuid": uid(1), "name": "Grace", "created_at": "last tuesday"}
        wal.append(
            GROUP,
            [Op("entity.upsert", bad), Op("entity.upsert", {"uuid": uid(2), "name": "Linus"})],
        )
    finally:
        wal.close()
    if whole:
        delete_database_files(settings.db_path)
    engine = open_engine(settings)
    try:
        (found,) = await problems(engine)
        assert {k: found[k] for k in ("group_id", "kind", "first_seq", "last_seq")} == {
            "group_id": GROUP,
            "kind": "batch_failed",
            "first_seq": 1,
            "last_seq": 2,
        }
        assert "last tuesday" in found["error"]
        nodes = await dispatch(engine, "knowledge_get_nodes_by_group", {"group_ids": [GROUP]})
        assert [n["name"] for n in nodes["nodes"]] == ["Ada"]
    finally:
        engine.close()


async def test_a_deleted_first_wal_file_is_reported_at_open(settings: Settings) -> None:
    """No gap between two files shows it: the start record the writer keeps does, before a
    rebuild (the database deleted) would lose what the file held without a word."""
    engine = open_engine(settings)
    try:
        for n in range(3):
            await commit_episode(engine, n, [3 * n + 1, 3 * n + 2, 3 * n + 3])
    finally:
        engine.close()
    files = ordered_files(group_dir(settings.wal_dir, GROUP))
    assert len(files) == 3
    files[0].unlink()  # seqs 0..7
    start = {"group_id": GROUP, "kind": "wal_start_missing", "file": files[1].name}
    start |= {"first_seq": 0, "last_seq": 7}

    engine = open_engine(settings)
    try:
        assert await problems(engine) == [start]
    finally:
        engine.close()
    delete_database_files(settings.db_path)
    engine = open_engine(settings)
    try:
        assert await problems(engine) == [start]  # a whole replay keeps it: it cannot re-find it
        await dispatch(engine, "knowledge_assert_entity", {"name": "Ada", "group_id": GROUP})
        assert await problems(engine) == [start]
    finally:
        engine.close()


async def test_a_stream_from_before_start_records_is_adopted_not_flagged(
    settings: Settings,
) -> None:
    engine = open_engine(settings)
    try:
        for n in range(2):
            await commit_episode(engine, n, [3 * n + 1, 3 * n + 2, 3 * n + 3])
    finally:
        engine.close()
    directory = group_dir(settings.wal_dir, GROUP)
    (directory / ".wal-start.json").unlink()  # as an older lcg left it
    engine = open_engine(settings)
    try:
        assert await problems(engine) == []
    finally:
        engine.close()
    assert (directory / ".wal-start.json").stat().st_mode & 0o777 == 0o600
    ordered_files(directory)[0].unlink()
    engine = open_engine(settings)
    try:
        assert [p["kind"] for p in await problems(engine)] == ["wal_start_missing"]
    finally:
        engine.close()


def _fact_line(n: int, source: int, target: int) -> Op:
    return fact_op(
        Fact(uid(30_000 + n), GROUP, uid(source), uid(target), "KNOWS", f"{source} knows {target}")
    )


async def test_a_tail_replay_leaves_out_a_fact_whose_endpoint_is_missing(
    settings: Settings,
) -> None:
    """The database is behind its WAL (its last batch never reached it), and that batch holds
    a fact to an entity no line restores: the tail replay leaves the fact out, as a bulk one
    would, and says so."""
    engine = open_engine(settings)
    try:
        await commit_episode(engine, 0, [1, 2, 3])
    finally:
        engine.close()
    wal = Wal(settings.wal_dir)
    try:  # appended with no database commit: what a tail replay applies at the next open
        wal.append(GROUP, [_fact_line(1, 1, 99), _fact_line(2, 1, 2)])
    finally:
        wal.close()
    engine = open_engine(settings)
    try:
        assert_no_dangling_rows(engine, "a tail replay over a fact to a missing entity")
        with engine.reader() as conn:
            kept = conn.facts_by_uuids([uid(30_001), uid(30_002)])
        assert sorted(kept) == [uid(30_002)]
        assert await problems(engine) == [
            {
                "group_id": GROUP,
                "kind": "fact_without_endpoints",
                "file": None,
                "first_seq": None,
                "last_seq": None,
                "count": 1,
                "facts": [uid(30_001)],
            }
        ]
    finally:
        engine.close()


async def test_a_replayed_raw_statement_that_deletes_an_endpoint_leaves_no_fact_without_it(
    settings: Settings,
) -> None:
    engine = open_engine(settings)
    try:
        await commit_episode(engine, 0, [1, 2, 3])  # facts 1->2, 2->3, 3->1
    finally:
        engine.close()
    wal = Wal(settings.wal_dir)
    try:
        query = f"MATCH (e:Entity) WHERE e.uuid = '{uid(2)}' DETACH DELETE e"
        wal.append(DEFAULT_GROUP_ID, [Op("cypher.exec", {"query": query})])
    finally:
        wal.close()
    engine = open_engine(settings)
    try:
        assert_no_dangling_rows(engine, "a replayed statement deleting an endpoint")
        with engine.reader() as conn:
            kept = conn.facts_by_uuids([uid(20_000), uid(20_001), uid(20_002)])
        assert sorted(kept) == [uid(20_002)]  # 3 -> 1
        (found,) = await problems(engine)
        assert (found["group_id"], found["kind"], found["count"]) == (
            DEFAULT_GROUP_ID,
            "fact_without_endpoints",
            2,
        )
        assert sorted(found["facts"]) == [uid(20_000), uid(20_001)]
    finally:
        engine.close()
