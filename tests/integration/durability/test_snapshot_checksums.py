"""The derived indexes saved beside the database verify themselves: a search snapshot or a
saved copy of the temporal rows whose content was damaged (the files still well formed) is not
loaded but rebuilt from the store, answers stay those of the store, status says what was found,
and health is not `healthy` while a damaged copy has not been replaced."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio.to_thread
import numpy as np
import pytest

from lcg import Engine, Settings, open_engine
from lcg.admin import status as admin_status
from lcg.models import DEFAULT_GROUP_ID
from lcg.service.registry import dispatch
from lcg.storage.kuzu_backend import KuzuReader

pytestmark = pytest.mark.anyio


async def _write(engine: Engine) -> None:
    for i in range(12):
        await dispatch(
            engine,
            "knowledge_assert_entity",
            {"name": f"Saturn stage {i}", "summary": f"Rocket stage number {i}."},
        )
    await dispatch(
        engine,
        "knowledge_add_facts",
        {
            "reference_time": "2025-01-01",
            "entities": [{"name": f"Saturn stage {i}"} for i in range(6)],
            "facts": [
                {
                    "source": f"Saturn stage {i}",
                    "relation_type": "LIFTS",
                    "target": f"Saturn stage {i + 1}",
                    "fact": f"Saturn stage {i} lifts Saturn stage {i + 1} into orbit.",
                    "valid_at": f"2024-0{i + 1}-01T00:00:00Z",
                }
                for i in range(5)
            ],
        },
    )


async def _answers(engine: Engine) -> tuple[Any, ...]:
    found = await dispatch(engine, "knowledge_find_entities", {"query": "rocket stage 3"})
    facts = await dispatch(engine, "knowledge_find_relationships", {"query": "lifts orbit"})
    changes = await dispatch(
        engine,
        "knowledge_get_changes",
        {"since": "2023-01-01", "until": "2026-01-01", "num_results": 50},
    )
    as_of = await dispatch(engine, "knowledge_list_relationships", {"as_of": "2024-03-15"})
    return (
        [n["name"] for n in found["nodes"]],
        [f["fact"] for f in facts["facts"]],
        [(c["kind"], c["fact"]["uuid"]) for c in changes["changes"]],
        sorted(f["uuid"] for f in as_of["facts"]),
    )


async def _status(engine: Engine) -> dict[str, Any]:
    result: dict[str, Any] = await dispatch(engine, "knowledge_status", {})
    return result


def _saved(settings: Settings) -> Path:
    return settings.db_path.parent / "search-index"


async def test_a_damaged_search_snapshot_is_rebuilt_and_reported(settings: Settings) -> None:
    engine = open_engine(settings)
    try:
        await _write(engine)
        before = await _answers(engine)
    finally:
        engine.close()
    damaged = 0
    for uuids in _saved(settings).glob("*/*/uuids.json"):
        held = json.loads(uuids.read_text())
        if len(held) > 1:  # well formed, every uuid a real one, each in the wrong row
            uuids.write_text(json.dumps(held[::-1]))
            damaged += 1
    assert damaged

    engine = open_engine(settings)
    try:
        assert await _answers(engine) == before
        found = (await _status(engine))["derived_indexes"]["search_snapshots_damaged"]
        assert len(found) == damaged
        assert (await admin_status.health(engine))["healthy"] is True  # rebuilt
    finally:
        engine.close()


async def test_damaged_temporal_rows_are_rebuilt_and_reported(settings: Settings) -> None:
    engine = open_engine(settings)
    try:
        await _write(engine)
        before = await _answers(engine)
    finally:
        engine.close()
    engine = open_engine(settings)  # a reopen that reads the temporal rows saves them at close
    try:
        assert await _answers(engine) == before
    finally:
        engine.close()
    saved = _saved(settings) / "temporal"
    if engine.parts.search.temporal is None:
        pytest.skip("a server's reads stay on the server")
    rows = saved / "fact_rows.npy"
    np.save(rows, np.load(rows)[::-1].copy())  # well formed: every uuid finds another's row

    engine = open_engine(settings)
    try:
        assert await _answers(engine) == before
        held = engine.parts.search.temporal
        assert held is not None and held.damaged == 1 and held.loads == 0
        assert (await _status(engine))["derived_indexes"]["temporal_rows_damaged"] == 1
    finally:
        engine.close()


async def test_health_is_not_healthy_while_damaged_temporal_rows_are_not_replaced(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = open_engine(settings)
    try:
        await _write(engine)
        await _answers(engine)
    finally:
        engine.close()
    engine = open_engine(settings)
    try:
        await _answers(engine)
    finally:
        engine.close()
    if engine.parts.search.temporal is None:
        pytest.skip("a server's reads stay on the server")
    state = _saved(settings) / "temporal" / "state.json"
    value = json.loads(state.read_text())
    value["hopless"] = [*value["hopless"], "0" * 36]  # well formed, and wrong
    state.write_text(json.dumps(value))

    def broken(*_: Any) -> Any:
        raise OSError("the scan fails")

    monkeypatch.setattr(KuzuReader, "temporal_tables", broken)
    engine = open_engine(settings)
    try:
        await dispatch(engine, "knowledge_get_changes", {"since": "2023-01-01"})  # the store's
        held = engine.parts.search.temporal
        assert held is not None
        await anyio.to_thread.run_sync(held.ready)
        health = await admin_status.health(engine)
        assert (health["healthy"], health["state"]) == (False, "degraded")
        assert health["reason"] == "derived_index_damaged"
        assert (await _status(engine))["derived_indexes"]["temporal_rows_rebuilding"] is True
    finally:
        engine.close()
    monkeypatch.undo()
    engine = open_engine(settings)  # the copy is still damaged; the scan works again
    try:
        assert await _answers(engine)
        held = engine.parts.search.temporal
        assert held is not None
        await anyio.to_thread.run_sync(held.ready)
        assert held.builds == 1 and not held.known_bad
        assert (await admin_status.health(engine))["healthy"] is True
    finally:
        engine.close()


def _swap_first_and_last_uuid(path: Path) -> None:
    """A well-formed edit: the file still loads, each row now names another entity."""
    arrays = dict(np.load(path))
    blob, ends = arrays["uuid_blob"].copy(), arrays["uuid_ends"]
    starts = [0, *ends[:-1].tolist()]
    first = blob[starts[0] : ends[0]].copy()
    last = blob[starts[-1] : ends[-1]].copy()
    assert len(first) == len(last)  # uuids: one length
    blob[starts[0] : ends[0]], blob[starts[-1] : ends[-1]] = last, first
    arrays["uuid_blob"] = blob
    with path.open("wb") as handle:
        np.savez(handle, **arrays)


@pytest.mark.parametrize("what", ["names.npz", "stamp.json"])
async def test_a_damaged_name_index_snapshot_is_rebuilt_and_reported(
    settings: Settings, what: str
) -> None:
    engine = open_engine(settings)
    try:
        await _write(engine)
        lookups = [engine.names.lookup(DEFAULT_GROUP_ID, f"Saturn stage {i}") for i in (0, 11)]
        assert all(lookups)
        assert (await _status(engine))["derived_indexes"]["name_index_damaged"] == 0
    finally:
        engine.close()
    saved = settings.db_path.parent / "name-index"
    if what == "names.npz":
        _swap_first_and_last_uuid(saved / what)
    else:  # its stamp edited to still match the database, its digest left as it was
        stamp = json.loads((saved / what).read_text())
        stamp["files"]["names.npz"] = "0" * 64
        (saved / what).write_text(json.dumps(stamp))
    engine = open_engine(settings)
    try:
        assert [
            engine.names.lookup(DEFAULT_GROUP_ID, f"Saturn stage {i}") for i in (0, 11)
        ] == lookups
        status = await _status(engine)
        assert status["derived_indexes"]["name_index_damaged"] == 1
        assert status["name_index_trusted"] is True
    finally:
        engine.close()
    engine = open_engine(settings)  # the close saved a sound copy again
    try:
        assert (await _status(engine))["derived_indexes"]["name_index_damaged"] == 0
        assert [
            engine.names.lookup(DEFAULT_GROUP_ID, f"Saturn stage {i}") for i in (0, 11)
        ] == lookups
    finally:
        engine.close()
