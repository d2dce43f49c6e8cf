"""`lcg.open`: the library front. An async context manager that opens a workspace's engine and
yields a `Graph`, whose typed methods (generated into `lcg.library.methods`) run the registered
wire methods in-process through `lcg.service.registry.dispatch`: same validation, same
results, same errors (`lcg.errors`) as over JSON-RPC.

Python values are turned into wire values before the call (`to_wire`): a `datetime` or `date`
becomes its ISO 8601 text, a sequence a list, a mapping a dict, and the dataclasses the
params models parse into (`GivenEntity`, `GivenFact`, `Endpoint`) the objects the wire takes.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import date
from pathlib import Path
from typing import Any

import anyio.to_thread

from lcg.config import Settings
from lcg.engine import Engine, open_engine
from lcg.library.methods import GraphMethods
from lcg.service.declare import Context, Progress
from lcg.service.registry import dispatch

__all__ = ["Graph", "open", "to_wire"]


def to_wire(value: Any) -> Any:
    """`value` as JSON-RPC would carry it (module docstring); anything else is passed as is,
    for the params model to accept or reject."""
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, str | bytes):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: to_wire(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if getattr(value, f.name) is not None
        }
    if isinstance(value, Mapping):
        return {k: to_wire(v) for k, v in value.items()}
    if isinstance(value, Sequence):
        return [to_wire(v) for v in value]
    return value


class Graph(GraphMethods):
    """A workspace's graph, for Python code: one typed async method per wire method (e.g.
    `add_episode`, `add_facts`, `find_entities`, `get_context`, `timeline`, `changes`).

    Get one from `lcg.open`, or wrap an engine you opened (and will close) yourself:
    `Graph(engine)`. `engine` is the open engine, for what the methods do not cover.
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    async def _call(
        self,
        method: str,
        params: dict[str, Any],
        progress: Progress | None = None,
    ) -> dict[str, Any]:
        wire = {name: to_wire(value) for name, value in params.items() if value is not None}
        return await dispatch(self.engine, method, wire, Context(progress))


@asynccontextmanager
async def open(
    where: str | os.PathLike[str] | Settings,
    **settings: Any,
) -> AsyncIterator[Graph]:
    """Open the workspace `where` and yield its `Graph`; the engine is closed on leaving.

    `where` is the workspace directory (`.lcg`; created if missing) with lcg's defaults, and
    `settings` overrides them by setting name (e.g. `extractor="heuristic"`); the environment
    (`LCG_*`) is not read. For settings read from the environment, as the command line does,
    pass `lcg.load_settings()` (then `settings` must be empty). For an engine built
    otherwise (e.g. `open_engine(settings, embedder=...)`), wrap it: `Graph(engine)`.

    Raises:
        StorageError: the database cannot be opened (e.g. another process holds it).
        ConfigError: a setting is invalid.
    """
    if isinstance(where, Settings) and settings:
        raise TypeError("settings overrides go with a path; apply them to the Settings")

    def start() -> Engine:
        if isinstance(where, Settings):
            return open_engine(where)
        home = Path(where).absolute()
        return open_engine(Settings.for_home(home, **settings))

    engine = await anyio.to_thread.run_sync(start)
    try:
        yield Graph(engine)
    finally:
        await anyio.to_thread.run_sync(engine.close)
