"""Background rebuild jobs: `knowledge_rebuild_from_wal` without a progress context starts one,
`knowledge_rebuild_status` polls it (docs/api.md §knowledge_rebuild_from_wal, §knowledge_rebuild_status)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import anyio
import anyio.to_thread
import pytest
from rebuild_jobs import rebuild_and_wait, wait_for_job

from lcg import Engine, Settings, open_engine
from lcg.engine.jobs import JobTable
from lcg.engine.replay import replay_group
from lcg.errors import ConflictError, InvalidRequestError, StorageError
from lcg.service.registry import REGISTRY, Context, dispatch
from lcg.telemetry import ListSink

pytestmark = pytest.mark.anyio

RB = "knowledge_rebuild_from_wal"
ST = "knowledge_rebuild_status"
NAMES = ("Ada", "Grace", "Linus")
STATUS_KEYS = {
    "job_id",
    "status",
    "mutations_replayed",
    "wal_files_processed",
    "wal_files_total",
    "start_time",
    "elapsed_seconds",
    "error",
    "result",
}
WAIT = 30.0


async def _seed(engine: Engine) -> None:
    for name in NAMES:
        await dispatch(engine, "knowledge_assert_entity", {"name": name})


async def _names(engine: Engine) -> set[str]:
    nodes = await dispatch(engine, "knowledge_get_nodes_by_group", {"group_ids": ["liminis"]})
    return {n["name"] for n in nodes["nodes"]}


class Gate:
    """Wraps the engine's replay: reports its first progress frame, then waits to be released."""

    def __init__(self) -> None:
        self.reached = threading.Event()
        self.release = threading.Event()

    def replay(self, *args: Any, **kwargs: Any) -> Any:
        """The real replay, held at its first progress frame."""
        progress = kwargs["progress"]

        def hold(frame: dict[str, Any]) -> None:
            progress(frame)
            if not self.reached.is_set():
                self.reached.set()
                assert self.release.wait(WAIT)

        kwargs["progress"] = hold
        return replay_group(*args, **kwargs)

    async def wait_reached(self) -> None:
        assert await anyio.to_thread.run_sync(self.reached.wait, WAIT)


class Replays:
    """The replay step given to this module's engines: the real one unless a test swaps it."""

    def __init__(self) -> None:
        self.step: Callable[..., Any] = replay_group

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.step(*args, **kwargs)


@pytest.fixture
def replays() -> Replays:
    return Replays()


@pytest.fixture
def jobs() -> JobTable:
    return JobTable()


@pytest.fixture
def engine(
    settings: Settings, events: ListSink, replays: Replays, jobs: JobTable
) -> Iterator[Engine]:
    """An open engine whose replay step and job table the test holds."""
    eng = open_engine(settings, events=events, replay=replays, jobs=jobs)
    try:
        yield eng
    finally:
        eng.close()


@pytest.fixture
def gate(replays: Replays) -> Iterator[Gate]:
    g = Gate()
    replays.step = g.replay
    try:
        yield g
    finally:
        g.release.set()  # never leave a job thread waiting


def test_rebuild_status_is_a_read_method_that_needs_the_database() -> None:
    method = REGISTRY[ST]
    assert method.scope == "read"
    assert method.degraded_ok is False


async def test_a_job_runs_to_completion_with_the_full_result(engine: Engine) -> None:
    await _seed(engine)
    started = await dispatch(engine, RB, {"force_clear": True})
    assert set(started) == {"success", "job_id", "status"}
    assert started["success"] is True and started["status"] == "running"
    status = await wait_for_job(engine, started["job_id"])

    assert set(status) == STATUS_KEYS
    assert status["job_id"] == started["job_id"]
    assert status["status"] == "completed"
    assert status["error"] is None
    assert datetime.fromisoformat(status["start_time"]).tzinfo is not None
    assert isinstance(status["elapsed_seconds"], float) and status["elapsed_seconds"] >= 0
    result = status["result"]
    assert "success" not in result
    assert result["dry_run"] is False
    assert result["group_id"] == "liminis"
    assert result["from_seq"] == 0 and result["to_seq"] is None
    assert result["mutations_replayed"] == len(NAMES)
    assert result["indices_built"] is True
    assert result["reset_detected"] is False
    assert result["cross_group_rebind"] is None
    assert status["mutations_replayed"] == len(NAMES)
    assert status["wal_files_processed"] == result["wal_files_processed"] >= 1
    assert status["wal_files_total"] >= status["wal_files_processed"]
    assert await _names(engine) == set(NAMES)
    # A finished job stays readable, and frozen.
    again = await dispatch(engine, ST, {"job_id": started["job_id"]})
    assert again == status
    # The engine writes on after it.
    await dispatch(engine, "knowledge_assert_entity", {"name": "Barbara"})
    assert await _names(engine) == {*NAMES, "Barbara"}


