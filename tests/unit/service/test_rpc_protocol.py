"""The sans-I/O JSON-RPC layer: bytes in, messages out, one error mapping (docs/api.md §envelope, §errors, §error-styles, §degraded and §progress)."""

from __future__ import annotations

import json
import logging

import pytest

from lcg.errors import InvalidRequestError, NotFoundError, StorageError, UnavailableError
from lcg.service.rpc import protocol
from lcg.service.rpc.protocol import ProtocolError, Request, parse_request


def _decode(line: bytes) -> dict[str, object]:
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    value = json.loads(line)
    assert isinstance(value, dict)
    return value


def test_a_well_formed_request_is_parsed_with_its_raw_params() -> None:
    req = parse_request(b' {"jsonrpc":"2.0","id":7,"method":"m","params":{"a":1}} ')
    assert req == Request(7, "m", {"a": 1})
    assert not req.streaming


@pytest.mark.parametrize("request_id", [None, 0, "abc", {"k": [1, 2]}, [1], 1.5, True])
def test_any_json_id_is_accepted_and_echoed(request_id: object) -> None:
    line = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "m", "params": {}}).encode()
    req = parse_request(line)
    assert req.id == request_id
    assert _decode(protocol.encode_result(req.id, {"x": 1}))["id"] == request_id


def test_jsonrpc_value_is_not_checked_only_its_type() -> None:
    assert parse_request(b'{"jsonrpc":"1.0","id":1,"method":"m","params":null}').method == "m"


@pytest.mark.parametrize("missing", ["jsonrpc", "id", "method", "params"])
def test_each_of_the_four_members_is_required(missing: str) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "m", "params": {}}
    del body[missing]
    with pytest.raises(ProtocolError, match=missing):
        parse_request(json.dumps(body).encode())


@pytest.mark.parametrize(
    "line",
    [
        b"not json",
        b"{",
        b"[]",
        b'[{"jsonrpc":"2.0","id":1,"method":"m","params":{}}]',  # batches are not supported
        b'"a string"',
        b"42",
        b'{"jsonrpc":2,"id":1,"method":"m","params":{}}',
        b'{"jsonrpc":"2.0","id":1,"method":null,"params":{}}',
        b'{"jsonrpc":"2.0","id":1,"method":["m"],"params":{}}',
        b"\xff\xfe{}",
        b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":NaN}}',
        b"[" * 5000 + b"]" * 5000,
    ],
)
def test_malformed_lines_are_protocol_errors(line: bytes) -> None:
    with pytest.raises(ProtocolError):
        parse_request(line)


def test_an_id_too_deep_to_echo_is_refused() -> None:
    deep = b"[" * 600 + b"]" * 600
    with pytest.raises(ProtocolError, match="id"):
        parse_request(b'{"jsonrpc":"2.0","id":' + deep + b',"method":"m","params":{}}')


def test_a_line_over_the_limit_is_refused_without_parsing() -> None:
    with pytest.raises(ProtocolError, match="exceeds"):
        parse_request(b" " * (protocol.MAX_LINE_BYTES + 1))


def test_parse_error_response_has_a_null_id_and_code_32700() -> None:
    msg = _decode(protocol.encode_parse_error("missing field `id`"))
    assert msg == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": "Parse error: missing field `id`"},
    }


@pytest.mark.parametrize(
    ("token", "streaming"),
    [(True, True), ("tok", True), (0, True), (None, False)],
)
def test_a_non_null_progress_token_selects_streaming_mode(token: object, streaming: bool) -> None:
    req = Request(1, "m", {"_progress_token": token})
    assert req.streaming is streaming


def test_non_object_params_never_stream() -> None:
    assert not Request(1, "m", ["_progress_token"]).streaming
    assert not Request(1, "m", None).streaming


def test_progress_frames_are_bare_objects_typed_progress() -> None:
    frame = _decode(protocol.encode_progress({"message": "m", "mutations_replayed_so_far": 3}))
    assert frame == {"type": "progress", "message": "m", "mutations_replayed_so_far": 3}
    assert "id" not in frame and "jsonrpc" not in frame


def test_lcg_errors_map_to_their_code_message_and_data() -> None:
    err = protocol.error_object(InvalidRequestError("name is required", field="name"))
    assert err == {
        "code": -32000,
        "message": "IPC error: name is required",
        "data": {"field": "name"},
    }
    assert protocol.error_object(NotFoundError("entity", "x")) == {
        "code": -32000,
        "message": "IPC error: entity 'x' not found",
    }
    assert protocol.error_object(StorageError("boom"))["message"] == "database error: boom"
    assert protocol.error_object(UnavailableError("lbug_wal_corrupt")) == {
        "code": -32001,
        "message": "DB unavailable, recovery required",
        "data": {"reason": "lbug_wal_corrupt"},
    }


def test_unknown_exceptions_become_a_generic_error_and_are_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.ERROR, logger="lcg.service.rpc.protocol"):
        err = protocol.error_object(RuntimeError("secret internal detail"))
    assert err == {"code": -32000, "message": protocol.GENERIC_ERROR_MESSAGE}
    assert "secret" not in err["message"]
    assert caplog.records and caplog.records[0].exc_info is not None


def test_an_error_response_omits_data_when_absent() -> None:
    msg = _decode(protocol.encode_error(3, {"code": -32000, "message": "IPC error: x"}))
    assert msg == {"jsonrpc": "2.0", "id": 3, "error": {"code": -32000, "message": "IPC error: x"}}


def test_a_result_that_cannot_be_encoded_becomes_an_error_not_silence(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.ERROR, logger="lcg.service.rpc.protocol"):
        msg = _decode(protocol.encode_result(5, {"big": 2**70}))
    assert msg["id"] == 5
    assert msg["error"] == {"code": -32000, "message": protocol.GENERIC_ERROR_MESSAGE}


def test_blank_lines_are_recognised() -> None:
    assert protocol.is_blank(b"  \t\r")
    assert not protocol.is_blank(b" {} ")
