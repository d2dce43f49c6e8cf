"""Hostile input: thousands of malformed requests never crash the socket service.

Every line gets a JSON-RPC answer (an error, or a result when the fuzzer happened to build a
valid call) or the connection is closed cleanly; afterwards the service still serves a valid
request, and no request reached the "unexpected exception" path.
"""

from __future__ import annotations

import json
import logging
import random
import socket
import threading
from typing import Any

import pytest
from rpc_support import (
    WAIT_SECONDS,
    raw_connect,
    read_message,
    running_server,
    send_line,
    wait_settled,
)

from lcg.config import Settings
from lcg.service.registry import REGISTRY
from lcg.service.rpc.client import RpcClient

N_REQUESTS = 2400
# Never fuzz the methods that end the service or wipe the graph with a lucky `confirm`.
SAFE_METHODS = sorted(
    set(REGISTRY)
    - {
        "knowledge_close",
        "knowledge_clear_all",
        "knowledge_delete_by_group",
        "knowledge_query_cypher",
    }
)
PARAM_NAMES = [
    "name",
    "group_id",
    "group_ids",
    "num_results",
    "last_n",
    "entity_uuid",
    "uuids",
    "source",
    "summary",
    "labels",
    "attributes",
    "source_name",
    "target_name",
    "predicate",
    "fact",
    "valid_at",
    "from_seq",
    "to_seq",
    "dry_run",
    "force_clear",
    "episode_uuid",
    "relation_type",
    "_progress_token",
]


def _hostile_value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(14)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False])
    if kind == 2:
        return rng.choice([0, -1, 1, 2**31, 2**63 - 1, -(2**63), 10**18])
    if kind == 3:
        return rng.choice([0.5, -1.5, 1e308, -0.0, 1e-300])
    if kind == 4:
        return "".join(chr(rng.randrange(1, 0x2FFF)) for _ in range(rng.randrange(0, 40)))
    if kind == 5:
        return "x" * rng.choice([0, 1, 1000, 100_000])
    if kind == 6:
        return rng.choice(["", " ", "\u0000", "liminis", "../../etc", "%2F", "a/b", "\t\n"])
    if kind == 7:
        return "2026-13-45T99:99:99Z"
    if kind in (8, 9) and depth < 3:
        return [_hostile_value(rng, depth + 1) for _ in range(rng.randrange(0, 4))]
    if kind in (10, 11) and depth < 3:
        return {rng.choice(PARAM_NAMES): _hostile_value(rng, depth + 1) for _ in range(3)}
    if kind == 12:
        return "00000000-0000-4000-8000-000000000000"
    return rng.choice(["Entity", ["Entity"], {"k": "v"}, [], {}])


def _hostile_line(rng: random.Random) -> bytes:
    kind = rng.randrange(16)
    method = rng.choice(SAFE_METHODS)
    params = {rng.choice(PARAM_NAMES): _hostile_value(rng) for _ in range(rng.randrange(0, 5))}
    if kind == 0:  # random bytes
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200))).replace(b"\n", b" ")
    if kind == 1:  # truncated JSON
        full = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
        return full[: rng.randrange(1, max(2, len(full) - 1))].encode()
    if kind == 2:  # a member missing
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        del body[rng.choice(list(body))]
        return json.dumps(body).encode()
    if kind == 3:  # wrong member types
        return json.dumps(
            {
                "jsonrpc": _hostile_value(rng),
                "id": _hostile_value(rng),
                "method": _hostile_value(rng),
                "params": params,
            }
        ).encode()
    if kind == 4:  # unknown method names
        name = rng.choice(
            ["", " ", "rpc.discover", "KNOWLEDGE_STATUS", "x" * 10_000, "\u202e", method + "_"]
        )
        return json.dumps(
            {"jsonrpc": "2.0", "id": rng.randrange(10**6), "method": name, "params": {}}
        ).encode()
    if kind == 5:  # deep nesting, beyond and within the parser's limit
        depth = rng.choice([50, 300, 1100, 20_000])
        return (
            b'{"jsonrpc":"2.0","id":1,"method":"'
            + method.encode()
            + b'","params":'
            + b"[" * depth
            + b"]" * depth
            + b"}"
        )
    if kind == 6:  # deeply nested id
        depth = rng.choice([100, 600])
        return (
            b'{"jsonrpc":"2.0","id":'
            + b"[" * depth
            + b"]" * depth
            + b',"method":"health_check","params":{}}'
        )
    if kind == 7:  # huge string params
        return json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": method,
                "params": {rng.choice(PARAM_NAMES): "y" * 300_000},
            }
        ).encode()
    if kind == 8:  # batches and scalars
        return rng.choice([b"[]", b"[{}]", b"null", b"1", b'"s"', b"{}", b"true"])
    if kind == 9:  # invalid UTF-8 and lone surrogates inside strings
        return rng.choice(
            [
                b'{"jsonrpc":"2.0","id":1,"method":"\xff\xfe","params":{}}',
                b'{"jsonrpc":"2.0","id":1,"method":"health_check","params":{"a":"\\ud800"}}',
                b'{"jsonrpc":"2.0","id":"\xc0\x80","method":"health_check","params":{}}',
            ]
        )
    if kind == 10:  # NaN / Infinity / duplicate keys / trailing garbage
        return rng.choice(
            [
                b'{"jsonrpc":"2.0","id":NaN,"method":"health_check","params":{}}',
                b'{"jsonrpc":"2.0","id":1,"method":"health_check","params":{"n":Infinity}}',
                b'{"jsonrpc":"2.0","id":1,"id":2,"method":"health_check","params":{}}',
                b'{"jsonrpc":"2.0","id":1,"method":"health_check","params":{}} trailing',
                b'{"jsonrpc":"2.0","id":1,"method":"health_check","params":{}}{}',
            ]
        )
    # Well-formed envelopes with hostile params for a real method.
    return json.dumps(
        {
            "jsonrpc": "2.0",
            "id": _hostile_value(rng) if kind == 11 else rng.randrange(10**9),
            "method": method,
            "params": params if kind != 12 else _hostile_value(rng),
        }
    ).encode()