async def test_unknown_job_is_not_found_and_job_id_is_required(engine: Engine) -> None:
    assert await dispatch(engine, ST, {"job_id": "no-such-job"}) == {"status": "not_found"}
    for params in ({}, {"job_id": ""}, {"job_id": None}, {"job_id": 7}):
        with pytest.raises(InvalidRequestError) as info:
            await dispatch(engine, ST, params)
        assert info.value.wire_message().endswith("job_id is required and must be non-empty")


async def test_refusals_come_back_synchronously_and_start_no_job(
    engine: Engine, jobs: JobTable
) -> None:
    await _seed(engine)
    with pytest.raises(ConflictError, match="force_clear"):
        await dispatch(engine, RB, {})
    with pytest.raises(InvalidRequestError, match="No WAL files found"):
        await dispatch(engine, RB, {"group_id": "nowhere"})
    with pytest.raises(InvalidRequestError, match="to_seq"):
        await dispatch(engine, RB, {"from_seq": 5, "to_seq": 1})
    assert jobs.running() is None
    assert jobs.get("anything") is None
    assert await _names(engine) == set(NAMES)


async def test_dry_runs_and_streaming_calls_stay_synchronous(
    engine: Engine, jobs: JobTable
) -> None:
    await _seed(engine)
    dry = await dispatch(engine, RB, {"from_seq": 1, "dry_run": True})
    assert dry["success"] is True and dry["dry_run"] is True
    assert dry["mutations_replayed"] == len(NAMES) - 1
    frames: list[dict[str, Any]] = []
    streamed = await dispatch(engine, RB, {"force_clear": True}, Context(progress=frames.append))
    assert streamed["success"] is True and streamed["dry_run"] is False
    assert streamed["mutations_replayed"] == len(NAMES)
    assert frames
    assert jobs.running() is None
    assert await _names(engine) == set(NAMES)


async def test_progress_moves_and_a_second_call_returns_the_running_job(
    engine: Engine, gate: Gate
) -> None:
    await _seed(engine)
    started = await dispatch(engine, RB, {"force_clear": True})
    await gate.wait_reached()
    running = await dispatch(engine, ST, {"job_id": started["job_id"]})
    assert running["status"] == "running"
    assert running["result"] is None and running["error"] is None
    # The bulk replay reported reading every file before applying anything.
    assert running["wal_files_processed"] == running["wal_files_total"] >= 1
    # Already running (any group, any parameters): the same job comes back, nothing starts.
    for params in ({"force_clear": True}, {"from_seq": 1}, {"group_id": "liminis", "to_seq": 9}):
        again = await dispatch(engine, RB, params)
        assert again == {"success": True, "job_id": started["job_id"], "status": "running"}
    # knowledge_status does not wait for the job (nothing to back-fill: no lock needed).
    with anyio.fail_after(10):
        status = await dispatch(engine, "knowledge_status", {})
    assert status["wal"]["max_seq"] == len(NAMES) - 1
    # Refusals are still answered first.
    with pytest.raises(InvalidRequestError, match="No WAL files found"):
        await dispatch(engine, RB, {"group_id": "nowhere"})
    gate.release.set()
    done = await wait_for_job(engine, started["job_id"])
    assert done["status"] == "completed"
    assert done["mutations_replayed"] == len(NAMES)
    assert done["elapsed_seconds"] >= running["elapsed_seconds"]
    # With the job finished, a new call starts a new job.
    result = await rebuild_and_wait(engine, {"from_seq": 1})
    assert result["mutations_replayed"] == len(NAMES) - 1
    assert await _names(engine) == set(NAMES)


@pytest.mark.parametrize(
    ("error", "message"),
    [
        (RuntimeError("boom"), "Task panicked: RuntimeError: boom"),
        (StorageError("disk full"), "disk full"),
    ],
)
async def test_a_failing_job_reports_its_error_and_releases_the_engine(
    engine: Engine, replays: Replays, jobs: JobTable, error: Exception, message: str
) -> None:
    await _seed(engine)

    def fail(*args: Any, **kwargs: Any) -> Any:
        raise error

    replays.step = fail
    started = await dispatch(engine, RB, {"from_seq": 1})
    status = await wait_for_job(engine, started["job_id"])
    assert set(status) == STATUS_KEYS
    assert status["status"] == "failed"
    assert status["result"] is None
    assert status["error"] is not None and message in status["error"]
    assert jobs.running() is None
    # The write lock was released: writes go on.
    await dispatch(engine, "knowledge_assert_entity", {"name": "Barbara"})
    assert await _names(engine) == {*NAMES, "Barbara"}


async def test_close_waits_for_a_running_job(engine: Engine, gate: Gate, jobs: JobTable) -> None:
    await _seed(engine)
    started = await dispatch(engine, RB, {"force_clear": True})
    await gate.wait_reached()
    closed = threading.Event()

    def close() -> None:
        engine.close()
        closed.set()

    closer = threading.Thread(target=close)
    closer.start()
    assert not closed.wait(0.3)  # blocked behind the job
    gate.release.set()
    closer.join(WAIT)
    assert closed.is_set()
    job = jobs.get(started["job_id"])
    assert job is not None
    status = job.to_wire()
    assert status["status"] == "completed", status
    assert status["mutations_replayed"] == len(NAMES)
