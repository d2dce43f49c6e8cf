#!/usr/bin/env python3
"""CI: a plain `pip install <checkout>` (no extras) into a fresh venv starts every entry point.

`make test` runs in a venv with `.[dev,server]`, whose tools pull in packages lcg imports but might
forget to declare; this step installs exactly what a user's `pip install lcg` installs and
runs, from a temporary directory (no source checkout to lean on):

    lcg --help
    lcg demo                      (in an empty directory)
    the installed package holds no file of examples/apollo/ (third-party: tests only)
    lcg serve                     (polls health_check on its Unix socket until healthy,
                                   then SIGTERM, and checks it exits 0)
    lcg mcp                       (an MCP client of the `mcp` SDK, run by the venv's own
                                   Python, initialises a session and lists the tools)

Usage: python3 .ci/smoke_install.py [CHECKOUT]   (default: this script's repository)
Exits non-zero, naming the step, on the first failure. Standard library only.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SERVE_READY_S = 60.0
STEP_TIMEOUT_S = 300.0

# Run by the venv's Python: every file of the installed lcg package, relative to it.
LIST_PACKAGE = """
import pathlib, lcg
root = pathlib.Path(lcg.__file__).parent
print("\\n".join(str(p.relative_to(root)) for p in sorted(root.rglob("*"))))
"""

# Run by the venv's Python: the installed `mcp` SDK's stdio client against `lcg mcp`.
MCP_CLIENT = """
import sys, anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

async def main() -> None:
    params = StdioServerParameters(command=sys.argv[1], args=["--home", sys.argv[2], "mcp"])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = (await session.list_tools()).tools
    names = sorted(t.name for t in tools)
    assert "knowledge_process_chunk" in names and "knowledge_status" in names, names
    print(f"mcp: {len(names)} tools, e.g. {', '.join(names[:4])}")

anyio.run(main)
"""


def step(title: str) -> None:
    print(f"== smoke-install: {title}", flush=True)


def run(args: list[str], *, cwd: Path, env: dict[str, str], title: str) -> str:
    started = time.monotonic()
    proc = subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=STEP_TIMEOUT_S
    )
    took = time.monotonic() - started
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-4000:])
        raise SystemExit(f"smoke-install: {title} failed with rc {proc.returncode}")
    print(f"   ok in {took:.1f} s", flush=True)
    return proc.stdout


def health(sock_path: Path) -> dict[str, object] | None:
    """One health_check over the Unix socket (JSON-RPC, one line each way); None if not up."""
    request = {"jsonrpc": "2.0", "id": 1, "method": "health_check", "params": {}}
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(5)
            conn.connect(str(sock_path))
            conn.sendall(json.dumps(request).encode() + b"\n")
            data = b""
            while not data.endswith(b"\n"):
                chunk = conn.recv(65536)
                if not chunk:
                    break
                data += chunk
    except OSError:
        return None
    reply = json.loads(data)
    result = reply.get("result")
    return result if isinstance(result, dict) else None


def serve(lcg: Path, home: Path, env: dict[str, str]) -> None:
    sock_path = home / "service.sock"
    proc = subprocess.Popen(
        [str(lcg), "--home", str(home), "serve", "--socket", str(sock_path)],
        cwd=home.parent,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + SERVE_READY_S
        state: dict[str, object] | None = None
        while time.monotonic() < deadline and proc.poll() is None:
            state = health(sock_path) if sock_path.exists() else None
            if state is not None and state.get("healthy") is True:
                break
            time.sleep(0.2)
        if state is None or state.get("healthy") is not True:
            raise SystemExit(f"smoke-install: lcg serve never became healthy (last: {state})")
        print(f"   healthy: {json.dumps(state)[:200]}", flush=True)
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=30)
        if rc != 0:
            raise SystemExit(f"smoke-install: lcg serve exited {rc} after SIGTERM")
        if sock_path.exists():
            raise SystemExit("smoke-install: lcg serve left its socket behind")
        print("   SIGTERM: exited 0", flush=True)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        output = proc.stdout.read() if proc.stdout else ""
        if proc.returncode not in (0, None):
            sys.stderr.write(output[-4000:])


def main() -> None:
    checkout = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[1])
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="lcg-smoke-") as raw:
        tmp = Path(raw)
        venv = tmp / "venv"
        # Nothing from the caller's environment may point lcg at another workspace or model.
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("LCG_", "GRAPHITI_", "LIMINIS_", "ANTHROPIC_", "VIRTUAL_ENV"))
        }
        env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
        python, lcg = venv / "bin" / "python", venv / "bin" / "lcg"

        step(f"fresh venv, pip install {checkout} (no extras)")
        run([sys.executable, "-m", "venv", str(venv)], cwd=tmp, env=env, title="venv")
        run(
            # --no-compile: byte-compiling every dependency is a third of the install time.
            [str(python), "-m", "pip", "install", "--quiet", "--no-compile", str(checkout)],
            cwd=tmp,
            env=env,
            title="pip install",
        )

        step("lcg --help")
        out = run([str(lcg), "--help"], cwd=tmp, env=env, title="lcg --help")
        if "serve" not in out:
            raise SystemExit("smoke-install: lcg --help lists no serve command")

        step("lcg demo (in an empty directory)")
        demo_dir = tmp / "demo"
        demo_dir.mkdir()
        run([str(lcg), "demo"], cwd=demo_dir, env=env, title="lcg demo")

        step("the installed package carries no third-party corpus (examples/apollo/)")
        listed = run([str(python), "-c", LIST_PACKAGE], cwd=tmp, env=env, title="package files")
        if "apollo" in listed.lower():
            raise SystemExit("smoke-install: the package ships examples/apollo/ (test data only)")
        if "examples/demo/articles.jsonl" not in listed.splitlines():
            raise SystemExit("smoke-install: the package lacks the demo's examples/demo/")

        step("lcg serve until health_check is healthy, then SIGTERM")
        home = tmp / "home"
        serve(lcg, home, env)

        step("lcg mcp: an MCP client lists the tools")
        out = run(
            [str(python), "-c", MCP_CLIENT, str(lcg), str(tmp / "mcp-home")],
            cwd=tmp,
            env=env,
            title="lcg mcp",
        )
        print("   " + out.strip(), flush=True)
    print(f"== smoke-install: passed in {time.monotonic() - started:.0f} s", flush=True)


if __name__ == "__main__":
    main()
