"""The HTTP transport's security model, against real uvicorn servers on loopback.

Loopback only unless a token is set; with a token every /api/ request needs it; a foreign Host
header (DNS rebinding) and a foreign Origin (cross-site requests) are refused; every failure has
the one error shape `{"error": {"code", "message", "data"?}}`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ui_support import assert_error_shape, request, running_http

from lcg import Engine, Settings
from lcg.errors import ConfigError, LcgError
from lcg.service.http import EngineBackend, HttpService, allowed_hosts, host_allowed, is_loopback
from lcg.service.rpc.client import RpcClient

TOKEN = "s3cret-token"


def test_loopback_detection_and_the_host_allow_list() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1")
    assert is_loopback("127.8.9.10") and not is_loopback("0.0.0.0")
    assert not is_loopback("192.168.1.5") and not is_loopback("example.com")
    hosts = allowed_hosts("0.0.0.0", ["graph.lan"])
    assert host_allowed("localhost:8471", hosts) and host_allowed("[::1]:8471", hosts)
    assert host_allowed("GRAPH.LAN.", hosts) and host_allowed("127.0.0.1", hosts)
    assert not host_allowed("evil.example:8471", hosts) and not host_allowed(None, hosts)
    assert "0.0.0.0" not in hosts
    assert host_allowed("10.0.0.7:80", allowed_hosts("10.0.0.7"))


@pytest.mark.parametrize(
    "header",
    [
        "127.0.0.1:8471@evil.example",  # userinfo-like: the old check read the part before ':'
        "127.0.0.1@evil.example",
        "localhost:8471/evil",
        "localhost:8471 evil.example",
        "localhost:port",
        "localhost:99999",
        "[::1]evil.example",
        "[::1]:8471@evil.example",
        "user@localhost",
        "localhost:8471:1",
    ],
)
def test_a_host_header_that_is_not_strictly_host_and_port_is_refused(header: str) -> None:
    hosts = allowed_hosts("127.0.0.1", ["*"])  # even with every name allowed
    assert not host_allowed(header, hosts)
    assert not host_allowed(header, allowed_hosts("127.0.0.1"))


def test_a_userinfo_host_header_gets_400_from_the_server(
    settings: Settings, engine: Engine
) -> None:
    with running_http(settings, engine) as service:
        for host in (f"127.0.0.1:{service.port}@evil.example", "127.0.0.1@evil.example"):
            status, _, body = request(service, "GET", "/api/health", host=host)
            assert status == 400, host
            assert_error_shape(body)
        status, _, _ = request(service, "GET", "/api/health", host=f"127.0.0.1:{service.port}")
        assert status == 200


def test_a_non_loopback_bind_without_a_token_is_refused(settings: Settings, engine: Engine) -> None:
    with pytest.raises(ConfigError, match="LCG_API_TOKEN"):
        HttpService(settings, EngineBackend(engine), host="0.0.0.0", port=0)
    with pytest.raises(ConfigError, match="LCG_API_TOKEN"):
        HttpService(settings, EngineBackend(engine), host="192.168.77.1", port=0)
    open_hosts = Settings.for_home(settings.home, http_allowed_hosts="*")
    with pytest.raises(ConfigError, match="LCG_API_TOKEN"):
        HttpService(open_hosts, EngineBackend(engine), port=0)


def test_lcg_serve_http_refuses_a_public_host_without_a_token_before_starting(
    tmp_path: Path,
) -> None:
    home = tmp_path / "ws"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LCG_")}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "lcg.cli",
            "--home",
            str(home),
            "serve",
            "--http",
            "--host",
            "0.0.0.0",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "LCG_API_TOKEN" in done.stderr
    assert not (home / "db").exists()  # refused before the database was opened


def test_with_a_token_requests_without_it_get_401(settings: Settings, engine: Engine) -> None:
    guarded = Settings.for_home(settings.home, api_token=TOKEN)
    with running_http(guarded, engine) as service:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
            status, found, body = request(
                service, "POST", "/api/knowledge_status", {}, headers=headers
            )
            assert status == 401
            assert found["www-authenticate"] == "Bearer"
            assert_error_shape(body)
        status, _, body = request(service, "GET", "/api/health")
        assert status == 401
        good = {"Authorization": f"Bearer {TOKEN}"}
        status, _, body = request(service, "POST", "/api/knowledge_status", {}, headers=good)
        assert status == 200 and body["queryable"] is True
        status, _, body = request(service, "GET", "/api/health", headers=good)
        assert status == 200 and body["auth"] is True
        # The UI's files carry no data and load without the token (the page then asks for it).
        status, found, page = request(service, "GET", "/")
        assert status == 200 and "<canvas" in page


def test_a_token_makes_a_wildcard_bind_possible(settings: Settings, engine: Engine) -> None:
    guarded = Settings.for_home(settings.home, api_token=TOKEN)
    with running_http(guarded, engine, host="0.0.0.0") as service:
        assert service.url.startswith("http://127.0.0.1:")
        good = {"Authorization": f"Bearer {TOKEN}"}
        status, _, body = request(service, "GET", "/api/health", headers=good)
        assert status == 200 and body["state"] == "healthy"
        status, _, body = request(service, "GET", "/api/health")
        assert status == 401


def test_a_foreign_host_header_is_rejected(settings: Settings, engine: Engine) -> None:
    with running_http(settings, engine) as service:
        for host in ("evil.example", f"evil.example:{service.port}", "", "127.0.0.2"):
            for method, path in (
                ("GET", "/"),
                ("GET", "/api/health"),
                ("POST", "/api/knowledge_status"),
            ):
                status, _, body = request(
                    service, method, path, {} if method == "POST" else None, host=host
                )
                assert status == 400, (host, path)
                assert_error_shape(body)
        for host in (
            f"localhost:{service.port}",
            f"127.0.0.1:{service.port}",
            f"[::1]:{service.port}",
        ):
            status, _, _ = request(service, "GET", "/api/health", host=host)
            assert status == 200, host


def test_cross_origin_requests_are_refused_unless_configured(
    settings: Settings, engine: Engine
) -> None:
    with running_http(settings, engine) as service:
        own = f"http://127.0.0.1:{service.port}"
        status, found, _ = request(
            service, "POST", "/api/knowledge_status", {}, headers={"Origin": own}
        )
        assert status == 200 and "access-control-allow-origin" not in found
        status, _, body = request(
            service, "POST", "/api/knowledge_status", {}, headers={"Origin": "https://evil.example"}
        )
        assert status == 403
        assert_error_shape(body)
        status, found, _ = request(
            service,
            "OPTIONS",
            "/api/knowledge_status",
            headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"},
        )
        assert status == 403 and "access-control-allow-origin" not in found
    allowed = Settings.for_home(settings.home, http_cors_origins="https://app.example")
    with running_http(allowed, engine) as service:
        status, found, _ = request(
            service,
            "OPTIONS",
            "/api/knowledge_status",
            headers={"Origin": "https://app.example", "Access-Control-Request-Method": "POST"},
        )
        assert status == 200 and found["access-control-allow-origin"] == "https://app.example"
        status, found, body = request(
            service, "POST", "/api/knowledge_status", {}, headers={"Origin": "https://app.example"}
        )
        assert status == 200 and found["access-control-allow-origin"] == "https://app.example"
        status, _, _ = request(
            service,
            "POST",
            "/api/knowledge_status",
            {},
            headers={"Origin": "https://other.example"},
        )
        assert status == 403


def test_an_origin_that_only_starts_with_the_servers_own_is_refused(
    settings: Settings, engine: Engine
) -> None:
    # The same-origin rule compares whole origins: a page at http://localhost.evil.example is
    # another site, though its origin starts with the server's own (Host: localhost).
    with running_http(settings, engine) as service:
        port = service.port
        cases = [
            ("localhost", "http://localhost.evil.example"),
            ("localhost", "https://localhost.evil.example"),
            ("localhost", "http://localhost:8080"),
            (f"localhost:{port}", f"http://localhost:{port}.evil.example"),
            (f"127.0.0.1:{port}", f"http://127.0.0.1:{port}0"),
            (f"127.0.0.1:{port}", f"http://127.0.0.1:{port}@evil.example"),
        ]
        for host, origin in cases:
            for method, body in (("POST", {}), ("OPTIONS", None)):
                headers = {"Origin": origin, "Access-Control-Request-Method": "POST"}
                status, found, answer = request(
                    service, method, "/api/knowledge_status", body, headers=headers, host=host
                )
                assert status == 403, (host, origin, method)
                assert "access-control-allow-origin" not in found
                assert_error_shape(answer)
        for host in ("localhost", f"localhost:{port}", f"127.0.0.1:{port}"):
            status, _, _ = request(
                service,
                "POST",
                "/api/knowledge_status",
                {},
                headers={"Origin": f"http://{host}"},
                host=host,
            )
            assert status == 200, host
    allowed = Settings.for_home(settings.home, http_cors_origins="https://app.example")
    with running_http(allowed, engine) as service:
        for origin in ("https://app.example.evil.example", "https://app.examplex"):
            status, found, _ = request(
                service, "POST", "/api/knowledge_status", {}, headers={"Origin": origin}
            )
            assert status == 403 and "access-control-allow-origin" not in found, origin


def test_every_error_has_the_one_shape(settings: Settings, engine: Engine) -> None:
    with running_http(settings, engine, scopes="read,write") as service:
        status, _, body = request(service, "POST", "/api/knowledge_nope", {})
        assert status == 404 and "knowledge_nope" in assert_error_shape(body)["message"]
        # Hidden by scope: the same answer as a method that does not exist.
        status, _, body = request(
            service, "POST", "/api/knowledge_query_cypher", {"query": "RETURN 1"}
        )
        assert status == 404
        assert_error_shape(body)
        status, _, body = request(
            service, "POST", "/api/knowledge_list_entities", {"num_results": "x"}
        )
        assert status == 400
        assert assert_error_shape(body)["data"] == {"field": "num_results"}
        status, _, body = request(service, "POST", "/api/knowledge_status", b"{not json")
        assert status == 400
        assert assert_error_shape(body, -32700)["message"].startswith("Parse error: ")
        status, _, body = request(service, "GET", "/api/knowledge_status")
        assert status == 405
        assert_error_shape(body)
        status, _, body = request(service, "GET", "/no/such/page")
        assert status == 404
        assert_error_shape(body)
        status, _, body = request(
            service, "POST", "/api/knowledge_get_entity_timeline", {"entity_uuid": "missing"}
        )
        assert status == 404
        assert_error_shape(body)


def test_pages_may_load_nothing_from_elsewhere(settings: Settings, engine: Engine) -> None:
    with running_http(settings, engine) as service:
        status, found, page = request(service, "GET", "/")
        assert status == 200
        csp = found["content-security-policy"]
        assert "default-src 'self'" in csp and "connect-src 'self'" in csp
        assert found["x-content-type-options"] == "nosniff"
        assert "http://" not in page and "https://" not in page
        for name in ("graph.js", "app.js", "api.js", "shapes.js", "style.css"):
            status, _, text = request(service, "GET", f"/ui/{name}")
            assert status == 200 and "http://" not in text and "https://" not in text, name


def _wal_files(settings: Settings) -> list[Path]:
    return sorted(p for p in settings.wal_dir.rglob("*.jsonl") if p.is_file())


def test_a_full_wipe_needs_admin_over_http_and_keeps_the_wal(
    settings: Settings, engine: Engine
) -> None:
    # The default scopes (read,write) once let `knowledge_clear_all {"confirm": true}` delete
    # every entity, fact, episode and WAL file.
    with running_http(settings, engine, scopes="read,write") as service:
        status, _, body = request(service, "GET", "/api/health")
        assert status == 200
        assert "knowledge_clear_all" not in body["methods"]
        assert "knowledge_assert_entity" in body["methods"]
        status, _, body = request(
            service, "POST", "/api/knowledge_assert_entity", {"name": "Apollo 11"}
        )
        assert status == 200, body
        wal_before = _wal_files(settings)
        assert wal_before
        status, _, body = request(service, "POST", "/api/knowledge_clear_all", {"confirm": True})
        assert status == 404, body
        assert_error_shape(body)
        status, _, body = request(service, "POST", "/api/knowledge_status", {})
        assert body["entity_count"] == 1
    with running_http(settings, engine, scopes="read,write,admin") as service:
        status, _, body = request(service, "POST", "/api/knowledge_clear_all", {"confirm": True})
        assert status == 200, body
        status, _, body = request(service, "POST", "/api/knowledge_status", {})
        assert body["entity_count"] == 0
    assert _wal_files(settings) == wal_before  # preserve_wal defaults to keeping the WAL


def test_a_second_serve_http_on_a_busy_workspace_prints_one_line(tmp_path: Path) -> None:
    home = tmp_path / "ws"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LCG_")}
    env.update(LCG_KUZU_BUFFER_POOL_MB="256", LCG_EMBEDDER="hash")
    command = [sys.executable, "-m", "lcg.cli", "--home", str(home), "serve", "--http"]
    first = subprocess.Popen(
        [*command, "--port", "0"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            assert first.poll() is None, "the first service exited"
            try:
                with RpcClient(home / "service.sock", timeout=5) as client:
                    if client.call("health_check")["state"] == "healthy":
                        break
            except (OSError, LcgError):
                pass
            assert time.monotonic() < deadline, "the first service never became healthy"
            time.sleep(0.2)
        second = subprocess.run(
            [*command, "--port", "0"], env=env, capture_output=True, text=True, timeout=120
        )
    finally:
        first.terminate()
        first.wait(60)
    assert second.returncode != 0
    assert "Traceback" not in second.stderr and "ExceptionGroup" not in second.stderr
    errors = [line for line in second.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "already listening" in errors[0], second.stderr
