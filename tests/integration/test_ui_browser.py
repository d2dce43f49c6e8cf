"""The browser UI and the exported page, in real headless Chromium (Debian's /usr/bin/chromium).

The UI is served by a real `HttpService` (uvicorn on a loopback port) over a real Kuzu database
holding the scripted history of `ui_support`: Alice worked at Acme, then at Globex from
2023-06-01, which superseded the Acme fact. Each test writes a screenshot of its view under its
tmp dir (copied to /work/helpers/screens/ when that exists).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner  # noqa: TID251  CLI tests drive click's own runner
from playwright.sync_api import Page, expect, sync_playwright
from ui_support import (
    CHROMIUM,
    build_history,
    in_thread,
    keep_screenshot,
    launch_chromium,
    running_http,
)

from lcg import Engine, Settings, open_engine
from lcg.cli.main import cli
from lcg.service.http import HttpService

TIMEOUT_MS = 15_000


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
def served(settings: Settings, engine: Engine) -> Iterator[HttpService]:
    in_thread(anyio.run, build_history, engine)
    with running_http(settings, engine) as service:
        yield service


@pytest.fixture
def page(browser: Any, served: HttpService) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1400, "height": 860})
    context.set_default_timeout(TIMEOUT_MS)
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    tab.goto(served.url + "/")
    expect(tab.locator("#graph")).to_have_attribute("data-nodes", "5")
    try:
        yield tab
    finally:
        context.close()
    assert errors == [], errors


def _shot(page: Page, tmp_path: Path, name: str) -> None:
    path = tmp_path / f"ui-{name}.png"
    page.screenshot(path=str(path))
    assert path.stat().st_size > 10_000
    keep_screenshot(path)


def _search_and_open(page: Page, name: str, uuid: str) -> None:
    page.fill("#search", name)
    page.press("#search", "Enter")
    hit = page.locator(f"#search-entities li[data-uuid='{uuid}']")
    expect(hit).to_contain_text(name)
    hit.click()
    expect(page.locator("#details h2")).to_have_text(name)


def test_search_shows_the_node_and_its_superseded_fact(page: Page, tmp_path: Path) -> None:
    _search_and_open(page, "Alice", "e-alice")
    assert page.evaluate("lcgApp.view().byId.has('e-alice')")
    facts = page.locator("#detail-facts li")
    expect(facts).to_have_count(3)
    old = page.locator("#detail-facts li[data-fact='f-1-alice-acme']")
    expect(old).to_have_class("fact superseded")
    expect(old).to_contain_text("until 2023-06-01")
    expect(page.locator("#detail-facts li[data-fact='f-4-alice-globex']")).to_have_class(
        "fact current"
    )
    # The canvas drew the superseded fact in its own (red, dashed) pass.
    expect(page.locator("#graph")).to_have_attribute("data-superseded", "1")
    _shot(page, tmp_path, "explore")


def test_hovering_a_superseded_fact_shows_its_validity_window(page: Page) -> None:
    point = page.evaluate(
        """() => {
          const v = lcgApp.view();
          v.autoFit = false;
          const l = v.edges.find(e => e.id === 'f-1-alice-acme');
          const c = v.controlPoint(l);
          const wx = (l.s.x + 2 * c[0] + l.t.x) / 4, wy = (l.s.y + 2 * c[1] + l.t.y) / 4;
          const r = v.canvas.getBoundingClientRect();
          return [r.left + v.tx + wx * v.scale, r.top + v.ty + wy * v.scale];
        }"""
    )
    page.mouse.move(point[0], point[1])
    tooltip = page.locator("#tooltip")
    expect(tooltip).to_be_visible()
    expect(tooltip).to_contain_text("Alice works at Acme")
    expect(tooltip).to_contain_text("from 2021-01-01 until 2023-06-01")
    expect(tooltip).to_contain_text("superseded")


def test_the_timeline_marks_the_superseded_fact(page: Page, tmp_path: Path) -> None:
    page.goto(page.url.split("#")[0] + "#timeline/e-alice")
    old = page.locator(".tl-fact[data-fact='f-1-alice-acme']")
    expect(old).to_have_class("tl-row tl-fact fact superseded")
    expect(old).to_contain_text("superseded by")
    expect(old.locator(".tl-links")).to_contain_text("Alice works at Globex")
    expect(page.locator(".tl-fact[data-fact='f-4-alice-globex']")).to_contain_text("supersedes")
    expect(page.locator(".tl-fact.current")).to_have_count(2)
    _shot(page, tmp_path, "timeline")
    # By name, from the view's own form.
    page.fill("#timeline-entity", "bob")
    page.press("#timeline-entity", "Enter")
    expect(page.locator(".tl-head h2")).to_have_text("Bob")
    expect(page.locator(".tl-fact")).to_have_count(1)


def test_the_time_slider_before_the_supersession_shows_the_old_fact_as_current(
    page: Page, tmp_path: Path
) -> None:
    _search_and_open(page, "Alice", "e-alice")
    page.fill("#time-input", "2022-03-01T00:00:00")
    page.dispatch_event("#time-input", "change")
    expect(page.locator("#time-caption")).to_contain_text("As of 2022-03-01")
    old = page.locator("#detail-facts li[data-fact='f-1-alice-acme']")
    expect(old).to_have_class("fact current")
    expect(page.locator("#detail-facts li[data-fact='f-4-alice-globex']")).to_have_count(0)
    expect(page.locator("#graph")).to_have_attribute("data-superseded", "0")
    expect(page.locator("#graph")).to_have_attribute("data-edges", "3")
    _shot(page, tmp_path, "time-slider")

    # The slider itself moves the instant: its left end is before anything was true.
    page.locator("#time-slider").evaluate(
        "el => { el.value = '1'; el.dispatchEvent(new Event('input')); }"
    )
    expect(page.locator("#graph")).to_have_attribute("data-edges", "0")

    # System time: at 2022-03-01 the graph had learned only the first commit.
    page.check("#known-at")
    page.fill("#time-input", "2022-03-01T00:00:00")
    page.dispatch_event("#time-input", "change")
    expect(page.locator("#time-caption")).to_contain_text("As known at 2022-03-01")
    expect(old).to_have_class("fact current")
    expect(page.locator("#graph")).to_have_attribute("data-edges", "3")

    page.click("#time-now")
    expect(page.locator("#graph")).to_have_attribute("data-edges", "4")
    expect(old).to_have_class("fact superseded")


def test_the_changes_view_lists_what_started_ended_was_learned_and_retired(
    page: Page, tmp_path: Path
) -> None:
    page.goto(page.url.split("#")[0] + "#changes")
    page.fill("#changes-since", "2023-01-01")
    page.fill("#changes-until", "2024-01-01")
    page.click("#changes-form button")
    rows = page.locator("tr.change")
    expect(rows).to_have_count(4)
    expect(page.locator("tr.change[data-kind='ended']")).to_contain_text("Alice works at Acme")
    expect(page.locator("tr.change[data-kind='retired']")).to_contain_text("Alice works at Acme")
    expect(page.locator("tr.change[data-kind='started']")).to_contain_text("Alice works at Globex")
    expect(page.locator("tr.change[data-kind='learned']")).to_contain_text("Alice works at Globex")
    _shot(page, tmp_path, "changes")


def test_the_cypher_console_returns_rows(page: Page, tmp_path: Path) -> None:
    page.goto(page.url.split("#")[0] + "#cypher")
    page.fill("#cypher-query", "MATCH (e:Entity) RETURN e.name AS name ORDER BY name")
    page.click("#cypher-form button")
    table = page.locator(".cypher-table")
    expect(table.locator("th")).to_have_text(["name"])
    expect(table.locator("td")).to_have_text(["Acme", "Alice", "Apollo", "Bob", "Globex"])
    page.fill("#cypher-query", "MATCH (e:Nope) RETURN e")
    page.click("#cypher-form button")
    expect(page.locator("#cypher-result .error")).to_contain_text("database error")
    page.fill("#cypher-query", "MATCH (e:Entity) RETURN e.name AS name ORDER BY name")
    page.click("#cypher-form button")
    expect(table.locator("td").first).to_have_text("Acme")
    _shot(page, tmp_path, "cypher")


def test_the_status_page_shows_counts_groups_and_the_offline_embedder(
    page: Page, tmp_path: Path
) -> None:
    page.goto(page.url.split("#")[0] + "#status")
    expect(page.locator("#status .card").first).to_contain_text("5")
    expect(page.locator("#wal-groups")).to_contain_text("liminis")
    embedder = page.locator(".provider[data-role='embedder']")
    expect(embedder).to_have_class("card provider fallback")
    expect(embedder).to_contain_text("offline fallback")
    expect(page.locator(".provider[data-role='extractor']")).to_be_visible()
    _shot(page, tmp_path, "status")


def test_without_the_cypher_scope_there_is_no_console(
    browser: Any, settings: Settings, engine: Engine
) -> None:
    in_thread(anyio.run, build_history, engine)
    with running_http(settings, engine, scopes="read") as service:
        context = browser.new_context()
        context.set_default_timeout(TIMEOUT_MS)
        tab = context.new_page()
        tab.goto(service.url + "/#cypher")
        expect(tab.locator("#graph")).to_have_attribute("data-nodes", "5")
        expect(tab.locator("#tab-cypher")).to_be_hidden()
        expect(tab.locator("#view-cypher")).to_be_hidden()
        status = tab.evaluate(
            "fetch('/api/knowledge_query_cypher', {method: 'POST', body: '{}'}).then(r => r.status)"
        )
        assert status == 404
        context.close()


def test_the_exported_page_renders_offline_without_any_fetch(
    browser: Any, settings: Settings, tmp_path: Path
) -> None:
    engine = open_engine(settings)
    try:
        in_thread(anyio.run, build_history, engine)
    finally:
        engine.close()
    out = tmp_path / "graph.html"
    args = ["--home", str(settings.home), "export-html", "--limit", "4", "-o", str(out)]
    result = in_thread(CliRunner().invoke, cli, args)
    assert result.exit_code == 0, result.output
    text = out.read_text(encoding="utf-8")
    assert "http://" not in text and "https://" not in text
    # Kept: the four best-connected entities (Alice 3 facts, Acme 2, then by name Apollo, Bob).
    context = browser.new_context(viewport={"width": 1200, "height": 800})
    context.set_default_timeout(TIMEOUT_MS)
    blocked: list[str] = []

    def guard(route: Any) -> None:
        if route.request.url.startswith("file:"):
            route.continue_()
        else:
            blocked.append(route.request.url)
            route.abort()

    context.route("**/*", guard)
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    tab.goto(out.as_uri())
    canvas = tab.locator("#graph")
    expect(canvas).to_have_attribute("data-nodes", "4")
    expect(canvas).to_have_attribute("data-edges", "3")
    expect(canvas).to_have_attribute("data-superseded", "1")
    tab.fill("#find-input", "alice")
    tab.press("#find-input", "Enter")
    expect(tab.locator("#details li.fact.superseded")).to_contain_text("Alice works at Acme")
    shot = tmp_path / "export.png"
    tab.screenshot(path=str(shot))
    keep_screenshot(shot)
    assert tab.evaluate("performance.getEntriesByName('lcg-first-frame').length") == 1
    context.close()
    assert blocked == [] and errors == []


def _screen_point(page: Page, uuid: str) -> list[float]:
    point = page.evaluate(
        """(id) => {
          const v = lcgApp.view();
          v.autoFit = false;
          v.alpha = 0;
          const n = v.byId.get(id);
          const r = v.canvas.getBoundingClientRect();
          return [r.left + v.tx + n.x * v.scale, r.top + v.ty + n.y * v.scale];
        }""",
        uuid,
    )
    assert isinstance(point, list)
    return point


def test_double_clicking_a_node_expands_its_neighbours(page: Page) -> None:
    # Cap the view at the two best-connected entities (Alice, Acme), then expand Acme.
    page.locator("#node-limit").evaluate(
        "sel => { sel.add(new Option('2', '2')); sel.value = '2';"
        " sel.dispatchEvent(new Event('change')); }"
    )
    canvas = page.locator("#graph")
    expect(canvas).to_have_attribute("data-nodes", "2")
    x, y = _screen_point(page, "e-acme")
    page.mouse.dblclick(x, y)
    expect(canvas).to_have_attribute("data-nodes", "3")  # Bob works at Acme
    assert page.evaluate("lcgApp.view().byId.has('e-bob')")
    expect(page.locator("#details h2")).to_have_text("Acme")


def test_a_token_protected_server_asks_for_the_token_once(
    browser: Any, settings: Settings, engine: Engine
) -> None:
    in_thread(anyio.run, build_history, engine)
    guarded = Settings.for_home(settings.home, api_token="letmein")
    with running_http(guarded, engine) as service:
        context = browser.new_context()
        context.set_default_timeout(TIMEOUT_MS)
        tab = context.new_page()
        tab.goto(service.url + "/")
        expect(tab.locator("#token-dialog")).to_be_visible()
        tab.fill("#token-input", "letmein")
        tab.click("#token-form button[type=submit]")
        expect(tab.locator("#graph")).to_have_attribute("data-nodes", "5")
        expect(tab.locator("#conn-state")).to_contain_text("token")
        context.close()