def _check_answer(msg: dict[str, Any]) -> None:
    assert msg.get("jsonrpc") == "2.0" and "id" in msg, msg
    if "error" in msg:
        assert msg["error"]["code"] in (-32700, -32000, -32001), msg
        assert isinstance(msg["error"]["message"], str)
        if msg["error"]["code"] == -32700:
            assert msg["id"] is None
    else:
        assert isinstance(msg["result"], dict), msg


def test_thousands_of_hostile_requests_never_crash_the_service(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    rng = random.Random(20261130)
    answered = closed = 0
    with (
        caplog.at_level(logging.ERROR, logger="lcg"),
        running_server(settings) as (server, path, _),
    ):
        wait_settled(server)
        sock, reader = raw_connect(path)
        try:
            for _ in range(N_REQUESTS):
                send_line(sock, _hostile_line(rng))
                while True:  # streaming calls may send progress frames first
                    line = reader.readline()
                    if not line:
                        closed += 1
                        sock.close()
                        reader.close()
                        sock, reader = raw_connect(path)
                        break
                    msg = json.loads(line)
                    if msg.get("type") == "progress" and "id" not in msg:
                        continue
                    _check_answer(msg)
                    answered += 1
                    break
        finally:
            sock.close()
            reader.close()
        # A pipelined burst of garbage, then a valid call on the same connection. A writer
        # thread sends while this one reads: the server applies backpressure, so a client that
        # writes everything before reading would deadlock against its own unread answers.
        burst = b"".join(_hostile_line(rng).replace(b"\n", b" ") + b"\n" for _ in range(200))
        final = b'{"jsonrpc":"2.0","id":"final","method":"health_check","params":{}}\n'
        sock, reader = raw_connect(path)
        with sock, reader:
            sender = threading.Thread(target=sock.sendall, args=(burst + final,))
            sender.start()
            while True:
                msg = read_message(reader)
                if msg.get("id") == "final":
                    break
            assert msg["result"]["healthy"] is True
            sender.join(WAIT_SECONDS)
        with RpcClient(path) as client:
            assert client.call("health_check")["healthy"] is True
            assert (
                client.call("knowledge_assert_entity", {"name": "still alive"})["created"] is True
            )
    assert answered + closed == N_REQUESTS
    assert answered >= N_REQUESTS * 0.99
    unexpected = [r for r in caplog.records if r.name.startswith("lcg.service")]
    assert not unexpected, [r.getMessage() for r in unexpected[:5]]


def test_abrupt_disconnects_mid_request_do_not_disturb_the_service(settings: Settings) -> None:
    with running_server(settings) as (server, path, _):
        wait_settled(server)
        for i in range(50):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(str(path))
            if i % 2:
                s.sendall(
                    b'{"jsonrpc":"2.0","id":1,"method":"knowledge_list_entities","params":{}}\n'
                )
            else:
                s.sendall(b'{"jsonrpc":"2.0","id":1,"meth')  # half a request, then gone
            s.close()
        with RpcClient(path) as client:
            assert client.call("health_check")["healthy"] is True
