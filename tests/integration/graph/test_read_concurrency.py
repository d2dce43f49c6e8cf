"""Every read method at once from more clients than the reader pool has connections: a read
that takes a second pooled connection while holding one deadlocks the service once every connection is held by such a read. Runs against a real `lcg serve` process (pool of
2 readers, its default) over its Unix socket and over HTTP, with timeouts, so a deadlock fails
the test instead of hanging it."""

from __future__ import annotations

import http.client
import json
import random
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rpc_support import ServiceProcess, short_socket_dir, wait_healthy

from lcg.service.registry import REGISTRY
from lcg.service.rpc.client import RpcClient, RpcError

CLIENTS = 10  # > the service's 2 pooled reader connections
ROUNDS = 3
CALL_TIMEOUT = 20.0  # seconds one call may take before the test calls it a hang
TOTAL_TIMEOUT = 240.0
# Methods outside the "read" scope that only read (or write a file, not the graph).
READ_ONLY_OTHERS = {"health_check", "knowledge_query_cypher", "knowledge_export_graph"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stop(service: ServiceProcess) -> None:
    """SIGTERM, then SIGKILL: a deadlocked service does not stop on SIGTERM."""
    assert service.proc is not None
    if service.proc.poll() is None:
        service.send_signal(signal.SIGTERM)
        try:
            service.proc.wait(20)
        except subprocess.TimeoutExpired:
            service.proc.kill()
            service.proc.wait()


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, int]]:
    monkeypatch.setenv("LIMINIS_WORKSPACE_ROOT", str(tmp_path))  # knowledge_validate_corrections
    port = _free_port()
    with short_socket_dir() as directory:
        sock = directory / "s.sock"
        service = ServiceProcess(tmp_path, sock, "--http", "--port", str(port)).start()
        try:
            wait_healthy(sock)
            yield sock, port
        finally:
            _stop(service)


def _seed(sock: Path) -> dict[str, str]:
    with RpcClient(sock, timeout=60) as c:
        ids = {}
        for name in ("Ada Lovelace", "Charles Babbage", "Analytical Engine"):
            made = c.call(
                "knowledge_assert_entity",
                {"name": name, "group_id": "g1", "summary": f"{name} of the 1840s"},
            )
            ids[name] = made["entity_uuid"]
        c.call(
            "knowledge_assert_relationship",
            {
                "source_name": "Ada Lovelace",
                "target_name": "Analytical Engine",
                "predicate": "WROTE_NOTES_ON",
                "group_id": "g1",
            },
        )
        facts = c.call("knowledge_list_relationships", {"group_ids": ["g1"]})
    return {"entity": ids["Ada Lovelace"], "fact": facts["facts"][0]["uuid"]}


def _calls(ids: dict[str, str], client: int) -> list[tuple[str, dict[str, Any]]]:
    """One call of every read method (valid params, so each must succeed)."""
    g = ["g1"]
    return [
        ("health_check", {}),
        ("knowledge_status", {}),
        ("knowledge_find_entities", {"query": "Ada", "group_ids": g}),
        ("knowledge_find_entities", {"query": "engine", "center_node_uuid": ids["entity"]}),
        ("knowledge_find_relationships", {"query": "notes", "group_ids": g}),
        ("knowledge_find_relationships", {"query": "notes", "as_of": "2030-01-01T00:00:00Z"}),
        ("knowledge_get_changes", {"since": "2000-01-01T00:00:00Z"}),
        ("knowledge_get_context", {"query": "Ada Lovelace", "group_ids": g}),
        ("knowledge_code_where", {"name": "Ada", "group_id": "g1"}),
        ("knowledge_code_calls", {"name": "Ada", "group_id": "g1"}),
        ("knowledge_code_changes", {"since": "2000-01-01T00:00:00Z", "group_id": "g1"}),
        ("knowledge_get_edges_by_group", {"group_ids": g}),
        ("knowledge_get_edges_by_uuids", {"uuids": [ids["fact"]]}),
        ("knowledge_get_entities_by_source", {"source": "anything", "group_ids": g}),
        ("knowledge_get_entity_neighbors", {"entity_uuid": ids["entity"]}),
        ("knowledge_get_entity_timeline", {"entity_uuid": ids["entity"]}),
        ("knowledge_get_entity_timeline", {"name": "Ada Lovelace", "group_id": "g1"}),
        ("knowledge_get_episodes", {"group_id": "g1", "last_n": 5}),
        ("knowledge_get_nodes_by_group", {"group_ids": g}),
        ("knowledge_list_entities", {"group_ids": g}),
        ("knowledge_list_relationships", {"group_ids": g}),
        ("knowledge_list_relationships", {"as_of": "2030-01-01T00:00:00Z"}),
        ("knowledge_rebuild_status", {"job_id": "no-such-job"}),  # answers "not found"
        ("knowledge_search_passages", {"query": "Ada"}),
        ("knowledge_validate_corrections", {}),
        ("knowledge_query_cypher", {"query": "MATCH (e:Entity) RETURN count(e)"}),
        ("knowledge_export_graph", {"path": f"export-{client}-{time.monotonic_ns()}.jsonl"}),
    ]


