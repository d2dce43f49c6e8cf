"""The JSON-RPC wire format of the socket service, without any I/O (docs/api.md §envelope, §errors,
§progress).

Owns: one line of bytes -> a `Request` (or a `ProtocolError` for a -32700 answer), results,
errors and progress frames -> one line of bytes, and the single mapping from an exception to a
JSON-RPC `{code, message, data}` object. Every encoded message is one compact JSON object
followed by `\\n`. Nothing here reads or writes a socket, so all of it is testable with bytes.

Envelope rules (§1.2): a request is an object carrying all four of `jsonrpc` (a string),
`id` (any JSON value, echoed verbatim), `method` (a string) and `params` (any JSON value; a
non-object reads as empty). Anything else is a parse error answered with `id: null`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import orjson

from lcg.errors import InvalidRequestError, LcgError

__all__ = [
    "GENERIC_ERROR_MESSAGE",
    "INTERNAL_ERROR",
    "MAX_ANSWER_BYTES",
    "MAX_LINE_BYTES",
    "PARSE_ERROR",
    "ProtocolError",
    "Request",
    "answer_too_large",
    "encode_error",
    "encode_parse_error",
    "encode_progress",
    "encode_result",
    "error_object",
    "is_blank",
    "parse_request",
]

logger = logging.getLogger(__name__)

# A request line longer than this is refused with a parse error (and skipped up to its newline).
MAX_LINE_BYTES = 16 * 1024 * 1024
# An answer longer than this is replaced by an invalid-params error saying to ask for less: the
# same bound as a request line, so a client that reads lines of MAX_LINE_BYTES reads every answer.
MAX_ANSWER_BYTES = MAX_LINE_BYTES
PARSE_ERROR = -32700
INTERNAL_ERROR = -32000
GENERIC_ERROR_MESSAGE = "IPC error: internal error (see the service log)"

_MEMBERS = ("jsonrpc", "id", "method", "params")
_DUMP_OPTIONS = orjson.OPT_NON_STR_KEYS


class ProtocolError(Exception):
    """A line that is not a well-formed request; `detail` follows "Parse error: " on the wire."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


@dataclass(frozen=True)
class Request:
    """One parsed request. `params` is the raw JSON value (the registry validates it)."""

    id: Any
    method: str
    params: Any

    @property
    def progress_token(self) -> Any:
        """The `_progress_token` member of `params` (None when absent or params is no object)."""
        return self.params.get("_progress_token") if isinstance(self.params, dict) else None

    @property
    def streaming(self) -> bool:
        """Streaming mode (§1.8): a non-null `_progress_token` asks for progress frames."""
        return self.progress_token is not None


def is_blank(line: bytes) -> bool:
    """Blank (whitespace-only) lines are ignored, not answered."""
    return not line.strip()


def parse_request(line: bytes) -> Request:
    """Parse one line (without its newline) into a request.

    Raises:
        ProtocolError: the line is too long, not UTF-8 JSON, not an object, lacks one of the
            four members, or `jsonrpc`/`method` is not a string.
    """
    if len(line) > MAX_LINE_BYTES:
        raise ProtocolError(f"request line exceeds {MAX_LINE_BYTES} bytes")
    try:
        value = orjson.loads(line.strip())
    except orjson.JSONDecodeError as exc:
        raise ProtocolError(str(exc)) from None
    if not isinstance(value, dict):
        raise ProtocolError(f"expected a JSON-RPC request object, got {_kind(value)}")
    for member in _MEMBERS:
        if member not in value:
            raise ProtocolError(f"missing field `{member}`")
    if not isinstance(value["jsonrpc"], str):
        raise ProtocolError(
            f"invalid type: {_kind(value['jsonrpc'])}, expected a string for `jsonrpc`"
        )
    if not isinstance(value["method"], str):
        raise ProtocolError(
            f"invalid type: {_kind(value['method'])}, expected a string for `method`"
        )
    try:
        orjson.dumps(value["id"], option=_DUMP_OPTIONS)
    except orjson.JSONEncodeError:
        # Only a pathologically nested id gets here: we could not echo it back.
        raise ProtocolError("`id` is nested too deeply to be echoed") from None
    return Request(value["id"], value["method"], value["params"])


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _line(message: dict[str, Any]) -> bytes:
    try:
        return orjson.dumps(message, default=str, option=_DUMP_OPTIONS) + b"\n"
    except (orjson.JSONEncodeError, TypeError):
        # A result orjson cannot encode (e.g. an integer beyond 64 bits) is a bug in a
        # handler, not in the client's request; answer with an error rather than nothing.
        logger.exception("a response could not be encoded")
        fallback = {
            "jsonrpc": "2.0",
            "id": message.get("id"),
            "error": {"code": INTERNAL_ERROR, "message": GENERIC_ERROR_MESSAGE},
        }
        return orjson.dumps(fallback, default=str, option=_DUMP_OPTIONS) + b"\n"


def encode_result(request_id: Any, result: dict[str, Any]) -> bytes:
    """The success response line for `request_id`."""
    return _line({"jsonrpc": "2.0", "id": request_id, "result": result})


def answer_too_large(size: int) -> InvalidRequestError:
    """The error that replaces an answer of `size` bytes, over `MAX_ANSWER_BYTES`."""
    return InvalidRequestError(
        f"the answer is {size} bytes, more than the {MAX_ANSWER_BYTES} an answer may have: ask "
        "for fewer results (num_results, last_n) or fewer groups"
    )


def encode_error(request_id: Any, error: dict[str, Any]) -> bytes:
    """The error response line for `request_id`; `error` comes from `error_object`."""
    return _line({"jsonrpc": "2.0", "id": request_id, "error": error})


def encode_parse_error(detail: str) -> bytes:
    """The -32700 response line; its id is always null (§1.2)."""
    return encode_error(None, {"code": PARSE_ERROR, "message": f"Parse error: {detail}"})


def encode_progress(frame: dict[str, Any]) -> bytes:
    """A progress frame line (§1.8): a bare object whose `type` is "progress", no id."""
    return _line({"type": "progress", **{k: v for k, v in frame.items() if k != "type"}})


def error_object(exc: BaseException) -> dict[str, Any]:
    """Map an exception to a JSON-RPC error object, once for the whole transport.

    An `LcgError` answers with its own code, wire message and data. Anything else is a bug:
    it is logged with its traceback and answered with a generic -32000 that leaks nothing.
    """
    if isinstance(exc, LcgError):
        error: dict[str, Any] = {"code": exc.rpc_code, "message": exc.wire_message()}
        data = exc.wire_data()
        if data is not None:
            error["data"] = data
        return error
    logger.exception("unexpected error while handling a request", exc_info=exc)
    return {"code": INTERNAL_ERROR, "message": GENERIC_ERROR_MESSAGE}
