"""Code graph methods (lcg extensions; docs/code-graph.md): knowledge_code_ingest
(admin: it reads a directory of this machine), knowledge_code_where, knowledge_code_calls and
knowledge_code_changes (read)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from lcg.code.history import ingest_history
from lcg.code.ingest import ingest_tree
from lcg.code.queries import callers_and_callees, code_changes, where_defined
from lcg.engine import Engine
from lcg.errors import InvalidRequestError
from lcg.graph.reads import one_group
from lcg.models import DEFAULT_GROUP_ID
from lcg.service.declare import Context, Declarations
from lcg.service.params import (
    AsOf,
    Params,
    ReadGroup,
    WriteGroup,
    required_text,
    timestamp,
    timestamp_schema,
)
from lcg.timeutil import now


class IngestParams(Params):
    path: Annotated[str, required_text("path", strip=True)] = Field(
        description="The repository's directory on the machine lcg runs on."
    )
    group_id: WriteGroup = DEFAULT_GROUP_ID
    history: Annotated[str, required_text("history", strip=True)] | None = Field(
        default=None,
        description="Walk git history instead of the working tree: 'all', a count N of the "
        "latest commits, or a range A..B. Only commits not yet ingested are walked.",
    )


_GROUP = "The code's group (default: the workspace's only group; required when it has several)."


class SymbolParams(Params):
    name: Annotated[str, required_text("name", strip=True)] = Field(
        description="Qualified name (pkg.module.Class.method), a path, or a short name."
    )
    group_id: ReadGroup | None = Field(default=None, description=_GROUP)


class CallsParams(SymbolParams):
    as_of: AsOf | None = None


Since = Annotated[datetime, timestamp("since"), timestamp_schema("Start of the window")]
Until = Annotated[datetime, timestamp("until"), timestamp_schema("End (default: now)")]


class ChangesParams(Params):
    since: Since
    until: Until | None = None
    path: str = Field(default="", description="Only symbols under this path prefix.")
    group_id: ReadGroup | None = Field(default=None, description=_GROUP)

    def model_post_init(self, context: Any) -> None:
        if self.until is not None and self.until <= self.since:
            raise InvalidRequestError("until must be later than since", field="until")


declare = Declarations()


@declare(
    "knowledge_code_ingest",
    "admin",
    IngestParams,
    "Ingest a source repository's structure (files, modules, classes, functions, methods with "
    "signatures, first docstring lines and line ranges; never bodies) and the facts between "
    "them (DEFINES, CONTAINS, IMPORTS, INHERITS, CALLS), from the working tree or, with "
    "`history`, commit by commit from git. Re-runs write only what changed.",
    long_running=True,
)
async def _ingest(engine: Engine, a: IngestParams, ctx: Context) -> dict[str, Any]:
    root = Path(a.path)
    if a.history is not None:
        report = await ingest_history(engine, root, a.group_id, a.history)
        return report.to_dict()
    return (await ingest_tree(engine, root, a.group_id)).to_dict()


@declare(
    "knowledge_code_where",
    "read",
    SymbolParams,
    "Where a code symbol is defined: each match with its kind, `path:line_start-line_end`, "
    "signature and first docstring line (and whether it still exists).",
)
async def _where(engine: Engine, a: SymbolParams, ctx: Context) -> dict[str, Any]:
    return await where_defined(engine, await one_group(engine, a.group_id), a.name)


@declare(
    "knowledge_code_calls",
    "read",
    CallsParams,
    "Who calls a code symbol and what it calls (calls resolved within the repository), now "
    "or as of a time.",
)
async def _calls(engine: Engine, a: CallsParams, ctx: Context) -> dict[str, Any]:
    group = await one_group(engine, a.group_id)
    return await callers_and_callees(engine, group, a.name, as_of=a.as_of)


@declare(
    "knowledge_code_changes",
    "read",
    ChangesParams,
    "What changed in the code between two times (under a path prefix): symbols added, "
    "removed, renamed (or moved), and those whose signature changed.",
)
async def _changes(engine: Engine, a: ChangesParams, ctx: Context) -> dict[str, Any]:
    group = await one_group(engine, a.group_id)
    return await code_changes(engine, group, a.since, a.until or now(), a.path)
