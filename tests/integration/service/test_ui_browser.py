"""The browser UI and the exported page, in real headless Chromium (Debian's /usr/bin/chromium).

The UI is served by a real `HttpService` (uvicorn on a loopback port) over a real Kuzu database
holding the scripted history of `ui_support`: Alice worked at Acme, then at Globex from
2023-06-01, which superseded the Acme fact. Each test writes a screenshot of its view under its
tmp dir (copied to /work/helpers/screens/ when that exists).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
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
    page_url,
    running_http,
)

from lcg import Engine, Entity, Episode, EpisodeCommit, Fact, Settings, open_engine
from lcg.cli.main import cli
from lcg.service.http import HttpService
from lcg.service.registry import dispatch

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
    tab.goto(page_url(served))
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
          v.alpha = 0;  // freeze the layout: on a loaded machine it may still be moving
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
        tab.goto(page_url(service, "cypher"))
        expect(tab.locator("#graph")).to_have_attribute("data-nodes", "5")
        expect(tab.locator("#tab-cypher")).to_be_hidden()
        expect(tab.locator("#view-cypher")).to_be_hidden()
        # With the token the page took from its address (and dropped from it): 404, not 401.
        assert "#token" not in tab.url
        status = tab.evaluate(
            """fetch('/api/knowledge_query_cypher', {method: 'POST', body: '{}', headers:
                 {Authorization: 'Bearer ' + sessionStorage.getItem('lcg-api-token')}})
               .then(r => r.status)"""
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
        tab.goto(page_url(service))
        expect(tab.locator("#token-dialog")).to_be_visible()
        tab.fill("#token-input", "letmein")
        tab.click("#token-form button[type=submit]")
        expect(tab.locator("#graph")).to_have_attribute("data-nodes", "5")
        expect(tab.locator("#conn-state")).to_contain_text("token")
        context.close()


def test_the_legend_reads_as_a_key_not_as_nodes(page: Page) -> None:
    legend = page.locator("#legend")
    expect(legend).to_contain_text("Colour = type:")
    # The scripted history: Alice and Bob are Persons, Acme and Globex Companies, Apollo a Project.
    expect(legend.locator(".legend-item[data-type='Person']")).to_have_text("2 Person")
    expect(legend.locator(".legend-item[data-type='Company']")).to_have_text("2 Company")
    expect(legend.locator(".legend-item").last).to_have_text("superseded fact")


def test_the_timeline_axis_keeps_its_end_dates_inside(page: Page) -> None:
    page.goto(page.url.split("#")[0] + "#timeline/e-alice")
    ticks = page.locator(".tl-axis span")
    expect(ticks).to_have_count(5)
    box = page.locator(".tl-axis").bounding_box()
    first, last = ticks.first.bounding_box(), ticks.last.bounding_box()
    assert box is not None and first is not None and last is not None
    assert first["x"] >= box["x"] - 0.5
    assert last["x"] + last["width"] <= box["x"] + box["width"] + 0.5
    assert ticks.last.evaluate("e => e.scrollWidth <= e.clientWidth + 1")
    assert len(ticks.last.inner_text()) == 10  # a whole YYYY-MM-DD


def test_the_status_page_uses_one_timestamp_format(page: Page) -> None:
    page.goto(page.url.split("#")[0] + "#status")
    # The oldest and newest episode dates, labelled as what they are (not "ingested").
    card = page.locator("#status .card", has_text="oldest / newest episode date")
    expect(page.locator("#status")).not_to_contain_text("episode ingested")
    # knowledge_status gives these in two wire formats (DB read format and ISO-Z): shown as one.
    expect(card).to_contain_text("2021-01-05 00:00:00 UTC / 2023-06-02 00:00:00 UTC")


DENSE = 150  # entities: enough that the old "label every node up to 150" drew a smear


async def _dense_graph(engine: Engine) -> None:
    stamp = datetime(2024, 1, 1, tzinfo=UTC)
    names = [f"Entity with a longish name {i}" for i in range(DENSE)]
    entities = [
        Entity(uuid=f"d-{i:03d}", group_id="dense", name=n, labels=("Entity", "Thing"),
               created_at=stamp)
        for i, n in enumerate(names)
    ]  # fmt: skip
    facts = [
        Fact(uuid=f"df-{i:03d}", group_id="dense", source_uuid=entities[i].uuid,
             target_uuid=entities[(i * 7 + 1) % DENSE if i % 3 else 0].uuid, name="LINKS",
             fact=f"{names[i]} links on", created_at=stamp)
        for i in range(DENSE)
    ]  # fmt: skip
    episode = Episode(uuid="dense-ep", group_id="dense", name="dense", content="dense graph")
    await engine.commit_episode(EpisodeCommit("dense", episode, entities, facts))


def test_dense_labels_never_overlap_and_hover_shows_a_hidden_one(
    browser: Any, settings: Settings, engine: Engine, tmp_path: Path
) -> None:
    in_thread(anyio.run, _dense_graph, engine)
    with running_http(settings, engine) as service:
        context = browser.new_context(viewport={"width": 1200, "height": 800})
        context.set_default_timeout(TIMEOUT_MS)
        tab = context.new_page()
        tab.goto(page_url(service))
        canvas = tab.locator("#graph")
        expect(canvas).to_have_attribute("data-nodes", str(DENSE))
        tab.evaluate("() => { const v = lcgApp.view(); v.alpha = 0; v.refit(); }")
        tab.wait_for_timeout(300)
        boxes = json.loads(canvas.get_attribute("data-label-boxes") or "[]")
        labels = int(canvas.get_attribute("data-labels") or "0")
        assert 0 < labels < DENSE and len(boxes) == labels
        for i, (x1, y1, w1, h1) in enumerate(boxes):
            for x2, y2, w2, h2 in boxes[i + 1 :]:
                apart = x1 + w1 <= x2 or x2 + w2 <= x1 or y1 + h1 <= y2 or y2 + h2 <= y1
                assert apart, ((x1, y1, w1, h1), (x2, y2, w2, h2))
        _keep(tab, tmp_path, "dense-labels")
        # Hovering an unlabelled node labels it (it takes priority over the hubs' labels).
        hidden = tab.evaluate(
            """() => {
              const v = lcgApp.view();
              const n = v.nodes.find(p => !v.shownLabels.has(p.id));
              const r = v.canvas.getBoundingClientRect();
              return [n.name, r.left + v.tx + n.x * v.scale, r.top + v.ty + n.y * v.scale];
            }"""
        )
        before = canvas.get_attribute("data-label-boxes")
        tab.mouse.move(hidden[1], hidden[2])
        expect(canvas).not_to_have_attribute("data-label-boxes", before or "")
        assert tab.evaluate("() => lcgApp.view().hover") is not None
        context.close()


def test_an_export_of_all_groups_tells_same_named_entities_apart(
    browser: Any, settings: Settings, tmp_path: Path
) -> None:
    async def two_groups(engine: Engine) -> None:
        for group in ("alpha", "beta"):
            for name in ("Mercury", "Venus"):
                await dispatch(engine, "knowledge_assert_entity", {"name": name, "group_id": group})

    engine = open_engine(settings)
    try:
        in_thread(anyio.run, two_groups, engine)
    finally:
        engine.close()
    out = tmp_path / "groups.html"
    args = ["--home", str(settings.home), "export-html", "-o", str(out)]
    result = in_thread(CliRunner().invoke, cli, args)
    assert result.exit_code == 0, result.output
    context = browser.new_context(viewport={"width": 1200, "height": 800})
    tab = context.new_page()
    tab.goto(out.as_uri())
    expect(tab.locator("#caption")).to_contain_text("groups: alpha, beta")
    tab.fill("#find-input", "mercury (beta)")
    tab.press("#find-input", "Enter")
    expect(tab.locator("#details h2")).to_have_text("Mercury (beta)")
    expect(tab.locator("#details .group")).to_have_text("group beta")
    context.close()


def _keep(tab: Page, tmp_path: Path, name: str) -> None:
    shot = tmp_path / f"ui-{name}.png"
    tab.screenshot(path=str(shot))
    keep_screenshot(shot)
