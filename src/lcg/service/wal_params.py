"""Parameter models of the WAL-administration methods (API.md §2.37-2.41).

The checkpoint name's format is checked by `lcg.wal.marks` (its error has the reference's own
wording and no "IPC error" prefix), after the params model has checked that it is a string.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from lcg.models import DEFAULT_GROUP_ID
from lcg.service.params import Params, _write_group

__all__ = ["DumpWalParams", "MarkGroupParams", "MarkNameParams"]


def _name(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError("name is required and must be a non-empty string")
    return value


def _mark_group(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError("group_id must be a string")
    return value or DEFAULT_GROUP_ID


def _target_dir(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError("target_dir must be a non-empty string")
    return value


MarkGroup = Annotated[str, BeforeValidator(_mark_group)]


class MarkGroupParams(Params):
    """`knowledge_wal_mark_list`: one group (`""` means the default group)."""

    group_id: MarkGroup = DEFAULT_GROUP_ID


class MarkNameParams(Params):
    """`knowledge_wal_mark_create` / `_delete`: a name and one group."""

    # Absent is validated too, so it gets the same message as "" (API.md §2.39).
    name: Annotated[str, BeforeValidator(_name)] = Field(default=None, validate_default=True)
    group_id: MarkGroup = DEFAULT_GROUP_ID


class DumpWalParams(Params):
    """`knowledge_dump_wal`: one group (absent: every group) and the target directory."""

    group_id: Annotated[str, BeforeValidator(_write_group)] | None = None
    target_dir: Annotated[str, BeforeValidator(_target_dir)] | None = None
