"""`knowledge_rebuild_from_wal` and `knowledge_rebuild_status`
(docs/api.md §knowledge_rebuild_from_wal, §knowledge_rebuild_status): re-deriving a group from its
WAL, in the foreground or as a background job.

One rebuild, whichever storage mode the engine runs in (docs/design.md, "Storage modes"):
the mode checks the request (steps 4-8: `StorageMode.rebuild_plan`), counts a dry run
(`rebuild_dry_run`) or purges and replays the group (`rebuild_replay`: the WAL files into the
embedded store, or a server's stream into its graph), under the write lock. What a replay leaves
behind is written once, here and in the kernel's aftermath of a replay (`Aftermath.rebuilt`,
lcg.engine.aftermath): the embedder stamp, the WAL problems, names, search, cross-group hops. A full rebuild also owes the other
groups something: their cross-group pointers into the re-derived group are re-resolved by name,
ignoring the staleness gate (after a reset or a bounded restore positions are not comparable).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, ParamSpec, TypeVar

import anyio.to_thread

from lcg.curation.pointers import rebind_locked
from lcg.engine import Engine, exclusive
from lcg.engine.jobs import RebuildJob
from lcg.engine.modes import RebuildPlan
from lcg.engine.replay import ReplayReport
from lcg.engine.warmup import PrebuiltSearch
from lcg.ontology import record_ingested_ontology

__all__ = ["rebuild_from_wal", "rebuild_groups", "rebuild_status", "start_rebuild"]

P = ParamSpec("P")
T = TypeVar("T")
Progress = Callable[[dict[str, Any]], None]


async def _run(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))


def _rebind(engine: Engine, group_id: str) -> dict[str, int]:
    # Called by the rebuild with the write lock held: entering the writer again only re-enters it.
    with engine.writer() as w:
        return rebind_locked(engine, w, group_id, force=True)


async def rebuild_from_wal(
    engine: Engine,
    group_id: str,
    from_seq: int = 0,
    to_seq: int | None = None,
    dry_run: bool = False,
    force_clear: bool = False,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Replay a group's WAL into the graph now (docs/api.md §knowledge_rebuild_from_wal, synchronous
    form)."""
    return await _run(_rebuild, engine, group_id, from_seq, to_seq, dry_run, force_clear, progress)


async def rebuild_groups(
    engine: Engine,
    group_ids: Sequence[str],
    *,
    force_clear: bool = True,
    dry_run: bool = False,
    progress: Progress | None = None,
) -> list[dict[str, Any]]:
    """Rebuild several groups from their WALs, under one hold of the write lock."""

    def run() -> list[dict[str, Any]]:
        with engine.writer():
            if dry_run:
                return [
                    _rebuild(engine, g, 0, None, True, force_clear, progress) for g in group_ids
                ]
            results = [
                _rebuild(engine, g, 0, None, False, force_clear, progress) for g in group_ids
            ]
            exclusive.set_indices_built(engine, all(r["indices_built"] for r in results))
            return results

    return await _run(run)


async def start_rebuild(
    engine: Engine,
    group_id: str,
    from_seq: int = 0,
    to_seq: int | None = None,
    force_clear: bool = False,
) -> dict[str, Any]:
    """Start a real rebuild as a background job (docs/api.md §knowledge_rebuild_from_wal, the
    background job, non-streaming form).

    Every refusal of steps 4-8 is raised here, before a job exists (the checks read a
    snapshot; the job repeats them under the write lock, and fails if the state changed in
    between). If a job is already running (any group), that job is returned instead.
    """
    return await _run(_start_rebuild, engine, group_id, from_seq, to_seq, force_clear)


def _start_rebuild(
    engine: Engine,
    group_id: str,
    from_seq: int,
    to_seq: int | None,
    force_clear: bool,
) -> dict[str, Any]:
    with engine.reader() as conn:
        plan = exclusive.mode(engine).rebuild_plan(
            conn, group_id, from_seq, to_seq, False, force_clear
        )

    def work(job: RebuildJob) -> dict[str, Any]:
        result = _rebuild(engine, group_id, from_seq, to_seq, False, force_clear, job.progress)
        result.pop("success", None)
        return result

    job, _ = exclusive.jobs(engine).start(group_id, plan.steps, work)
    return {"success": True, "job_id": job.job_id, "status": "running"}