def test_the_calls_cover_every_read_method() -> None:
    reads = {name for name, m in REGISTRY.items() if m.scope == "read"} | READ_ONLY_OTHERS
    assert {name for name, _ in _calls({"entity": "e", "fact": "f"}, 0)} == reads


def _run_clients(n: int, work: Any) -> list[str]:
    """Run `work(i, failures)` in `n` threads; a thread still running at the deadline fails."""
    failures: list[str] = []
    threads = [threading.Thread(target=work, args=(i, failures), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + TOTAL_TIMEOUT
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    stuck = sum(t.is_alive() for t in threads)
    if stuck:
        failures.append(f"{stuck} client(s) still waiting after {TOTAL_TIMEOUT:.0f} s")
    return failures


def test_every_read_method_at_once_from_more_clients_than_pooled_readers(
    served: tuple[Path, int],
) -> None:
    sock, _ = served
    ids = _seed(sock)

    def work(i: int, failures: list[str]) -> None:
        rng = random.Random(i)
        try:
            with RpcClient(sock, timeout=CALL_TIMEOUT) as c:
                for _ in range(ROUNDS):
                    calls = _calls(ids, i)
                    rng.shuffle(calls)
                    for method, params in calls:
                        try:
                            c.call(method, params)
                        except RpcError as exc:
                            if method == "knowledge_rebuild_status" and "not found" in str(exc):
                                continue
                            failures.append(f"client {i} {method}: {exc}")
                            return
                        except Exception as exc:
                            failures.append(f"client {i} {method}: {type(exc).__name__}: {exc}")
                            return
        except OSError as exc:
            failures.append(f"client {i}: {exc}")

    failures = _run_clients(CLIENTS, work)
    assert not failures, failures[:5]
    with RpcClient(sock, timeout=CALL_TIMEOUT) as c:  # the service still answers
        assert c.call("health_check")["healthy"] is True


def test_concurrent_status_over_http_answers(served: tuple[Path, int], tmp_path: Path) -> None:
    sock, port = served
    _seed(sock)
    # The service generated its workspace's token at start; a client reads it from there.
    auth = {"Authorization": "Bearer " + (tmp_path / ".lcg" / "http-token").read_text().strip()}

    def work(i: int, failures: list[str]) -> None:
        for _ in range(25):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=CALL_TIMEOUT)
            try:
                conn.request("POST", "/api/knowledge_status", body=b"{}", headers=auth)
                response = conn.getresponse()
                body = json.loads(response.read())
                if response.status != 200 or body.get("queryable") is not True:
                    failures.append(f"client {i}: HTTP {response.status} {body}")
                    return
            except (OSError, ValueError) as exc:
                failures.append(f"client {i}: {type(exc).__name__}: {exc}")
                return
            finally:
                conn.close()

    failures = _run_clients(CLIENTS, work)
    assert not failures, failures[:5]
