"""Parameter models of the ingestion methods (API.md §2.4, §2.5).

`reference_time` must be an RFC 3339 (or `YYYY-MM-DD HH:MM:SS`) string when given; absent, it
is the time of the call — for `knowledge_add_episode` too, where the reference passes an absent
value through into timestamp columns (API.md §2.5 asks a reimplementation to default it).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from lcg.models import DEFAULT_GROUP_ID
from lcg.service.params import Params, WriteGroup
from lcg.timeutil import parse_wire_timestamp

__all__ = ["AddEpisodeParams", "ProcessChunkParams"]


def _required(message: str) -> Any:
    def check(value: Any) -> str:
        if not isinstance(value, str) or not value.strip():
            raise ValueError(message)
        return value

    return BeforeValidator(check)


def _text(name: str) -> Any:
    def check(value: Any) -> str:
        if not isinstance(value, str):
            raise ValueError(f"{name} must be a string")
        return value

    return BeforeValidator(check)


def _reference_time(value: Any) -> datetime | None:
    if isinstance(value, str) and not value.strip():
        return None
    if not isinstance(value, str):
        raise ValueError(f"reference_time is not valid ISO 8601: {value!r}")
    try:
        return parse_wire_timestamp(value)
    except ValueError:
        raise ValueError(f"reference_time is not valid ISO 8601: {value}") from None


ReferenceTime = Annotated[datetime | None, BeforeValidator(_reference_time)]


class ProcessChunkParams(Params):
    # Defaulted so that a missing value gets the same message as an empty one (API.md §2.4).
    chunk_text: Annotated[str, _required("chunk_text is required and must be non-empty")] = Field(
        default="", validate_default=True
    )
    chunk_id: Annotated[str, _required("chunk_id is required")] = Field(
        default="", validate_default=True
    )
    source_file: Annotated[str, _required("source_file is required")] = Field(
        default="", validate_default=True
    )
    group_id: WriteGroup = DEFAULT_GROUP_ID
    reference_time: ReferenceTime = None


class AddEpisodeParams(Params):
    name: Annotated[str, _text("name")] = ""
    episode_body: Annotated[str, _text("episode_body")] = ""
    source: Annotated[str, _text("source")] = "text"
    source_description: Annotated[str, _text("source_description")] = ""
    group_id: WriteGroup = DEFAULT_GROUP_ID
    reference_time: ReferenceTime = None
