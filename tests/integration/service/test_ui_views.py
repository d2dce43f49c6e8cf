"""The browser UI shows time and keeps dense graphs readable, in real headless Chromium over a
real `HttpService` and Kuzu database (docs/http.md, The UI): the time slider hides entities that did not
exist yet; literal-looking and hub nodes are quiet; superseded facts are on demand in a large
graph; the timeline axis runs to today; every column of the Changes table has a header; episode
lines say their file once; the first frame is drawn without an animation frame. Each test keeps
a screenshot of its view (`ui_support.SCREENSHOTS`, printed at the end of the run)."""

from __future__ import annotations

import dataclasses
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
from playwright.sync_api import Page, expect, sync_playwright
from ui_support import (
    CHROMIUM,
    CHROMIUM_ARGS,
    G,
    build_history,
    in_thread,
    keep_screenshot,
    launch_chromium,
    page_url,
    request,
    running_http,
)

from lcg import Engine, Entity, Episode, EpisodeCommit, Fact, Settings
from lcg.engine import Invalidation
from lcg.service.http import HttpService

TIMEOUT_MS = 15_000
LATER = datetime(2024, 3, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    assert CHROMIUM.exists(), "Chromium is missing: run `make browser` (apt-get install chromium)"
    with sync_playwright() as playwright:
        chromium = launch_chromium(playwright)
        try:
            yield chromium
        finally:
            chromium.close()


async def _later(engine: Engine) -> None:
    """After the scripted history: Initech appears in 2024 (Bob works there), told by two
    episodes of one file."""
    bob = "e-bob"
    initech = Entity(
        uuid="e-initech", group_id=G, name="Initech", labels=("Entity", "Company"),
        created_at=LATER,
    )  # fmt: skip
    job = Fact(
        uuid="f-5-bob-initech", group_id=G, source_uuid=bob, target_uuid=initech.uuid,
        name="WORKS_AT", fact="Bob works at Initech", episodes=("ep-3",), valid_at=LATER,
        created_at=LATER,
    )  # fmt: skip
    for n, (name, text) in enumerate([("March", "Bob joined Initech."), ("April", "Bob stays.")]):
        episode = Episode(
            uuid=f"ep-{3 + n}", group_id=G, name=name, content=text,
            source_description=f"notes/staff-2024.md:{name}", created_at=LATER, valid_at=LATER,
        )  # fmt: skip
        await engine.commit_episode(
            EpisodeCommit(G, episode, [initech] if n == 0 else [], [job] if n == 0 else [],
                          mentions=[bob, initech.uuid])
        )  # fmt: skip


def _open(browser: Any, url: str, *, no_animation_frames: bool = False) -> tuple[Any, Page]:
    context = browser.new_context(viewport={"width": 1400, "height": 860})
    context.set_default_timeout(TIMEOUT_MS)
    if no_animation_frames:
        context.add_init_script("window.requestAnimationFrame = function () { return 0; };")
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(url)
    context.errors = errors  # type: ignore[attr-defined]  # checked by _close
    return context, page


def _close(context: Any) -> None:
    errors = context.errors
    context.close()
    assert errors == [], errors


def _shot(page: Page, tmp_path: Path, name: str) -> None:
    path = tmp_path / f"ui-{name}.png"
    page.screenshot(path=str(path))
    assert path.stat().st_size > 10_000
    keep_screenshot(path)


@pytest.fixture
def served(settings: Settings, engine: Engine) -> Iterator[HttpService]:
    in_thread(anyio.run, build_history, engine)
    in_thread(anyio.run, _later, engine)
    with running_http(settings, engine) as service:
        yield service


@pytest.fixture
def served_without_token(settings: Settings, engine: Engine) -> Iterator[HttpService]:
    """`lcg serve --http --http-no-token`: the graph of the first view comes with the page only
    where no token is needed (a script tag sends no Authorization)."""
    in_thread(anyio.run, build_history, engine)
    in_thread(anyio.run, _later, engine)
    with running_http(dataclasses.replace(settings, http_auth="none"), engine) as service:
        yield service


def test_the_time_slider_hides_entities_that_did_not_exist_yet(
    browser: Any, served: HttpService, tmp_path: Path
) -> None:
    context, page = _open(browser, page_url(served))
    canvas = page.locator("#graph")
    expect(canvas).to_have_attribute("data-nodes", "6")
    page.evaluate("() => lcgApp.setTime(Date.parse('2022-01-01T00:00:00Z'))")
    expect(canvas).to_have_attribute("data-nodes", "5")  # Initech came in 2024
    names = page.evaluate("() => lcgApp.view().nodes.map(n => n.name).sort()")
    assert names == ["Acme", "Alice", "Apollo", "Bob", "Globex"]
    expect(page.locator("#graph-stats")).to_contain_text("1 not yet in the graph then")
    _shot(page, tmp_path, "time-slider-2022")
    page.evaluate("() => lcgApp.setTime(Date.parse('2024-06-01T00:00:00Z'))")
    expect(canvas).to_have_attribute("data-nodes", "6")
    _close(context)


def test_the_timeline_axis_runs_to_today(browser: Any, served: HttpService, tmp_path: Path) -> None:
    context, page = _open(browser, page_url(served, "timeline/e-alice"))
    ticks = page.locator(".tl-axis span")
    expect(ticks).to_have_count(5)
    today = datetime.now(UTC).date().isoformat()
    assert ticks.last.inner_text() >= today  # "still valid" bars run to today
    # The current fact's bar ends at today's place on the axis, not before.
    bar = page.locator(".tl-fact[data-fact='f-4-alice-globex'] .tl-bar").bounding_box()
    track = page.locator(".tl-fact[data-fact='f-4-alice-globex'] .tl-track").bounding_box()
    assert bar is not None and track is not None
    assert bar["x"] + bar["width"] > track["x"] + track["width"] * 0.9
    _shot(page, tmp_path, "timeline-to-today")
    _close(context)


def test_every_column_of_the_changes_table_has_a_header(
    browser: Any, served: HttpService, tmp_path: Path
) -> None:
    context, page = _open(browser, page_url(served, "changes"))
    page.fill("#changes-since", "2021-01-01")
    page.click("#changes-form button[type=submit]")
    expect(page.locator("#changes tr.change").first).to_be_visible()
    headers = page.locator("#changes th").all_inner_texts()
    cells = page.locator("#changes tr.change").first.locator("td").count()
    assert len(headers) == cells and all(h.strip() for h in headers), headers
    _shot(page, tmp_path, "changes-headers")
    _close(context)


def test_episode_lines_say_their_file_once(
    browser: Any, served: HttpService, tmp_path: Path
) -> None:
    context, page = _open(browser, page_url(served))
    expect(page.locator("#graph")).to_have_attribute("data-nodes", "6")
    page.evaluate("() => lcgApp.focusNode('e-initech')")
    episodes = page.locator("#details li.episode")
    expect(episodes).to_have_count(2)
    expect(page.locator("#details")).to_contain_text("notes/staff-2024.md")
    text = page.locator("#details").inner_text()
    assert text.count("notes/staff-2024.md") == 1, text
    assert episodes.first.locator("strong").inner_text() in ("March", "April")
    _shot(page, tmp_path, "episodes-by-file")
    _close(context)


def test_the_first_frame_is_drawn_without_an_animation_frame(
    browser: Any, served: HttpService, tmp_path: Path
) -> None:
    # No requestAnimationFrame callback ever runs: what is on the canvas is the first frame.
    context, page = _open(browser, page_url(served), no_animation_frames=True)
    canvas = page.locator("#graph")
    expect(canvas).to_have_attribute("data-nodes", "6")
    inside = page.evaluate(
        """() => {
          const v = lcgApp.view();
          return v.nodes.map(n => [n.x * v.scale + v.tx, n.y * v.scale + v.ty])
            .every(([x, y]) => x > 0 && y > 0 && x < v.width && y < v.height);
        }"""
    )
    assert inside  # fitted to the canvas, not drawn around its top-left corner
    assert int(canvas.get_attribute("data-labels") or "0") == 6
    _shot(page, tmp_path, "first-frame")
    _close(context)


def test_a_plain_headless_screenshot_is_kept(
    served_without_token: HttpService, tmp_path: Path
) -> None:
    """What `chromium --headless --screenshot` captures, kept for a look (no page driving)."""
    shot = tmp_path / "ui-plain-headless-screenshot.png"
    subprocess.run(
        [str(CHROMIUM), *CHROMIUM_ARGS, "--window-size=1400,860", f"--screenshot={shot}",
         page_url(served_without_token)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    assert shot.stat().st_size > 10_000
    keep_screenshot(shot)


async def _busy(engine: Engine) -> None:
    """A changelog-like graph of 200 facts: releases that fix things, flags set to True, False
    or None, and a superseded fact for every fifth."""
    stamp = datetime(2024, 1, 1, tzinfo=UTC)
    literals = [
        Entity(uuid=f"lit-{v}", group_id="busy", name=v, labels=("Entity",), created_at=stamp)
        for v in ("True", "False", "None", "1.2.0")
    ]
    things = [
        Entity(uuid=f"t-{i:03d}", group_id="busy", name=f"option {i}", labels=("Entity", "Option"),
               created_at=stamp)
        for i in range(100)
    ]  # fmt: skip
    facts = []
    for i, t in enumerate(things):
        facts.append(
            Fact(uuid=f"bf-{i:03d}", group_id="busy", source_uuid=t.uuid,
                 target_uuid=literals[i % 3].uuid, name="DEFAULTS_TO",
                 fact=f"{t.name} defaults to {literals[i % 3].name}", valid_at=stamp,
                 created_at=stamp)
        )  # fmt: skip
        facts.append(
            Fact(uuid=f"bn-{i:03d}", group_id="busy", source_uuid=t.uuid,
                 target_uuid=things[(i * 7 + 3) % 100].uuid, name="REPLACES",
                 fact=f"{t.name} replaces option {(i * 7 + 3) % 100}", valid_at=stamp,
                 created_at=stamp)
        )  # fmt: skip
    episode = Episode(uuid="busy-1", group_id="busy", name="changelog", content="changes",
                      created_at=stamp, valid_at=stamp)  # fmt: skip
    await engine.commit_episode(EpisodeCommit("busy", episode, literals + things, facts))
    later = datetime(2024, 6, 1, tzinfo=UTC)
    ended = [Invalidation(f"bn-{i:03d}", later, later) for i in range(0, 100, 5)]
    episode = Episode(uuid="busy-2", group_id="busy", name="changelog 2", content="more",
                      created_at=later, valid_at=later)  # fmt: skip
    await engine.commit_episode(EpisodeCommit("busy", episode, [], [], ended))


def test_a_large_graph_keeps_literals_and_hubs_quiet_and_superseded_facts_on_demand(
    browser: Any, settings: Settings, engine: Engine, tmp_path: Path
) -> None:
    in_thread(anyio.run, _busy, engine)
    with running_http(settings, engine) as service:
        context, page = _open(browser, page_url(service))
        canvas = page.locator("#graph")
        expect(canvas).to_have_attribute("data-nodes", "104")
        # 200 facts: superseded ones are not drawn until asked for.
        expect(page.locator("#show-superseded")).not_to_be_checked()
        expect(canvas).to_have_attribute("data-superseded", "0")
        expect(canvas).to_have_attribute("data-edges", "180")
        expect(page.locator("#graph-stats")).to_contain_text("20 superseded hidden")
        expect(canvas).to_have_attribute("data-quiet", "4")
        quiet = page.evaluate(
            """() => {
              const v = lcgApp.view();
              const out = {};
              for (const n of v.nodes) {
                if (n.quiet) out[n.name] = [v.radius(n), v.shownLabels.has(n.id)];
              }
              out.biggest = Math.max(...v.nodes.filter(n => !n.quiet).map(n => v.radius(n)));
              return out;
            }"""
        )
        biggest = quiet.pop("biggest")
        assert set(quiet) == {"True", "False", "None", "1.2.0"}
        # Drawn small (True holds a third of the facts), and never labelled before the others.
        assert all(radius < biggest for radius, _ in quiet.values()), quiet
        assert not any(shown for _, shown in quiet.values()), quiet
        _shot(page, tmp_path, "large-graph-quiet")
        page.check("#show-superseded")
        expect(canvas).to_have_attribute("data-superseded", "20")
        expect(canvas).to_have_attribute("data-edges", "200")
        _shot(page, tmp_path, "large-graph-superseded")
        _close(context)


def test_a_small_graph_shows_superseded_facts_by_default(
    browser: Any, served: HttpService, tmp_path: Path
) -> None:
    context, page = _open(browser, page_url(served))
    canvas = page.locator("#graph")
    expect(canvas).to_have_attribute("data-nodes", "6")
    expect(page.locator("#show-superseded")).to_be_checked()
    expect(canvas).to_have_attribute("data-superseded", "1")
    page.uncheck("#show-superseded")
    expect(canvas).to_have_attribute("data-superseded", "0")
    _close(context)


def test_the_graph_comes_with_the_page_so_its_load_event_waits_for_it(
    browser: Any, served_without_token: HttpService, tmp_path: Path
) -> None:
    # The graph reads over fetch never answer: what is drawn came with the page itself.
    context = browser.new_context(viewport={"width": 1400, "height": 860})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    for method in ("knowledge_get_nodes_by_group", "knowledge_get_edges_by_group"):
        page.route(f"**/api/{method}", lambda route: route.abort())
    page.goto(page_url(served_without_token), wait_until="load")
    canvas = page.locator("#graph")
    expect(canvas).to_have_attribute("data-nodes", "6")
    first, loaded = page.evaluate(
        """() => [performance.getEntriesByName('lcg-first-frame')[0].startTime,
                  performance.getEntriesByType('navigation')[0].loadEventStart]"""
    )
    assert 0 < first <= loaded  # drawn before the load event: a plain --screenshot sees it
    _shot(page, tmp_path, "graph-with-the-page")
    context.close()


def test_the_first_graph_script_answers_null_to_other_sites_and_behind_a_token(
    settings: Settings, engine: Engine
) -> None:
    in_thread(anyio.run, build_history, engine)
    with running_http(dataclasses.replace(settings, http_auth="none"), engine) as service:
        for headers in ({}, {"Sec-Fetch-Site": "cross-site"}):
            status, _, body = request(service, "GET", "/ui/first-graph.js", headers=headers)
            assert (status, body) == (200, "window.LCG_FIRST_GRAPH = null;\n")
        status, headers, body = request(
            service, "GET", "/ui/first-graph.js", headers={"Sec-Fetch-Site": "same-origin"}
        )
        assert status == 200 and headers["content-type"].startswith("text/javascript")
        assert body.startswith("window.LCG_FIRST_GRAPH = {") and '"Alice"' in body
    guarded = Settings.for_home(settings.home, api_token="s3cret-token")
    for behind_a_token in (guarded, settings):  # the user's token, the workspace's token
        with running_http(behind_a_token, engine) as service:
            status, _, body = request(
                service, "GET", "/ui/first-graph.js", headers={"Sec-Fetch-Site": "same-origin"}
            )
            assert (status, body) == (200, "window.LCG_FIRST_GRAPH = null;\n")


async def _code_symbols(engine: Engine) -> None:
    stamp = datetime(2024, 1, 1, tzinfo=UTC)

    def symbol(uuid: str, name: str, attributes: str) -> Entity:
        return Entity(uuid=uuid, group_id="code", name=name,
                      labels=("Entity", "Code", "Function"), attributes=attributes,
                      created_at=stamp)  # fmt: skip

    old = symbol(
        "s-old", "a.helper",
        '{"code":"function","path":"a.py","line_start":1,"line_end":6,"removed":true,'
        '"renamed_to":"b.helper","signature":"def helper(rows, key)"}',
    )  # fmt: skip
    get = symbol(
        "s-get", "m.get",
        '{"code":"function","path":"m.py","line_start":3,"line_end":8,'
        '"signature":"def get(key)",'
        '"variants":"[\\"def get(key: int) -> int\\",\\"def get(key: str) -> str\\",'
        '\\"def get(key)\\"]"}',
    )  # fmt: skip
    episode = Episode(uuid="code-1", group_id="code", name="code", content="code",
                      created_at=stamp, valid_at=stamp)  # fmt: skip
    await engine.commit_episode(EpisodeCommit("code", episode, [old, get], []))


def test_a_renamed_symbol_and_an_overloaded_one_say_so(
    browser: Any, settings: Settings, engine: Engine, tmp_path: Path
) -> None:
    in_thread(anyio.run, _code_symbols, engine)
    with running_http(settings, engine) as service:
        context, page = _open(browser, page_url(service))
        expect(page.locator("#graph")).to_have_attribute("data-nodes", "2")
        page.evaluate("() => lcgApp.focusNode('s-old')")
        info = page.locator("#detail-code")
        expect(info).to_contain_text("renamed to b.helper")
        expect(info).not_to_contain_text("removed")
        page.evaluate("() => lcgApp.focusNode('s-get')")
        expect(info.locator(".code-sig")).to_have_text("def get(key)")
        expect(info.locator(".code-variants")).to_have_text(
            "def get(key: int) -> int\ndef get(key: str) -> str\ndef get(key)"
        )
        expect(info).to_contain_text("3 variants")
        _shot(page, tmp_path, "code-variants")
        _close(context)
