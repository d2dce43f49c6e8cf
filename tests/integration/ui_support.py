"""Helpers for the HTTP and browser tests: a scripted history, a real HTTP server in a thread,
and headless Chromium (Debian's /usr/bin/chromium, driven by Playwright without its own browser
download).

The history (group `liminis`, system times set explicitly):

- commit 1, learned 2021-01-05: Alice WORKS_AT Acme (valid from 2021-01-01), Bob WORKS_AT Acme,
  Alice LEADS Apollo (all valid from 2021-01-01);
- commit 2, learned 2023-06-02: Alice WORKS_AT Globex, valid from 2023-06-01, superseding "Alice
  works at Acme" (its invalid_at = 2023-06-01, expired_at = 2023-06-02).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import shutil
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar, cast

import anyio

from lcg import Engine, Settings
from lcg.engine import EpisodeCommit, Invalidation
from lcg.models import Entity, Episode, Fact
from lcg.service.http import EngineBackend, HttpService

G = "liminis"
T = TypeVar("T")
LEARNED_1 = datetime(2021, 1, 5, tzinfo=UTC)
LEARNED_2 = datetime(2023, 6, 2, tzinfo=UTC)
START = datetime(2021, 1, 1, tzinfo=UTC)
MOVE = datetime(2023, 6, 1, tzinfo=UTC)
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENS = Path("/work/helpers/screens")
# Every view's screenshot, kept for CI to publish as artifacts (the run prints the folder):
# $LCG_UI_SCREENSHOTS (read at import, before the tests scrub LCG_* variables), else build/.
SCREENSHOTS = Path(
    os.environ.get("LCG_UI_SCREENSHOTS")
    or Path(__file__).resolve().parents[2] / "build" / "ui-screens"
)
WAIT_SECONDS = 30.0


@dataclass
class History:
    alice: str
    acme: str
    globex: str
    bob: str
    apollo: str
    old_job: str  # Alice WORKS_AT Acme (superseded)
    new_job: str  # Alice WORKS_AT Globex


def _entity(name: str, label: str) -> Entity:
    return Entity(
        uuid=f"e-{name.lower()}",
        group_id=G,
        name=name,
        labels=("Entity", label),
        summary=f"{name} is a {label.lower()} in the scripted history.",
        created_at=LEARNED_1,
    )


def _fact(uuid: str, src: Entity, dst: Entity, name: str, text: str, valid: datetime) -> Fact:
    learned = LEARNED_1 if valid == START else LEARNED_2
    return Fact(
        uuid=uuid,
        group_id=G,
        source_uuid=src.uuid,
        target_uuid=dst.uuid,
        name=name,
        fact=text,
        episodes=(f"ep-{uuid}",),
        valid_at=valid,
        created_at=learned,
    )


async def build_history(engine: Engine) -> History:
    """Write the module docstring's two commits and return the uuids."""
    alice, bob = _entity("Alice", "Person"), _entity("Bob", "Person")
    acme, globex = _entity("Acme", "Company"), _entity("Globex", "Company")
    apollo = _entity("Apollo", "Project")
    old = _fact("f-1-alice-acme", alice, acme, "WORKS_AT", "Alice works at Acme", START)
    bob_job = _fact("f-2-bob-acme", bob, acme, "WORKS_AT", "Bob works at Acme", START)
    leads = _fact("f-3-alice-apollo", alice, apollo, "LEADS", "Alice leads Apollo", START)
    ep1 = Episode(
        uuid="ep-1",
        group_id=G,
        name="staff notes 2021",
        content="Alice and Bob work at Acme. Alice leads Apollo.",
        created_at=LEARNED_1,
        valid_at=START,
    )
    await engine.commit_episode(
        EpisodeCommit(
            G,
            ep1,
            [alice, bob, acme, globex, apollo],
            [old, bob_job, leads],
            mentions=[alice.uuid, bob.uuid, acme.uuid, apollo.uuid],
        )
    )
    new = _fact("f-4-alice-globex", alice, globex, "WORKS_AT", "Alice works at Globex", MOVE)
    ep2 = Episode(
        uuid="ep-2",
        group_id=G,
        name="staff notes 2023",
        content="Alice left Acme and joined Globex on 1 June 2023.",
        created_at=LEARNED_2,
        valid_at=MOVE,
    )
    await engine.commit_episode(
        EpisodeCommit(
            G,
            ep2,
            [],
            [new],
            [Invalidation(old.uuid, MOVE, LEARNED_2)],
            mentions=[alice.uuid, acme.uuid, globex.uuid],
        )
    )
    return History(alice.uuid, acme.uuid, globex.uuid, bob.uuid, apollo.uuid, old.uuid, new.uuid)


