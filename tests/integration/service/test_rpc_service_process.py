"""`lcg serve` as a real process: the reference quickstart, self-recovery, SIGTERM under load."""

from __future__ import annotations

import json
import signal
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from rpc_support import ServiceProcess, short_socket_dir, wait_healthy

from lcg.config import Settings
from lcg.engine import open_engine
from lcg.graph import reads
from lcg.service.rpc.client import RpcClient, RpcError, ServiceGoneError


@pytest.fixture
def sock_path() -> Iterator[Path]:
    with short_socket_dir() as directory:
        yield directory / "service.sock"


# The reference README's quickstart client, unmodified: one connection per call,
# newline-delimited JSON-RPC, read until the newline.
def quickstart_call(socket_path: str, method: str, params: dict[str, Any], id: int = 1) -> Any:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(socket_path)
    request = {"jsonrpc": "2.0", "id": id, "method": method, "params": params}
    s.sendall((json.dumps(request) + "\n").encode())
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
    s.close()
    return json.loads(buf)


def test_the_reference_quickstart_works_against_lcg_serve(tmp_path: Path, sock_path: Path) -> None:
    service = ServiceProcess(tmp_path, sock_path).start()
    try:
        wait_healthy(sock_path)
        path = str(sock_path)
        status = quickstart_call(path, "knowledge_status", {})
        assert status["jsonrpc"] == "2.0" and status["id"] == 1
        assert status["result"]["queryable"] is True
        assert status["result"]["entity_count"] == 0
        created = quickstart_call(
            path,
            "knowledge_assert_entity",
            {"name": "Apollo 11", "summary": "First crewed Moon landing", "group_id": "liminis"},
            id=2,
        )
        assert created["id"] == 2 and created["result"]["created"] is True
        listed = quickstart_call(path, "knowledge_list_entities", {"num_results": 10}, id=3)
        nodes = listed["result"]["nodes"]
        assert listed["result"]["count"] == 1
        assert nodes[0]["name"] == "Apollo 11"
        assert nodes[0]["uuid"] == created["result"]["entity_uuid"]
    finally:
        assert service.stop(signal.SIGINT) == 0  # Ctrl-C shuts down as gracefully as SIGTERM
    assert not sock_path.exists()
    states = [e["state"] for e in service.events() if e["type"] == "service_state"]
    assert states[-2:] == ["shutting_down", "stopped"]
    assert {e["method"] for e in service.events() if e["type"] == "ipc_call"} >= {
        "health_check",
        "knowledge_status",
        "knowledge_assert_entity",
        "knowledge_list_entities",
    }


def _snapshot(client: RpcClient) -> dict[str, Any]:
    status = client.call("knowledge_status")
    nodes = client.call("knowledge_get_nodes_by_group", {"group_ids": ["liminis", "other"]})
    edges = client.call("knowledge_get_edges_by_group", {"group_ids": ["liminis", "other"]})
    return {
        "counts": (status["entity_count"], status["relationship_count"], status["episode_count"]),
        "nodes": sorted(
            (n["uuid"], n["name"], n["group_id"], n["summary"]) for n in nodes["nodes"]
        ),
        "edges": sorted(
            (e["uuid"], e["source_node_uuid"], e["target_node_uuid"], e["name"], e["fact"])
            for e in edges["edges"]
        ),
    }


def test_a_corrupt_database_is_rebuilt_from_the_wal_at_startup(
    tmp_path: Path, sock_path: Path
) -> None:
    service = ServiceProcess(tmp_path, sock_path).start()
    try:
        wait_healthy(sock_path)
        with RpcClient(sock_path) as client:
            for i in range(30):
                group = "liminis" if i % 3 else "other"
                client.call(
                    "knowledge_assert_entity",
                    {"name": f"entity {i}", "summary": f"summary {i}", "group_id": group},
                )
            for i in range(1, 20):
                if i % 3:
                    client.call(
                        "knowledge_assert_relationship",
                        {
                            "source_name": f"entity {i}",
                            "target_name": f"entity {i + 1 if (i + 1) % 3 else i + 2}",
                            "predicate": "precedes",
                        },
                    )
            before = _snapshot(client)
    finally:
        assert service.stop() == 0
    assert before["counts"][0] == 30 and before["counts"][1] > 5

    db = tmp_path / ".lcg" / "db" / "liminis.db"
    with db.open("r+b") as fh:
        fh.write(b"\xde\xad\xbe\xef" * 1024)  # the header: Kuzu refuses to open the file

    service = ServiceProcess(tmp_path, sock_path).start()
    try:
        wait_healthy(sock_path)
        with RpcClient(sock_path) as client:
            assert _snapshot(client) == before
            # ...and it takes writes again.
            assert client.call("knowledge_assert_entity", {"name": "after"})["created"] is True
    finally:
        assert service.stop() == 0
    phases = [e["phase"] for e in service.events() if e["type"] == "wal_auto_recovery"]
    assert phases == ["started", "moved_aside", "completed"]
    assert list(db.parent.glob("liminis.db.broken-*"))


def test_sigterm_during_a_burst_of_writes_loses_no_acknowledged_write(
    tmp_path: Path, sock_path: Path
) -> None:
    service = ServiceProcess(tmp_path, sock_path).start()
    acknowledged: list[tuple[str, str]] = []
    lock = threading.Lock()
    enough = threading.Event()
    failures: list[BaseException] = []

    def writer(worker: int) -> None:
        try:
            with RpcClient(sock_path, timeout=30) as client:
                for i in range(10_000):
                    name = f"w{worker}-{i}"
                    result = client.call("knowledge_assert_entity", {"name": name})
                    with lock:
                        acknowledged.append((name, result["entity_uuid"]))
                        if len(acknowledged) >= 60:
                            enough.set()
        except (ServiceGoneError, OSError):
            return  # the service went away mid-burst: expected
        except RpcError as exc:
            if exc.code != -32001:  # refused while shutting down is fine, anything else is not
                failures.append(exc)
        except BaseException as exc:
            failures.append(exc)

    try:
        wait_healthy(sock_path)
        threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
        for t in threads:
            t.start()
        assert enough.wait(60)
        service.send_signal(signal.SIGTERM)
        assert service.wait() == 0
        for t in threads:
            t.join(30)
    finally:
        service.stop()
    assert not failures, failures
    assert not sock_path.exists()
    stopped = [e for e in service.events() if e.get("state") == "stopped"]
    assert len(stopped) == 1 and stopped[0]["cancelled"] == 0

    settings = Settings.for_home(tmp_path / ".lcg", kuzu_buffer_pool_mb=256)
    engine = open_engine(settings)
    try:
        listed = anyio.run(reads.list_entities, engine, 100_000, None)
    finally:
        engine.close()
    stored = {n["name"]: n["uuid"] for n in listed["nodes"]}
    missing = [(name, uid) for name, uid in acknowledged if stored.get(name) != uid]
    assert not missing
