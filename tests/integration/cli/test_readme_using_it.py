"""The README's `## Using it` section, followed literally: its code blocks are read from
README.md at test time, so the test follows whatever the section says.

What is followed: the blocks of the section's own body (from `## Using it` to the next heading
of any level), in order, in a fresh directory where `examples/` is the repository's and `lcg` is
the installed command (`.venv/bin/lcg` written out resolves to it too):

- a `python` block is run as a script, twice; every list it prints must be the same on the
  second run (re-running the example adds no second copy of a fact). A block that connects to
  `service.sock` runs while an `lcg serve` of the workspace is up, as the section's own text
  says it needs one.
- each command of a `sh`/`shell`/`bash`/`console` block is run by the shell and must succeed
  (`$ ` prompts and trailing `  # comments` are dropped). `lcg serve` is started in the
  background and stopped when the section ends; installing (`pip`, `make`, `python3 -m venv`,
  `source`, `lcg models pull`), `cd` and calls that need a model key or a live MCP client
  (`lcg mcp` without `--print-config`) are not run.
- other blocks (`json` configs, whose paths are machine-specific) are shown, not run.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
SHELLS = ("sh", "shell", "bash", "console")
NOT_RUN = ("pip ", "make", "python3 -m venv", "source ", "cd ", "git clone")
WAIT_SECONDS = 60.0


def using_it_blocks(readme: str) -> list[tuple[str, str]]:
    """(language, text) of each fenced block in the body of `## Using it`."""
    lines = readme.splitlines()
    try:
        start = lines.index("## Using it")
    except ValueError:
        pytest.fail("README.md has no `## Using it` section")
    body: list[str] = []
    for line in lines[start + 1 :]:
        if line.startswith("#") and re.match(r"#+ ", line):
            break
        body.append(line)
    blocks: list[tuple[str, str]] = []
    fence: str | None = None
    text: list[str] = []
    for line in body:
        if fence is None and line.startswith("```"):
            fence, text = line[3:].strip().lower(), []
        elif fence is not None and line.startswith("```"):
            blocks.append((fence, "\n".join(text)))
            fence = None
        elif fence is not None:
            text.append(line)
    return blocks


def _commands(block: str) -> list[str]:
    out = []
    for raw in block.splitlines():
        line = re.sub(r"\s{2,}#.*$", "", raw.strip().removeprefix("$ ")).strip()
        if line and not line.startswith("#"):
            out.append(line.replace(".venv/bin/", f"{BIN}/"))
    return out


def _skipped(command: str) -> bool:
    words = shlex.split(command)
    tool = Path(words[0]).name if words else ""
    if command.startswith(NOT_RUN) or "ANTHROPIC_API_KEY" in command:
        return True
    if tool != "lcg":
        return False
    return words[1:3] == ["models", "pull"] or ("mcp" in words and "--print-config" not in words)


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LCG_")}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["LCG_MODELS_DIR"] = str(home.parent / "models")  # no model a developer pulled
    return env


@contextmanager
def _serving(command: str, cwd: Path, env: dict[str, str]) -> Iterator[None]:
    """`lcg serve ...` in the background until its socket answers; stopped on exit."""
    log = (cwd / "serve.log").open("w")
    proc = subprocess.Popen(
        command, shell=True, cwd=cwd, env=env, stdout=log, stderr=log, start_new_session=True
    )
    try:
        probe = [str(BIN / "lcg"), "status"]
        deadline = time.monotonic() + WAIT_SECONDS
        while True:
            answered = (cwd / ".lcg" / "service.sock").exists() and (
                subprocess.run(probe, cwd=cwd, env=env, capture_output=True).returncode == 0
            )
            if answered:
                break
            assert proc.poll() is None, (cwd / "serve.log").read_text()
            assert time.monotonic() < deadline, "lcg serve did not answer"
            time.sleep(0.2)
        yield
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(WAIT_SECONDS)
        log.close()


def _lists(output: str) -> list[object]:
    found: list[object] = []
    for line in output.splitlines():
        try:
            value = ast.literal_eval(line)
        except (ValueError, SyntaxError):
            continue
        if isinstance(value, list):
            found.append(value)
    return found


def _run_python(block: str, cwd: Path, env: dict[str, str]) -> str:
    script = cwd / "example.py"
    script.write_text(block)
    done = subprocess.run(
        [sys.executable, str(script)], cwd=cwd, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, f"{block}\n---\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_the_using_it_section_works_as_written(tmp_path: Path) -> None:
    blocks = using_it_blocks((ROOT / "README.md").read_text())
    assert any(lang == "python" for lang, _ in blocks), "the section shows no library example"
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    env = _env(tmp_path / ".lcg")
    serving = False
    with _background() as start:
        for lang, block in blocks:
            if lang == "python":
                if "service.sock" in block and not serving:
                    start(f"{BIN}/lcg serve", tmp_path, env)
                    serving = True
                first = _run_python(block, tmp_path, env)
                second = _run_python(block, tmp_path, env)
                assert _lists(second) == _lists(first), (first, second)
            elif lang in SHELLS:
                for command in _commands(block):
                    if _skipped(command):
                        continue
                    if re.match(r"^(\S*/)?lcg serve\b", command):
                        start(command, tmp_path, env)
                        serving = True
                        continue
                    done = subprocess.run(
                        command, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True
                    )
                    assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"


Start = Callable[[str, Path, dict[str, str]], None]


@contextmanager
def _background() -> Iterator[Start]:
    """A starter of background services, all stopped at the end."""
    with ExitStack() as stack:

        def start(command: str, cwd: Path, env: dict[str, str]) -> None:
            stack.enter_context(_serving(command, cwd, env))

        yield start