def in_thread(fn: Callable[..., T], *args: Any) -> T:
    """Run `fn` in a fresh thread and return its result: Playwright's sync API keeps an event loop
    running in the test's thread, so `anyio.run` (and the CLI, which uses it) cannot run there."""
    box: list[Any] = []

    def run() -> None:
        try:
            box.append((True, fn(*args)))
        except BaseException as exc:
            box.append((False, exc))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    ok, value = box[0]
    if not ok:
        raise value
    return cast(T, value)


class HttpThread:
    """An `HttpService` over an open engine, running its own event loop in a thread."""

    def __init__(self, service: HttpService) -> None:
        self.service = service
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._run, name="http-server", daemon=True)

    def _run(self) -> None:
        try:
            anyio.run(self.service.serve)
        except BaseException as exc:
            self.errors.append(exc)

    def start(self) -> None:
        self.service.bind()  # the port is known (and connectable) from here on
        self.thread.start()

    def stop(self) -> None:
        self.service.stop()
        self.thread.join(WAIT_SECONDS)
        assert not self.thread.is_alive(), "HTTP server did not stop"
        assert not self.errors, self.errors


@contextlib.contextmanager
def running_http(
    settings: Settings, engine: Engine, *, scopes: str = "read,write,cypher", **kwargs: Any
) -> Iterator[HttpService]:
    """Serve `engine` over HTTP on a free loopback port for the duration of the block."""
    service = HttpService(settings, EngineBackend(engine), port=0, scopes=scopes, **kwargs)
    runner = HttpThread(service)
    runner.start()
    try:
        yield service
    finally:
        runner.stop()


def page_url(service: HttpService, view: str = "") -> str:
    """The UI's address as `lcg serve --http` prints it (the workspace's token in the fragment,
    when the service has one), opening `view` (e.g. `timeline/e-alice`)."""
    if service.token_file is not None:
        return service.browser_url + (f"&{view}" if view else "")
    return service.url + "/" + (f"#{view}" if view else "")


def launch_chromium(playwright: Any) -> Any:
    """Headless Debian Chromium; never Playwright's own browser build (it cannot download)."""
    return playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)


def keep_screenshot(path: Path) -> None:
    """Copy a screenshot into SCREENSHOTS (and where the lead can look at it, when that
    directory exists)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    shutil.copy(path, SCREENSHOTS / path.name)
    if SCREENS.parent.is_dir():
        SCREENS.mkdir(exist_ok=True)
        shutil.copy(path, SCREENS / path.name)


def request(
    service: HttpService,
    method: str,
    path: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
    host: str | None = None,
    *,
    auth: bool = True,
) -> tuple[int, dict[str, str], Any]:
    """One request with full control of the headers (Host included); returns status, headers,
    and the JSON body (or the text when it is not JSON).

    A service guarded by its workspace's token (the default) gets it in `Authorization`, like
    the UI and every client the user gives it, unless `auth` is false or the caller sets that
    header; a token given as `LCG_API_TOKEN` is sent only when the caller sends it."""
    headers = dict(headers or {})
    if auth and service.token_file is not None and service.token is not None:
        headers.setdefault("Authorization", f"Bearer {service.token}")
    conn = http.client.HTTPConnection("127.0.0.1", service.port, timeout=30)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        conn.putheader("Host", host if host is not None else f"127.0.0.1:{service.port}")
        data = (
            b""
            if body is None
            else (body if isinstance(body, bytes) else json.dumps(body).encode())
        )
        for name, value in headers.items():
            conn.putheader(name, value)
        conn.putheader("Content-Length", str(len(data)))
        conn.endheaders(data)
        response = conn.getresponse()
        raw = response.read()
        found = {k.lower(): v for k, v in response.getheaders()}
    finally:
        conn.close()
    try:
        return response.status, found, json.loads(raw)
    except ValueError:
        return response.status, found, raw.decode("utf-8", "replace")


def assert_error_shape(body: Any, code: int = -32000) -> dict[str, Any]:
    assert isinstance(body, dict) and set(body) == {"error"}, body
    error = body["error"]
    assert set(error) <= {"code", "message", "data"} and {"code", "message"} <= set(error)
    assert error["code"] == code and isinstance(error["message"], str) and error["message"]
    return dict(error)
