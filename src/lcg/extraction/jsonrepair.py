"""Recover one JSON object from what a language model actually returned (pure functions).

Models wrap JSON in code fences, put prose around it, leave trailing commas, or stop mid-array
when they run out of tokens. `parse_json_object` undoes each of these in turn and names every
repair it made (`LlmResponse.repairs`):

    code_fence         the object was inside a ``` fence (closed or not)
    prose_stripped     text before or after the outermost object was dropped
    trailing_commas    commas before `}` / `]` were removed
    truncated_salvage  the text stopped mid-object; complete array items (and complete members
                       of the top-level object) were kept, the unfinished tail dropped
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

__all__ = ["ParsedJson", "parse_json_object", "remove_trailing_commas"]

_FENCE_OPEN = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\r?\n?")
_CLOSERS = {"{": "}", "[": "]"}
_TRAILING_COMMA = re.compile(r",\s*[}\]]")
# Salvage tries at most this many cut points, latest first (keeps a pathological text cheap).
_MAX_CUTS = 2000


@dataclass(frozen=True)
class ParsedJson:
    """The recovered object (None when nothing could be recovered) and the repairs made."""

    data: dict[str, Any] | None
    repairs: tuple[str, ...] = ()
    error: str | None = None


def parse_json_object(text: str) -> ParsedJson:
    """Parse `text` as one JSON object, repairing the usual model output damage."""
    repairs: list[str] = []
    direct = _loads_object(text.strip())
    if direct is not None:
        return ParsedJson(direct)

    body = text
    fence = _FENCE_OPEN.search(body)
    if fence is not None:
        rest = body[fence.end() :]
        end = rest.find("```")
        body = rest if end < 0 else rest[:end]
        repairs.append("code_fence")

    start = body.find("{")
    if start < 0:
        return ParsedJson(None, tuple(repairs), "no JSON object in the response")
    stop, open_stack = _scan(body, start)
    if body[:start].strip() or (stop is not None and body[stop:].strip()):
        repairs.append("prose_stripped")
    candidate = body[start:stop]

    data = _loads_object(candidate)
    if data is not None:
        return ParsedJson(data, tuple(repairs))
    cleaned = remove_trailing_commas(candidate)
    if cleaned != candidate:
        data = _loads_object(cleaned)
        if data is not None:
            return ParsedJson(data, (*repairs, "trailing_commas"))
    if stop is None or open_stack:
        salvaged = _salvage(candidate)
        if salvaged is not None:
            return ParsedJson(salvaged, (*repairs, "truncated_salvage"))
        return ParsedJson(None, tuple(repairs), "truncated JSON with no complete item to keep")
    return ParsedJson(None, tuple(repairs), "the JSON object does not parse")


def remove_trailing_commas(text: str) -> str:
    """Drop commas that directly precede `}` or `]` (outside strings)."""
    if _TRAILING_COMMA.search(text) is None:
        return text  # the common case, without a character-by-character pass
    out: list[str] = []
    in_string = escaped = False
    pending_comma: int | None = None
    for ch in text:
        if in_string:
            out.append(ch)
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
            continue
        if ch in "}]" and pending_comma is not None:
            del out[pending_comma]
        if ch == ",":
            pending_comma = len(out)
        elif not ch.isspace():
            pending_comma = None
        if ch == '"':
            in_string = True
        out.append(ch)
    return "".join(out)


def _loads_object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _scan(text: str, start: int) -> tuple[int | None, list[str]]:
    """End index (exclusive) of the balanced value opening at `start`, or None and the open
    brackets when the text ends first."""
    stack: list[str] = []
    in_string = escaped = False
    for i in range(start, len(text)):
        ch = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            stack.append(ch)
        elif ch in "}]":
            if stack:
                stack.pop()
            if not stack:
                return i + 1, []
    return None, stack


def _cut_points(text: str) -> list[tuple[int, str]]:
    """Positions right after a complete array item or top-level member, with the brackets
    still open there."""
    cuts: list[tuple[int, str]] = []
    stack: list[str] = []
    in_string = escaped = False
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
                if stack and stack[-1] == "[":
                    cuts.append((i + 1, "".join(stack)))
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            stack.append(ch)
        elif ch in "}]" and stack:
            stack.pop()
            if stack and (stack[-1] == "[" or len(stack) == 1):
                cuts.append((i + 1, "".join(stack)))
    return cuts


def _salvage(text: str) -> dict[str, Any] | None:
    for pos, open_brackets in reversed(_cut_points(text)[-_MAX_CUTS:]):
        closers = "".join(_CLOSERS[b] for b in reversed(open_brackets))
        data = _loads_object(remove_trailing_commas(text[:pos] + closers))
        if data is not None:
            return data
    return None
