"""The OpenAI-compatible embedder against a scripted server that really listens (TCP and UDS)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from click.testing import CliRunner  # noqa: TID251  CLI tests drive click's own runner

from lcg import Settings, open_engine
from lcg.cli.compat import Options, embedder_endpoint
from lcg.cli.main import cli
from lcg.embedding.http import Endpoint, connect_http
from lcg.errors import ConfigError, ExtractionError
from lcg.service.registry import dispatch
from lcg.testing.scripted_embeddings import ScriptedEmbeddingServer

pytestmark = pytest.mark.anyio


def http_settings(tmp_path: Path, **values: object) -> Settings:
    return Settings.for_home(tmp_path / ".lcg", kuzu_buffer_pool_mb=256, embedder="http", **values)


def closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def test_texts_are_sent_in_batches_in_input_order(tmp_path: Path) -> None:
    with ScriptedEmbeddingServer(dim=32) as server:
        embedder = connect_http(Endpoint(url=server.url), model="m", dim=None, batch_size=4)
        texts = [f"text number {i}" for i in range(10)]
        vectors = embedder.embed(texts)
        assert [len(b) for b in server.batches] == [1, 4, 4, 2]  # the probe, then 3 batches
        assert server.batches[1:] == [texts[0:4], texts[4:8], texts[8:10]]
        # The server answers in reverse order; rows come back in input order, normalised.
        again = connect_http(Endpoint(url=server.url), model="m", dim=None, batch_size=64)
        assert (again.embed(texts) == vectors).all()
        assert server.batches[-1] == texts  # one request for all ten


def test_the_probe_learns_the_dimension_and_the_reported_model(tmp_path: Path) -> None:
    with ScriptedEmbeddingServer(dim=40, reported_model="served-model") as server:
        embedder = connect_http(Endpoint(url=server.url), model="asked", dim=None)
        assert (embedder.identity.model, embedder.identity.dim) == ("served-model", 40)
        embedder.embed(["x"])
        assert server.models == ["asked", "asked"]  # requests keep the configured name


def test_a_dimension_override_that_disagrees_with_the_probe_is_a_config_error(
    tmp_path: Path,
) -> None:
    with ScriptedEmbeddingServer(dim=64) as server:
        settings = http_settings(tmp_path, embedding_url=server.url, embedding_dim=128)
        with pytest.raises(ConfigError) as info:
            open_engine(settings)
    assert "LCG_EMBEDDING_DIM=128" in info.value.message and "64" in info.value.message
    assert not settings.db_path.exists()  # the probe comes before the database is opened


def test_a_failing_probe_is_fatal_unless_the_dimension_is_configured(tmp_path: Path) -> None:
    with ScriptedEmbeddingServer(dim=64) as server:
        server.fail_next(503)
        with pytest.raises(ConfigError) as info:
            connect_http(Endpoint(url=server.url), model=None, dim=None)
        assert "HTTP 503" in info.value.message and server.url in info.value.message
        server.fail_next(503)
        embedder = connect_http(Endpoint(url=server.url), model=None, dim=64)
        assert embedder.identity.dim == 64
        assert embedder.embed(["works once the server does"]).shape == (1, 64)


def test_an_unreachable_endpoint_is_fatal_at_startup_naming_the_url(tmp_path: Path) -> None:
    url = closed_port_url()
    settings = http_settings(tmp_path, embedding_url=url, embedding_dim=64)
    with pytest.raises(ConfigError) as info:
        open_engine(settings)
    assert f"{url}/v1/embeddings" in info.value.message and "unreachable" in info.value.message


async def test_an_engine_embeds_over_a_unix_socket(tmp_path: Path) -> None:
    with ScriptedEmbeddingServer(dim=24, tcp=False, uds_path=tmp_path / "emb.sock") as server:
        engine = open_engine(http_settings(tmp_path, embedding_uds=str(server.uds_path)))
        try:
            await dispatch(
                engine, "knowledge_assert_entity", {"name": "Apollo 13", "summary": "A mission."}
            )
            status = await dispatch(engine, "knowledge_status", {})
        finally:
            engine.close()
        assert (status["embedding_dim"], status["embedding_lexical_only"]) == (24, False)
        assert status["embedding_model"] == "bge-base-en-v1.5"
        assert server.batches[1:] == [["Apollo 13", "A mission."]]  # name and summary together


async def test_a_failing_endpoint_fails_the_write_and_writes_nothing(tmp_path: Path) -> None:
    with ScriptedEmbeddingServer(dim=32) as server:
        engine = open_engine(http_settings(tmp_path, embedding_url=server.url))
        try:
            server.fail_next(500)
            with pytest.raises(ExtractionError) as info:
                await dispatch(engine, "knowledge_assert_entity", {"name": "Apollo 13"})
            assert "HTTP 500" in info.value.message and server.url in info.value.message
            server.dim = 16  # a server that now answers with another dimension
            with pytest.raises(ExtractionError) as wrong:
                await dispatch(engine, "knowledge_assert_entity", {"name": "Apollo 13"})
            assert "16-dimensional" in wrong.value.message
            nodes = await dispatch(engine, "knowledge_get_nodes_by_group", {})
            assert nodes["count"] == 0
            assert engine.parts.wal.bounds("liminis").max_seq is None  # no WAL line either
        finally:
            engine.close()


def test_the_reference_flags_become_the_embedder_endpoint(tmp_path: Path) -> None:
    sock = tmp_path / "e.sock"
    assert embedder_endpoint(Options(mcp_stdio=True, embedder_uds=str(sock))) == (
        "uds",
        str(sock.resolve()),
    )
    assert embedder_endpoint(Options(embedder_http="http://h:1")) == ("http", "http://h:1")
    attached = Options(mcp_stdio=True, connect="/s.sock", embedder_http="http://h:1")
    assert embedder_endpoint(attached) is None  # attached mode ignores them


def test_lcg_serve_refuses_bad_embedder_flags_before_starting(tmp_path: Path) -> None:
    runner = CliRunner()
    home = str(tmp_path / ".lcg")
    bad_url = runner.invoke(cli, ["--home", home, "serve", "--embedder-http", "ftp://h"])
    assert bad_url.exit_code == 2 and "http:// or https://" in bad_url.output
    missing = runner.invoke(cli, ["--home", home, "serve", "--embedder-uds", "/nonexistent.sock"])
    assert missing.exit_code == 2
    sock = tmp_path / "e.sock"
    sock.touch()
    both = runner.invoke(
        cli, ["--home", home, "serve", "--embedder-uds", str(sock), "--embedder-http", "http://h"]
    )
    assert both.exit_code == 2 and "mutually exclusive" in both.output


@pytest.mark.parametrize("transport", ["http", "uds"])
def test_calls_share_one_connection_and_survive_a_server_restart(
    tmp_path: Path, transport: str
) -> None:
    uds = tmp_path / "emb.sock"
    server = (
        ScriptedEmbeddingServer(dim=8)
        if transport == "http"
        else ScriptedEmbeddingServer(dim=8, uds_path=uds, tcp=False)
    )
    with server:
        endpoint = Endpoint(url=server.url) if transport == "http" else Endpoint(uds=str(uds))
        embedder = connect_http(endpoint, model="m", dim=None, batch_size=2)
        for i in range(4):
            assert embedder.embed([f"text {i}", "other", "third"]).shape == (3, 8)
        assert server.accepted == 2  # the probe's, then one for the embedder's 8 requests
        server.stop()  # closes the kept-alive connection, as an exiting server process does
        server.start()  # the same port / socket path
        assert embedder.embed(["after the restart"]).shape == (1, 8)
        assert server.accepted == 3
        embedder.close()
