"""The browser UI on a code graph, in real headless Chromium: code entities show
their kind (File, Module, Class, Function, Method) and `path:line_start-line_end`, and a
symbol's timeline shows its facts appearing and ending at the commits that did it.

A real `HttpService` on a loopback port serves a real Kuzu database into which a git
repository the test builds was ingested with `ingest_history` (three commits: `parse_config`
appears, its signature changes, `Loader.load` is removed).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("tree_sitter_language_pack")

from code_support import git
from playwright.sync_api import Page, expect, sync_playwright
from ui_support import (
    CHROMIUM,
    in_thread,
    keep_screenshot,
    launch_chromium,
    page_url,
    running_http,
)

from lcg import Engine, Settings
from lcg.code.history import ingest_history

TIMEOUT_MS = 15_000
T0 = 1_700_000_000  # 2023-11-14 22:13:20 UTC

V1 = '''"""Configuration."""


def parse_config(path):
    """Read the configuration file."""
    return path


class Loader:
    def load(self):
        return parse_config("x")
'''
V2 = V1.replace("def parse_config(path):", "def parse_config(path, strict):")
V3 = V2.split("class Loader")[0] + "class Loader:\n    def reload(self):\n        return 1\n"


def _repo(root: Path) -> list[str]:
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    shas = []
    for n, (text, subject) in enumerate(
        [(V1, "add the config parser"), (V2, "parse_config takes strict"), (V3, "drop load")]
    ):
        (root / "cfg.py").write_text(text)
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", subject, when=T0 + n * 86400)
        shas.append(git(root, "rev-parse", "HEAD").strip())
    return shas


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    assert CHROMIUM.exists(), "Chromium is missing: run `make browser` (apt-get install chromium)"
    with sync_playwright() as playwright:
        chromium = launch_chromium(playwright)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def code_ui(
    browser: Any, settings: Settings, engine: Engine, tmp_path: Path
) -> Iterator[tuple[Page, list[str], dict[str, str]]]:
    shas = _repo(tmp_path / "repo")

    async def ingest() -> dict[str, str]:
        await ingest_history(engine, tmp_path / "repo", "code")
        out = {}
        for name in ("cfg.parse_config", "cfg.Loader.load", "cfg.py"):
            entity = await engine.entity_by_name("code", name)
            assert entity is not None, name
            out[name] = entity.uuid
        return out

    uuids = in_thread(anyio.run, ingest)
    with running_http(settings, engine) as service:
        context = browser.new_context(viewport={"width": 1400, "height": 860})
        context.set_default_timeout(TIMEOUT_MS)
        tab = context.new_page()
        errors: list[str] = []
        tab.on("pageerror", lambda exc: errors.append(str(exc)))
        tab.goto(page_url(service))
        expect(tab.locator("#graph")).not_to_have_attribute("data-nodes", "0")
        try:
            yield tab, shas, uuids
        finally:
            context.close()
        assert errors == [], errors


def _shot(page: Page, tmp_path: Path, name: str) -> None:
    path = tmp_path / f"ui-code-{name}.png"
    page.screenshot(path=str(path))
    assert path.stat().st_size > 10_000
    keep_screenshot(path)


def test_code_entities_show_their_kind_and_location(
    code_ui: tuple[Page, list[str], dict[str, str]], tmp_path: Path
) -> None:
    page, _, uuids = code_ui
    page.fill("#search", "parse_config")
    page.press("#search", "Enter")
    hit = page.locator(f"#search-entities li[data-uuid='{uuids['cfg.parse_config']}']")
    expect(hit.locator(".kind")).to_have_text("Function")
    expect(hit.locator(".code-loc")).to_have_text("cfg.py:4-6")
    expect(hit).to_contain_text("def parse_config(path, strict)")
    hit.click()
    info = page.locator("#detail-code")
    expect(info.locator(".kind")).to_have_text("Function")
    expect(info.locator(".code-loc")).to_have_text("cfg.py:4-6")
    expect(info.locator(".code-sig")).to_have_text("def parse_config(path, strict)")
    expect(info.locator(".code-doc")).to_have_text("Read the configuration file.")
    _shot(page, tmp_path, "details")

    # A removed method: its kind, where it was, and that it is gone.
    page.fill("#search", "cfg.Loader.load")
    page.press("#search", "Enter")
    gone = page.locator(f"#search-entities li[data-uuid='{uuids['cfg.Loader.load']}']")
    expect(gone.locator(".kind")).to_have_text("Method")
    expect(gone.locator(".code-loc")).to_have_text("cfg.py:10-11")
    expect(gone.locator(".badge")).to_have_text("removed")

    # A file: its kind and path, no line range.
    page.goto(page.url.split("#")[0] + f"#timeline/{uuids['cfg.py']}")
    head = page.locator(".tl-head .code-info")
    expect(head.locator(".kind")).to_have_text("File")
    expect(head.locator(".code-loc")).to_have_text("cfg.py")


def test_a_symbols_timeline_shows_its_facts_over_commits(
    code_ui: tuple[Page, list[str], dict[str, str]], tmp_path: Path
) -> None:
    page, shas, uuids = code_ui
    page.goto(page.url.split("#")[0] + f"#timeline/{uuids['cfg.parse_config']}")
    expect(page.locator(".tl-head h2")).to_have_text("cfg.parse_config")
    expect(page.locator(".tl-head .kind")).to_have_text("Function")
    rows = page.locator(".tl-fact")
    defines = "cfg.py defines cfg.parse_config: "
    old = rows.filter(has=page.get_by_text(defines + "def parse_config(path)", exact=True))
    new = rows.filter(has=page.get_by_text(defines + "def parse_config(path, strict)", exact=True))
    expect(old).to_have_count(1)
    expect(new).to_have_count(1)
    expect(old).to_have_attribute("data-status", "superseded")
    expect(new).to_have_attribute("data-status", "current")
    expect(old.locator(".tl-commit-start")).to_have_text(
        f"appeared in {shas[0][:10]} add the config parser"
    )
    expect(old.locator(".tl-commit-end")).to_have_text(
        f"ended in {shas[1][:10]} parse_config takes strict"
    )
    expect(new.locator(".tl-commit-start")).to_contain_text(shas[1][:10])
    expect(new.locator(".tl-commit-end")).to_have_count(0)
    expect(old).to_contain_text("until 2023-11-15")
    # The call from Loader.load ended with the method, at the third commit.
    call = rows.filter(has=page.get_by_text("cfg.Loader.load calls cfg.parse_config", exact=True))
    expect(call).to_have_count(1)
    expect(call.locator(".tl-commit-end")).to_contain_text(f"{shas[2][:10]} drop load")
    _shot(page, tmp_path, "timeline")

    # By name from the timeline's form, with no group chosen.
    page.fill("#timeline-entity", "cfg.Loader.load")
    page.press("#timeline-entity", "Enter")
    expect(page.locator(".tl-head h2")).to_have_text("cfg.Loader.load")
    expect(page.locator(".tl-head .badge")).to_have_text("removed")
    expect(page.locator(".tl-fact.current")).to_have_count(0)
