"""The HTTP API: routes derived from the registry, the same answers as JSON-RPC, and
`lcg serve --http` running both transports over one engine in one process."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from rpc_support import short_socket_dir
from ui_support import assert_error_shape, request, running_http

from lcg import Engine, Settings
from lcg.service.http import HttpService, serve_with_http
from lcg.service.registry import REGISTRY, dispatch
from lcg.service.rpc.client import RpcClient

# The method tests run on the embedded store and on a FalkorDB server (conftest).
BOTH_STORAGES = True

WAIT_SECONDS = 60.0


def _routes(service: HttpService) -> set[str]:
    status, _, spec = request(service, "GET", "/api/openapi.json")
    assert status == 200
    return {path.removeprefix("/api/") for path in spec["paths"]} - {"health"}


def test_routes_are_derived_from_the_registry_and_its_scopes(
    settings: Settings, engine: Engine
) -> None:
    def scoped(*scopes: str) -> set[str]:
        # lcg's own grouping: a destructive method (a whole-workspace wipe) needs admin.
        return {m.name for m in REGISTRY.values() if m.scope_for(False) in scopes}

    with running_http(settings, engine, scopes="read,write") as service:
        assert _routes(service) == scoped("read", "write")
        status, _, health = request(service, "GET", "/api/health")
        assert status == 200 and health["scopes"] == ["read", "write"]
        assert set(health["methods"]) == scoped("read", "write")
        assert "knowledge_query_cypher" not in health["methods"]
        assert "knowledge_clear_all" not in health["methods"]
    with running_http(settings, engine, scopes="all") as service:
        assert _routes(service) == scoped("read", "write", "cypher", "admin")
        assert "health_check" not in _routes(service)  # not a method of any scope


def test_http_calls_take_and_return_what_json_rpc_does(settings: Settings, engine: Engine) -> None:
    with running_http(settings, engine) as service:
        status, _, made = request(
            service,
            "POST",
            "/api/knowledge_assert_entity",
            {"name": "Ada Lovelace", "labels": ["Person"], "summary": "wrote the first program"},
        )
        assert status == 200
        status, _, listed = request(service, "POST", "/api/knowledge_list_entities", {})
        assert status == 200 and listed["count"] == 1
        assert listed == anyio.run(dispatch, engine, "knowledge_list_entities", {})
        assert made["entity_uuid"] == listed["nodes"][0]["uuid"] and made["created"] is True
        assert listed["nodes"][0]["name"] == "Ada Lovelace"
        assert listed["nodes"][0]["labels"] == ["Entity", "Person"]
        # An empty body is an empty params object, as a JSON-RPC `params: {}`.
        status, _, stats = request(service, "POST", "/api/knowledge_status")
        assert status == 200 and stats["entity_count"] == 1
        status, _, rows = request(
            service,
            "POST",
            "/api/knowledge_query_cypher",
            {"query": "MATCH (e:Entity) RETURN e.name"},
        )
        assert status == 200 and rows == {"rows": [["Ada Lovelace"]]}
        status, _, body = request(
            service, "POST", "/api/knowledge_assert_relationship", {"source_name": "Ada Lovelace"}
        )
        assert status == 400
        assert assert_error_shape(body)["data"]["field"] in ("target_name", "predicate")
        # Nothing was written by the refused call.
        status, _, after = request(service, "POST", "/api/knowledge_list_relationships", {})
        assert after["count"] == 0


class ServiceThread:
    """`serve_with_http` (what `lcg serve --http` runs) in a thread with its own event loop."""

    def __init__(self, settings: Settings, socket_path: Path, scopes: str) -> None:
        self.ready = threading.Event()
        self.http: HttpService | None = None
        self.errors: list[BaseException] = []
        run = functools.partial(
            serve_with_http,
            settings,
            port=0,
            scopes=scopes,
            socket_path=socket_path,
            handle_signals=False,
            ready=self._on_ready,
        )
        self.thread = threading.Thread(target=self._run, args=(run,), daemon=True)

    def _on_ready(self, http: HttpService) -> None:
        self.http = http
        self.ready.set()

    def _run(self, run: Any) -> None:
        try:
            anyio.run(run)
        except BaseException as exc:
            self.errors.append(exc)
        finally:
            self.ready.set()

    def start(self) -> HttpService:
        self.thread.start()
        assert self.ready.wait(WAIT_SECONDS) and self.http is not None, self.errors
        deadline = time.monotonic() + WAIT_SECONDS
        while True:
            status, _, health = request(self.http, "GET", "/api/health")
            if status == 200 and health["state"] == "healthy":
                return self.http
            assert time.monotonic() < deadline, health
            time.sleep(0.05)


@pytest.fixture
def both(settings: Settings) -> Iterator[tuple[ServiceThread, Path]]:
    with short_socket_dir() as directory:
        path = directory / "s.sock"
        service = ServiceThread(settings, path, "read,write,admin")
        service.start()
        try:
            yield service, path
        finally:
            if service.thread.is_alive() and service.http is not None:
                request(service.http, "POST", "/api/knowledge_close", {})
            service.thread.join(WAIT_SECONDS)
            assert not service.thread.is_alive()


def test_lcg_serve_http_shares_one_engine_between_the_socket_and_http(
    both: tuple[ServiceThread, Path],
) -> None:
    service, path = both
    assert service.http is not None
    status, _, _ = request(
        service.http, "POST", "/api/knowledge_assert_entity", {"name": "Grace Hopper"}
    )
    assert status == 200
    with RpcClient(path) as client:
        over_socket = client.call("knowledge_list_entities", {})
        client.call("knowledge_assert_entity", {"name": "Alan Turing"})
    _, _, over_http = request(service.http, "POST", "/api/knowledge_list_entities", {})
    assert over_socket["count"] == 1
    assert {n["name"] for n in over_http["nodes"]} == {"Grace Hopper", "Alan Turing"}


def test_knowledge_close_over_http_stops_the_whole_service(
    both: tuple[ServiceThread, Path],
) -> None:
    service, path = both
    assert service.http is not None
    status, _, body = request(service.http, "POST", "/api/knowledge_close", {})
    assert status == 200 and body == {"status": "closed"}
    service.thread.join(WAIT_SECONDS)
    assert not service.thread.is_alive() and service.errors == []
    assert not path.exists()  # the socket service shut down too, and removed its socket
