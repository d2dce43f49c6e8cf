"""The HTTP API needs a token on loopback too, unless the user opts out.

127.0.0.1 is reachable by every local user, unlike the 0600 Unix socket: with `--http` and no
`LCG_API_TOKEN`, another user (`nobody`) read and wrote the graph. Now the workspace's own token
(`<home>/http-token`, generated on first start, 0600) guards every `/api/` request; the UI's
address carries it in the fragment; `LCG_API_TOKEN` overrides it; `LCG_HTTP_AUTH=none` /
`lcg serve --http-no-token` is the explicit way back to no token, on loopback only.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rpc_support import short_socket_dir
from ui_support import assert_error_shape, request, running_http

from lcg import Engine, Settings
from lcg.config import load_settings
from lcg.errors import ConfigError
from lcg.service.http import EngineBackend, HttpService

SYSTEM_PYTHON = Path("/usr/bin/python3")
SETPRIV = shutil.which("setpriv")
NOBODY = 65534


def test_the_default_needs_the_workspace_token(settings: Settings, engine: Engine) -> None:
    with running_http(settings, engine) as service:
        token_file = settings.home / "http-token"
        assert service.token_file == token_file
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        assert token_file.read_text().strip() == service.token and len(service.token) >= 40
        for path, method in (("/api/knowledge_status", "POST"), ("/api/health", "GET")):
            status, found, body = request(service, method, path, {}, auth=False)
            assert status == 401 and found["www-authenticate"] == "Bearer", path
            assert_error_shape(body)
        status, _, body = request(
            service, "POST", "/api/knowledge_assert_entity", {"name": "Intruder"}, auth=False
        )
        assert status == 401
        status, _, body = request(service, "GET", "/api/health")  # with the workspace's token
        assert status == 200 and body["auth"] is True
        status, _, body = request(service, "POST", "/api/knowledge_get_nodes_by_group", {})
        assert status == 200 and body["nodes"] == []  # the refused write wrote nothing
        # The address to open carries the token in the fragment only (never sent to a server).
        assert service.browser_url == f"{service.url}/#token={service.token}"
        status, _, page = request(service, "GET", "/", auth=False)  # the page itself is public
        assert status == 200 and "<canvas" in page
    # The next start reuses the token: a client configured once keeps working.
    with running_http(settings, engine) as again:
        assert again.token == service.token


def test_lcg_api_token_overrides_the_workspace_token(settings: Settings, engine: Engine) -> None:
    chosen = dataclasses.replace(settings, api_token="chosen-token")
    with running_http(chosen, engine) as service:
        assert service.token == "chosen-token" and service.token_file is None
        assert service.browser_url == service.url + "/"  # the user's own secret is not printed
        good = {"Authorization": "Bearer chosen-token"}
        assert request(service, "GET", "/api/health", headers=good)[0] == 200
        assert request(service, "GET", "/api/health")[0] == 401
    assert not (settings.home / "http-token").exists()


def test_opting_out_serves_loopback_without_a_token_and_nothing_else(
    settings: Settings, engine: Engine
) -> None:
    open_settings = dataclasses.replace(settings, http_auth="none")
    with running_http(open_settings, engine) as service:
        assert service.token is None and service.token_file is None
        status, _, body = request(service, "GET", "/api/health")
        assert status == 200 and body["auth"] is False
    assert not (settings.home / "http-token").exists()
    with pytest.raises(ConfigError, match="LCG_API_TOKEN"):
        HttpService(open_settings, EngineBackend(engine), host="0.0.0.0", port=0)


def test_an_unknown_auth_mode_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="LCG_HTTP_AUTH"):
        load_settings(env={"LCG_HTTP_AUTH": "off"}, cwd=tmp_path)


def _nobody_can_run_python() -> str | None:
    if os.geteuid() != 0:
        return "needs root to run a client as another user (uid 65534)"
    if SETPRIV is None or not SYSTEM_PYTHON.exists():
        return "needs setpriv and /usr/bin/python3"
    return None


_CLIENT = """
import json, sys, urllib.request, urllib.error
port, path, body = int(sys.argv[1]), sys.argv[2], sys.argv[3]
req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body.encode() or None,
                             method="POST" if body else "GET")
try:
    with urllib.request.urlopen(req, timeout=30) as r:
        print(json.dumps([r.status, json.loads(r.read())]))
except urllib.error.HTTPError as e:
    print(json.dumps([e.code, json.loads(e.read())]))
"""


def _as_nobody(port: int, path: str, body: str = "") -> tuple[int, object]:
    done = subprocess.run(
        [
            str(SETPRIV),
            f"--reuid={NOBODY}",
            f"--regid={NOBODY}",
            "--clear-groups",
            str(SYSTEM_PYTHON),
            "-I",
            "-c",
            _CLIENT,
            str(port),
            path,
            body,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
        env={"PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    status, answer = json.loads(done.stdout)
    return int(status), answer


@pytest.mark.skipif(_nobody_can_run_python() is not None, reason=str(_nobody_can_run_python()))
def test_another_local_user_is_refused_without_the_token(
    settings: Settings, engine: Engine
) -> None:
    with running_http(settings, engine) as service:
        write = json.dumps({"name": "Planted by nobody"})
        assert _as_nobody(service.port, "/api/knowledge_assert_entity", write)[0] == 401
        assert _as_nobody(service.port, "/api/knowledge_get_nodes_by_group", "{}")[0] == 401
        status, answer = _as_nobody(service.port, "/api/health")
        assert status == 401, answer
        # ... and cannot read the token either: the workspace is the root user's, 0700/0600.
        token = str(settings.home / "http-token")
        done = subprocess.run(
            [
                str(SETPRIV),
                f"--reuid={NOBODY}",
                f"--regid={NOBODY}",
                "--clear-groups",
                "cat",
                token,
            ],
            capture_output=True,
            timeout=30,
        )
        assert done.returncode != 0
        status, _, body = request(service, "POST", "/api/knowledge_get_nodes_by_group", {})
        assert status == 200 and body["nodes"] == []


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(tmp_path: Path, *extra: str) -> tuple[str, Path]:
    """`lcg serve --http` until its address is printed, then stopped; its stderr and home."""
    home = tmp_path / ".lcg"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LCG_")}
    env["LCG_KUZU_BUFFER_POOL_MB"] = "256"
    env["LCG_EMBEDDER"] = "hash"
    with short_socket_dir() as directory:
        args = ["--home", str(home), "serve", "--socket", str(directory / "s.sock"), "--http"]
        proc = subprocess.Popen(
            [sys.executable, "-m", "lcg.cli", *args, "--port", str(_free_port()), *extra],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stderr is not None
        lines: list[str] = []
        deadline = time.monotonic() + 120
        try:
            while time.monotonic() < deadline:
                line = proc.stderr.readline()
                if not line:
                    break
                lines.append(line)
                if "Bearer" in line or "no token" in line:
                    break
        finally:
            proc.terminate()
            proc.wait(60)
            proc.stderr.close()
    return "".join(lines), home


def test_lcg_serve_http_prints_the_address_with_its_token(tmp_path: Path) -> None:
    err, home = _serve(tmp_path)
    token = (home / "http-token").read_text().strip()
    assert f"/#token={token}" in err, err
    assert f"the token in {home / 'http-token'}" in err
    err, _ = _serve(tmp_path, "--http-no-token")
    assert "every local user can read and write this graph" in err, err
    assert "#token=" not in err