def rebuild_status(engine: Engine, job_id: str) -> dict[str, Any]:
    """`knowledge_rebuild_status` (docs/api.md §knowledge_rebuild_status): a background job's state,
    from memory."""
    job = exclusive.jobs(engine).get(job_id)
    if job is None:
        return {"status": "not_found"}
    return job.to_wire()


def _rebuild(
    engine: Engine,
    group_id: str,
    from_seq: int,
    to_seq: int | None,
    dry_run: bool,
    force_clear: bool,
    progress: Progress | None,
) -> dict[str, Any]:
    """The one rebuild: the mode's checks, its dry run or its replay, then what a replay
    leaves behind (`_after_replay`), under the write lock."""
    mode = exclusive.mode(engine)
    with engine.writer() as writer:
        with writer.connection() as conn:
            plan = mode.rebuild_plan(conn, group_id, from_seq, to_seq, dry_run, force_clear)
        if dry_run and plan.reset:
            return {
                "success": True,
                "group_id": group_id,
                "dry_run": True,
                "reset_detected": True,
                "previous_generation": plan.previous,
                "generation": plan.generation,
                "message": "the WAL stream's generation changed since it was applied; a real "
                "rebuild will purge the group and replay the whole stream",
            }
        if dry_run:
            report, indices = mode.rebuild_dry_run(plan)
            return _result(
                engine,
                report,
                dry_run=True,
                previous=plan.previous,
                generation=plan.generation,
                indices=indices,
            )

        def dropping() -> None:
            exclusive.set_indices_built(engine, False)
            engine.parts.search.invalidate([group_id])

        report, prebuilt = mode.rebuild_replay(plan, dropping, progress)
        rebound = _after_replay(engine, plan, report, prebuilt)
        return _result(
            engine,
            report,
            dry_run=False,
            reset=plan.reset,
            previous=plan.previous,
            generation=plan.generation,
            rebind=rebound if plan.reset else None,
        )


def _after_replay(
    engine: Engine, plan: RebuildPlan, report: ReplayReport, prebuilt: PrebuiltSearch | None
) -> dict[str, int] | None:
    """What a rebuild's replay leaves behind, in either mode (write lock held): the catch-up's
    aftermath of every replay and the name index, the cross-group hops (`Aftermath.rebuilt`), the
    pointers of other groups into a re-derived group, the group's search index, the event and
    the ontology record. Returns the rebind's counts (None: nothing rebound)."""
    aftermath = exclusive.aftermath(engine)
    group_id = plan.group_id
    aftermath.rebuilt(report, full=plan.full, prebuilt=prebuilt)
    # Pointers into a re-derived group are re-resolved by name, ignoring the staleness
    # gate: after a reset or a bounded restore, positions are not comparable.
    rebound = _rebind(engine, group_id) if plan.rebinds else None
    # The group's texts were just embedded by the replay: loading it hits the cache.
    exclusive.set_indices_built(engine, exclusive.warmup(engine).warm([group_id]))
    aftermath.emit_replay(report)
    record_ingested_ontology(engine.settings)  # the graph now reflects the current ontology
    return rebound


def _result(
    engine: Engine,
    report: ReplayReport,
    *,
    dry_run: bool,
    reset: bool = False,
    previous: str | None = None,
    generation: str | None = None,
    rebind: dict[str, int] | None = None,
    indices: bool = True,
) -> dict[str, Any]:
    """The wire result of a rebuild: the report, then what the pass did (`indices`: whether
    to report `indices_built`; a dry run of the WAL files builds none)."""
    result = report.to_wire(
        engine.settings.replay_failure_samples, engine.settings.replay_fidelity_threshold
    )
    result["success"] = True
    result["dry_run"] = dry_run
    if indices:
        result["indices_built"] = engine.state.indices_built
    result.update(
        {
            "reset_detected": reset,
            "previous_generation": previous,
            "generation": generation,
            "cross_group_rebind": rebind,
        }
    )
    return result
