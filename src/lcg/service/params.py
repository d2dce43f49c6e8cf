"""What every method's parameters are built from: the base model, `parse_params`, and the shared
field types (timestamps, the time fields of the time-aware reads, group ids, counts). Each area's
params models sit next to their handlers in `lcg.service.methods.<area>`. Validation happens at
the wire edge, before any write.

Names, defaults and the four `group_ids` behaviours follow docs/api.md §parameters. Where the
reference silently treats a wrongly typed value as absent, lcg rejects it with an error naming
the field (README, "Differences from the reference"): a typo in a destructive call should fail,
not fall back to a default. `null` still means "absent" everywhere.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    WithJsonSchema,
)

from lcg.errors import InvalidRequestError
from lcg.models import DEFAULT_GROUP_ID, control_character
from lcg.timefilter import TimeFilter
from lcg.timeutil import parse_wire_timestamp
from lcg.wal.layout import encode_group

__all__ = [
    "MAX_PATH_CHARS",
    "MAX_RESULTS",
    "Params",
    "parse_params",
    "refuse_bad_text",
    "refuse_unknown",
    "timestamp",
]


class Params(BaseModel):
    """Base of every params model. Unknown members are dropped by the model; whether a call with
    one is refused first is the transport's and the method's choice (`refuse_unknown`)."""

    model_config = ConfigDict(extra="ignore", frozen=True, strict=True)


def refuse_unknown(method: str, model: type[Params], raw: Any) -> None:
    """Refuse members of `raw` that `model` does not declare, naming the ones it does.

    Members starting with `_` belong to the protocol (`_progress_token`) and always pass;
    `null` members are absent, as everywhere (docs/api.md §envelope).

    Raises:
        InvalidRequestError: an unknown member (nothing was changed).
    """
    if not isinstance(raw, dict):
        return
    known = list(model.model_fields)
    unknown = [
        k for k, v in raw.items() if v is not None and k not in known and not k.startswith("_")
    ]
    if unknown:
        names = ", ".join(known) or "none"
        listed = ", ".join(map(repr, unknown))
        raise InvalidRequestError(
            f"unknown parameter{'s' if len(unknown) > 1 else ''} {listed} for {method}; "
            f"its parameters are: {names}",
            field=unknown[0],
        )


# Members whose strings name a group or an entity (or an episode, a mark, a symbol): printable
# text only. A control character there is a client bug (`"fuzz\n"`), never meant.
_GROUP_KEYS = frozenset({"group_id", "group_ids", "source_group_id"})
_NAME_KEYS = frozenset(
    {
        "name",
        "source_name",
        "target_name",
        "canonical_name",
        "alias_names",
        "endpoint_name",
        "source",
        "target",
    }
)
# Members that carry the caller's own data (Cypher parameters, attributes): only NUL is refused.
_FREE_FORM_KEYS = frozenset({"params", "attributes"})
# Members that name a file or a directory: no longer than the longest path the OS accepts.
_PATH_KEYS = frozenset({"path", "target_dir", "paths"})
MAX_PATH_CHARS = 4096


def _refuse_bad_text(value: Any, where: str, top: str, printable: bool, path: bool) -> None:
    """Refuse a NUL byte in any string of the params, a control character in a group id or a
    name, and an over-long path, naming where it is."""
    if isinstance(value, str):
        if "\x00" in value:
            raise InvalidRequestError(f"{where} contains a NUL byte", field=top)
        if printable:
            bad = control_character(value)
            if bad is not None:
                what = "group ids" if top in _GROUP_KEYS else "names"
                raise InvalidRequestError(
                    f"{where} {value!r} contains the control character U+{ord(bad):04X}: "
                    f"{what} are printable text",
                    field=top,
                )
        if path and len(value) > MAX_PATH_CHARS:
            raise InvalidRequestError(
                f"{where} is {len(value)} characters long; a path has at most {MAX_PATH_CHARS}",
                field=top,
            )
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _refuse_bad_text(item, f"{where}[{i}]", top, printable, path)
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and "\x00" in key:
                raise InvalidRequestError(f"{where} has a member name with a NUL byte", field=top)
            free = key in _FREE_FORM_KEYS
            _refuse_bad_text(
                item,
                f"{where}.{key}",
                top,
                not free and (printable or key in _GROUP_KEYS or key in _NAME_KEYS),
                not free and key in _PATH_KEYS,
            )


def refuse_bad_text(data: dict[str, Any]) -> None:
    """The checks every method's params pass before their model sees them: no NUL byte in any
    string, no control character (U+0000-U+001F, U+007F) in a group id or a name, no path
    longer than `MAX_PATH_CHARS`.

    Raises:
        InvalidRequestError: naming the member (nothing was changed).
    """
    for key, value in data.items():
        if "\x00" in key:
            raise InvalidRequestError("a parameter name contains a NUL byte")
        free = key in _FREE_FORM_KEYS
        _refuse_bad_text(
            value,
            key,
            key,
            not free and (key in _GROUP_KEYS or key in _NAME_KEYS),
            key in _PATH_KEYS,
        )


def parse_params(model: type[Params], raw: Any) -> Params:
    """Validate raw JSON params into `model`.

    A non-object `params` reads as an empty object (docs/api.md §envelope). Text is checked
    first (`refuse_bad_text`).

    Raises:
        InvalidRequestError: naming the first offending field.
    """
    data = raw if isinstance(raw, dict) else {}
    data = {k: v for k, v in data.items() if v is not None}
    refuse_bad_text(data)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) if err["loc"] else None
        msg = str(err["msg"])
        if msg.startswith("Value error, "):
            text = msg.removeprefix("Value error, ")
        elif err["type"] == "missing" and field == "group_ids":
            text = "group_ids is required and must be a non-empty array of non-empty strings"
        elif err["type"] == "missing":
            text = f"{field} is required"
        else:
            text = f"{field}: {msg}"
        top = str(err["loc"][0]) if err["loc"] else None
        raise InvalidRequestError(text, field=top) from None


# -- reusable field types ------------------------------------------------------------------------


def timestamp(name: str) -> Any:
    """The one validator of every timestamp accepted over the wire: RFC 3339, the DB read
    format, or a bare date (its midnight, UTC); the error message is the reference's
    (docs/api.md §parameters)."""

    def check(value: Any) -> datetime:
        if not isinstance(value, str):
            raise ValueError(f"{name} must be a string")
        try:
            return parse_wire_timestamp(value)
        except ValueError:
            raise ValueError(
                f"{name} '{value}' is not a valid RFC-3339 or 'YYYY-MM-DD HH:MM:SS' timestamp"
            ) from None

    return BeforeValidator(check)


def required_text(name: str, *, strip: bool = False) -> Any:
    """A string that must hold more than whitespace; `strip`: passed on stripped."""

    def check(value: Any) -> str:
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"{name} is required and must be a non-empty string")
        return value.strip() if strip else value

    return BeforeValidator(check)


def _read_group(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError("group_id must be a string")
    return value


def write_group(value: Any) -> str:
    group = _read_group(value)
    if not group:
        raise ValueError('group_id must be non-empty: writes to group "" cannot be logged')
    try:
        encode_group(group)
    except InvalidRequestError as exc:
        raise ValueError(exc.message) from None
    return group


def _group_or_default(value: Any) -> str:
    return _read_group(value) or DEFAULT_GROUP_ID


def _groups_optional(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError("group_ids must be an array of strings (or one string)")
    return list(dict.fromkeys(value))


def _groups_required(value: Any) -> list[str]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise ValueError("group_ids is required and must be a non-empty array of non-empty strings")
    return list(dict.fromkeys(value))


# The most results any read may ask for (num_results, last_n): the reference has no bound, and
# 10^9 was served; an answer is also bounded in bytes by each transport (protocol.MAX_ANSWER_BYTES).
MAX_RESULTS = 100_000


def count_field(name: str, positive: bool = False) -> Any:
    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{name} must be an integer")
        if positive and value <= 0:
            raise ValueError(f"{name} must be > 0")
        if value < 0:
            raise ValueError(f"{name} must be non-negative, got {value}")
        if value > MAX_RESULTS:
            raise ValueError(f"{name} is {value}; at most {MAX_RESULTS} per call")
        return value

    return BeforeValidator(check)


def seq_field(name: str) -> Any:
    def check(value: Any) -> int:
        if isinstance(value, bool):
            raise ValueError(f"{name} must be a non-negative integer, not a boolean")
        if isinstance(value, int):
            if value < 0:
                raise ValueError(f"{name} must be non-negative, got {value}")
            return value
        raise ValueError(f"{name} must be a non-negative integer")

    return BeforeValidator(check)


def _object(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError("attributes must be a JSON object")
    return value


def string_list(name: str) -> Any:
    def check(value: Any) -> list[str]:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError(f"{name} must be an array of strings")
        return value

    return BeforeValidator(check)


WriteGroup = Annotated[str, BeforeValidator(write_group)]
ReadGroup = Annotated[str, BeforeValidator(_read_group)]
# One group where `""` means the default group (merges, WAL marks).
GroupOrDefault = Annotated[str, BeforeValidator(_group_or_default)]
GroupsOptional = Annotated[list[str] | None, BeforeValidator(_groups_optional)]
GroupsRequired = Annotated[list[str], BeforeValidator(_groups_required)]
Attributes = Annotated[dict[str, Any], BeforeValidator(_object)]


def _collapse(value: list[str] | None) -> list[str] | None:
    return value or None


# `group_ids` variant B (docs/api.md §parameters): omitted or `[]` means all groups.
CollapsingGroups = Annotated[GroupsOptional, AfterValidator(_collapse)]


class Empty(Params):
    """No parameters."""


class CollapsingGroupsParams(Params):
    """`group_ids` variant B: omitted or `[]` means all groups."""

    group_ids: CollapsingGroups = None


# -- time fields (as_of, known_at, include_invalidated) ------------------------------------------


def timestamp_schema(description: str) -> Any:
    """Advertised as a plain string: the DB read format is accepted too, not only date-time."""
    return WithJsonSchema(
        {
            "type": "string",
            "description": f"{description} (RFC 3339, 'YYYY-MM-DD HH:MM:SS' UTC, or a date "
            "YYYY-MM-DD: its midnight UTC).",
        }
    )


AsOf = Annotated[
    datetime,
    timestamp("as_of"),
    timestamp_schema("Valid time: only facts true in the world at this instant"),
]

KnownAt = Annotated[
    datetime,
    timestamp("known_at"),
    timestamp_schema("System time: read the graph as it was at this instant"),
]


class TimeFields(Params):
    """`as_of`, `known_at`, `include_invalidated`: see lcg.timefilter.TimeFilter."""

    as_of: AsOf | None = None
    known_at: KnownAt | None = None
    include_invalidated: bool | None = Field(
        default=None,
        description="false: only facts current at known_at (or now); true: superseded and "
        "ended facts too.",
    )

    def time_filter(self) -> TimeFilter:
        """The filter asked for; an absent `include_invalidated` means false."""
        return TimeFilter(self.as_of, self.known_at, bool(self.include_invalidated))

    def optional_time_filter(self) -> TimeFilter | None:
        """None when no time parameter was given: the reference's unfiltered reads."""
        if self.as_of is None and self.known_at is None and self.include_invalidated is None:
            return None
        return self.time_filter()
