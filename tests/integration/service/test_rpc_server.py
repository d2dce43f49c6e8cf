"""The JSON-RPC socket server, in process on a real Unix socket (docs/api.md §conventions, §startup and §shutdown)."""

from __future__ import annotations

import socket
import stat
import threading
import uuid
from typing import Any

import anyio
import anyio.to_thread
import pytest
from rpc_support import (
    WAIT_SECONDS,
    ServerThread,
    raw_connect,
    read_message,
    request,
    running_server,
    send_line,
    short_socket_dir,
    wait_settled,
)

from lcg.config import Settings
from lcg.engine import Engine, EpisodeCommit, open_engine
from lcg.errors import ConflictError, StorageError
from lcg.graph import writes
from lcg.models import Entity, Episode
from lcg.service import params as p
from lcg.service.registry import REGISTRY, Context, Method
from lcg.service.rpc import protocol
from lcg.service.rpc.client import RpcClient, RpcError
from lcg.service.rpc.server import RpcServer, bind_unix_socket
from lcg.timeutil import now

# The method tests run on the embedded store and on a FalkorDB server (conftest).
BOTH_STORAGES = True


def _register_stub(monkeypatch: pytest.MonkeyPatch, name: str, handler: Any) -> None:
    """A method that exists only for this test (the registry is restored afterwards)."""
    monkeypatch.setitem(REGISTRY, name, Method(name, None, p.Empty, handler, "test stub"))


def test_socket_is_bound_private_and_removed_at_shutdown(settings: Settings) -> None:
    with running_server(settings) as (server, path, events):
        wait_settled(server)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        assert stat.S_ISSOCK(path.stat().st_mode)
    assert not path.exists()
    states = [e["state"] for e in events.of_type("service_state")]
    assert states == ["starting", "healthy", "shutting_down", "stopped"]


def test_a_stale_socket_file_is_replaced(settings: Settings) -> None:
    with short_socket_dir() as directory:
        path = directory / "s.sock"
        stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        stale.bind(str(path))  # a socket file nothing listens on, as a crash leaves it
        stale.close()
        runner = ServerThread(RpcServer(settings, socket_path=path, handle_signals=False))
        runner.start()
        try:
            with RpcClient(path) as client:
                assert client.call("knowledge_close") == {"status": "closed"}
        finally:
            runner.stop()
        assert not path.exists()


def test_a_live_socket_is_never_stolen(settings: Settings) -> None:
    with running_server(settings) as (server, path, _):
        wait_settled(server)
        with pytest.raises(ConflictError):
            bind_unix_socket(path)
        with RpcClient(path) as client:
            assert client.call("health_check")["healthy"] is True


def test_parse_errors_answer_with_null_id_and_the_connection_stays_usable(
    settings: Settings,
) -> None:
    bad = [
        b"this is not json",
        b'{"jsonrpc":"2.0","id":5,"method":"health_check"}',  # no params
        b'{"jsonrpc":"2.0","method":"health_check","params":{}}',  # notification: no id
        b'{"id":5,"method":"health_check","params":{}}',
        b'{"jsonrpc":"2.0","id":5,"method":7,"params":{}}',
        b"[1,2,3]",
        b"\xc3\x28 invalid utf-8",
    ]
    with running_server(settings) as (server, path, events):
        wait_settled(server)
        sock, reader = raw_connect(path)
        with sock, reader:
            for line in bad:
                send_line(sock, line)
                msg = read_message(reader)
                assert msg["id"] is None
                assert msg["error"]["code"] == protocol.PARSE_ERROR
                assert msg["error"]["message"].startswith("Parse error: ")
            send_line(sock, b"   ")  # blank lines are ignored, not answered
            send_line(sock, request("health_check", request_id="after"))
            assert read_message(reader) == {
                "jsonrpc": "2.0",
                "id": "after",
                "result": {"ok": True, "healthy": True, "state": "healthy"},
            }
    parse_calls = [e for e in events.of_type("ipc_call") if e["error_code"] == -32700]
    assert len(parse_calls) == len(bad)


def test_non_object_params_read_as_empty(settings: Settings) -> None:
    with running_server(settings) as (server, path, _):
        wait_settled(server)
        sock, reader = raw_connect(path)
        with sock, reader:
            for params in (None, [1, 2], "text", 3):
                send_line(
                    sock,
                    {
                        "jsonrpc": "2.0",
                        "id": 1,
                        "method": "knowledge_list_entities",
                        "params": params,
                    },
                )
                assert read_message(reader)["result"] == {"nodes": [], "count": 0}


def test_unknown_methods_and_bad_params_are_32000_with_the_request_id(settings: Settings) -> None:
    with running_server(settings) as (server, path, events):
        wait_settled(server)
        with RpcClient(path) as client:
            with pytest.raises(RpcError) as err:
                client.call("no_such_method")
            assert err.value.code == -32000
            assert err.value.message == "IPC error: Method not found: no_such_method"
            with pytest.raises(RpcError) as err:
                client.call("knowledge_assert_entity", {"name": 42})
            assert err.value.code == -32000
            assert err.value.data == {"field": "name"}
            assert client.call("knowledge_assert_entity", {"name": "Ada"})["created"] is True
    calls = events.of_type("ipc_call")
    assert [c["method"] for c in calls] == [
        "no_such_method",
        "knowledge_assert_entity",
        "knowledge_assert_entity",
    ]
    assert [c["success"] for c in calls] == [False, False, True]
    assert [c["error_code"] for c in calls] == [-32000, -32000, None]
    assert all(isinstance(c["duration_ms"], float) and c["request_id"] for c in calls)


def test_an_unexpected_exception_is_a_generic_error_and_the_service_goes_on(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def explode(engine: Engine, a: Any, ctx: Context) -> dict[str, Any]:
        raise RuntimeError("internal detail that must not leak")

    _register_stub(monkeypatch, "test_explode", explode)
    with running_server(settings) as (server, path, _):
        wait_settled(server)
        with RpcClient(path) as client:
            with pytest.raises(RpcError) as err:
                client.call("test_explode")
            assert err.value.code == -32000
            assert "internal detail" not in err.value.message
            assert client.call("health_check")["healthy"] is True


def test_progress_frames_from_threads_and_the_loop_precede_the_response(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def steps(engine: Engine, a: Any, ctx: Context) -> dict[str, Any]:
        report = ctx.progress or (lambda frame: None)
        report({"step": 0, "where": "loop"})

        def work() -> None:
            for i in range(1, 6):
                report({"step": i, "where": "thread"})

        await anyio.to_thread.run_sync(work)
        report({"step": 6, "where": "loop"})
        return {"done": True}

    _register_stub(monkeypatch, "test_steps", steps)
    with running_server(settings) as (server, path, _):
        wait_settled(server)
        sock, reader = raw_connect(path)
        with sock, reader:
            send_line(sock, request("test_steps", {"_progress_token": "tok"}, request_id=9))
            frames = [read_message(reader) for _ in range(7)]
            assert [f["step"] for f in frames] == list(range(7))
            assert all(f["type"] == "progress" and "id" not in f for f in frames)
            assert read_message(reader) == {"jsonrpc": "2.0", "id": 9, "result": {"done": True}}
            # Without a token (or with a null one) the same call streams nothing.
            send_line(sock, request("test_steps", {"_progress_token": None}, request_id=10))
            assert read_message(reader) == {"jsonrpc": "2.0", "id": 10, "result": {"done": True}}


def test_a_streaming_call_that_fails_still_ends_with_its_error(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def half(engine: Engine, a: Any, ctx: Context) -> dict[str, Any]:
        assert ctx.progress is not None
        await anyio.to_thread.run_sync(ctx.progress, {"step": 1})
        raise StorageError("disk on fire")

    _register_stub(monkeypatch, "test_half", half)
    with running_server(settings) as (server, path, _):
        wait_settled(server)
        frames: list[dict[str, Any]] = []
        with RpcClient(path) as client:
            with pytest.raises(RpcError) as err:
                client.call("test_half", progress=frames.append)
            assert err.value.message == "database error: disk on fire"
        assert frames == [{"type": "progress", "step": 1}]


def _seed_wal_with_one_big_batch(settings: Settings, n: int) -> None:
    """One episode commit of `n` entities: a WAL batch long enough for replay progress frames."""

    async def seed(engine: Engine) -> None:
        ep = Episode(
            uuid=str(uuid.uuid4()),
            group_id="liminis",
            name="seed",
            content="seed",
            created_at=now(),
        )
        ents = [
            Entity(uuid=str(uuid.uuid4()), group_id="liminis", name=f"entity {i}", created_at=now())
            for i in range(n)
        ]
        await engine.commit_episode(EpisodeCommit("liminis", ep, ents))

    engine = open_engine(settings)
    try:
        anyio.run(seed, engine)
    finally:
        engine.close()


@pytest.mark.kuzu_only(
    "a tail rebuild (from_seq 1) replays the workspace's WAL files with progress frames; on "
    "FalkorDB a tail is applied again in one unit, without progress frames"
)
def test_rebuild_from_wal_streams_replay_progress_before_its_result(settings: Settings) -> None:
    _seed_wal_with_one_big_batch(settings, 1100)
    with running_server(settings) as (server, path, _):
        wait_settled(server)
        frames: list[dict[str, Any]] = []
        with RpcClient(path) as client:
            # from_seq 1: an incremental replay over the existing rows, reported every 1000 ops.
            result = client.call(
                "knowledge_rebuild_from_wal", {"from_seq": 1}, progress=frames.append
            )
            assert result["success"] is True
            assert result["mutations_replayed"] == 1100
            assert frames and all(f["type"] == "progress" for f in frames)
            assert frames[0]["mutations_replayed_so_far"] >= 1000
            assert client.call("knowledge_status")["entity_count"] == 1100


def test_a_slow_call_on_one_connection_does_not_block_another(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()
    entered = threading.Event()

    async def slow(engine: Engine, a: Any, ctx: Context) -> dict[str, Any]:
        def block() -> None:
            entered.set()
            assert release.wait(WAIT_SECONDS)

        await anyio.to_thread.run_sync(block)
        return {"slow": True}

    _register_stub(monkeypatch, "test_slow", slow)
    with running_server(settings) as (server, path, _):
        wait_settled(server)
        sock, reader = raw_connect(path)
        with sock, reader, RpcClient(path, timeout=10) as other:
            send_line(sock, request("test_slow", request_id="slow"))
            assert entered.wait(WAIT_SECONDS)
            # The slow call is in flight; the other connection reads and writes meanwhile.
            assert other.call("health_check")["healthy"] is True
            created = other.call("knowledge_assert_entity", {"name": "Grace"})
            listed = other.call("knowledge_list_entities")
            assert [n["uuid"] for n in listed["nodes"]] == [created["entity_uuid"]]
            release.set()
            assert read_message(reader) == {
                "jsonrpc": "2.0",
                "id": "slow",
                "result": {"slow": True},
            }


def test_requests_on_one_connection_are_answered_in_order(settings: Settings) -> None:
    with running_server(settings) as (server, path, _):
        wait_settled(server)
        sock, reader = raw_connect(path)
        with sock, reader:
            # Pipelined in one write: still answered one after the other, in order.
            batch = b"".join(
                b'{"jsonrpc":"2.0","id":%d,"method":"knowledge_assert_entity",'
                b'"params":{"name":"n%d"}}\n' % (i, i)
                for i in range(20)
            )
            sock.sendall(batch)
            assert [read_message(reader)["id"] for _ in range(20)] == list(range(20))


class _SlowOpenServer(RpcServer):
    """A server whose engine opens only when the test says so."""

    gate = threading.Event()

    def _open(self) -> Engine:
        assert self.gate.wait(WAIT_SECONDS)
        return super()._open()


def test_only_lifecycle_methods_answer_while_the_engine_opens(settings: Settings) -> None:
    _SlowOpenServer.gate = threading.Event()
    with (
        running_server(settings, server_cls=_SlowOpenServer) as (server, path, _),
        RpcClient(path) as client,
    ):
        assert client.call("health_check") == {
            "ok": False,
            "healthy": False,
            "state": "initializing",
        }
        status = client.call("knowledge_status")
        assert status["initializing"] is True and status["queryable"] is False
        with pytest.raises(RpcError) as err:
            client.call("knowledge_list_entities")
        assert err.value.code == -32001
        assert err.value.data == {"reason": "initializing"}
        with pytest.raises(RpcError) as err:
            client.call("not_a_method")
        assert err.value.code == -32000
        _SlowOpenServer.gate.set()
        wait_settled(server)
        assert client.call("health_check")["state"] == "healthy"
        assert client.call("knowledge_list_entities")["count"] == 0


def test_knowledge_close_answers_then_shuts_the_service_down(settings: Settings) -> None:
    with running_server(settings) as (server, path, events):
        wait_settled(server)
        sock, reader = raw_connect(path)
        with sock, reader:
            send_line(sock, request("knowledge_close", request_id="bye"))
            assert read_message(reader) == {
                "jsonrpc": "2.0",
                "id": "bye",
                "result": {"status": "closed"},
            }
            assert reader.readline() == b""  # the server stops reading this connection
        assert server.stopped.wait(WAIT_SECONDS)
        assert not path.exists()
        stopped = events.of_type("service_state")[-1]
        assert stopped["state"] == "stopped"


def test_a_line_over_16_mib_is_refused_and_the_connection_goes_on(settings: Settings) -> None:
    with running_server(settings) as (server, path, _):
        wait_settled(server)
        sock, reader = raw_connect(path)
        with sock, reader:
            chunk = b"x" * (1024 * 1024)
            for _ in range(17):
                sock.sendall(chunk)
            sock.sendall(b"\n")
            msg = read_message(reader)
            assert msg["id"] is None and msg["error"]["code"] == -32700
            send_line(sock, request("health_check", request_id=2))
            assert read_message(reader)["result"]["healthy"] is True


def _corrupt_database(settings: Settings) -> None:
    with settings.db_path.open("r+b") as fh:
        fh.write(b"\xde\xad\xbe\xef" * 1024)


@pytest.mark.kuzu_only(
    "it breaks the embedded Kuzu database's files (recovery from a damaged local database)"
)
def test_a_broken_database_is_served_degraded_without_self_recovery(settings: Settings) -> None:
    engine = open_engine(settings)
    anyio.run(writes.assert_entity, engine, "Linus", "liminis")
    engine.close()
    _corrupt_database(settings)
    with running_server(settings, self_recover=False) as (server, path, _):
        wait_settled(server)
        with RpcClient(path) as client:
            assert client.call("health_check") == {
                "ok": False,
                "healthy": False,
                "state": "degraded",
                "reason": "lbug_wal_corrupt",
            }
            status = client.call("knowledge_status")
            assert status["degraded"] is True and status["running"] is True
            assert status["reason"] == "lbug_wal_corrupt"
            assert "recovery_available" in status and "entity_count" not in status
            with pytest.raises(RpcError) as err:
                client.call("knowledge_list_entities")
            assert err.value.code == -32001
            assert err.value.message == "DB unavailable, recovery required"
            assert err.value.data == {"reason": "lbug_wal_corrupt"}


@pytest.mark.kuzu_only(
    "it breaks the embedded Kuzu database's files (recovery from a damaged local database)"
)
def test_a_broken_database_is_rebuilt_from_the_wal_and_swapped_in(settings: Settings) -> None:
    engine = open_engine(settings)
    for name in ("Ada", "Grace", "Linus"):
        anyio.run(writes.assert_entity, engine, name, "liminis")
    anyio.run(writes.assert_relationship, engine, "Ada", "Grace", "knows", "liminis")
    engine.close()
    _corrupt_database(settings)
    with running_server(settings) as (server, path, events):
        wait_settled(server)
        with RpcClient(path) as client:
            assert client.call("health_check")["state"] == "healthy"
            names = sorted(n["name"] for n in client.call("knowledge_list_entities")["nodes"])
            assert names == ["Ada", "Grace", "Linus"]
            assert client.call("knowledge_status")["relationship_count"] == 1
    phases = [e["phase"] for e in events.of_type("wal_auto_recovery")]
    assert phases == ["started", "moved_aside", "completed"]
    assert list(settings.db_path.parent.glob("liminis.db.broken-*"))


def _blocking_stub(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> tuple[threading.Event, threading.Event]:
    entered, release = threading.Event(), threading.Event()

    async def block(engine: Engine, a: Any, ctx: Context) -> dict[str, Any]:
        def wait() -> None:
            entered.set()
            assert release.wait(WAIT_SECONDS)

        await anyio.to_thread.run_sync(wait)
        return {"finished": True}

    _register_stub(monkeypatch, name, block)
    return entered, release


def test_shutdown_lets_an_in_flight_request_finish_and_closes_idle_connections(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    entered, release = _blocking_stub(monkeypatch, "test_block")
    with running_server(settings) as (server, path, events):
        wait_settled(server)
        busy, busy_reader = raw_connect(path)
        idle, idle_reader = raw_connect(path)
        with busy, busy_reader, idle, idle_reader:
            send_line(idle, request("health_check"))
            assert read_message(idle_reader)["result"]["healthy"] is True
            send_line(busy, request("test_block", request_id="inflight"))
            assert entered.wait(WAIT_SECONDS)
            server.shutdown_threadsafe()
            assert idle_reader.readline() == b""  # the idle connection is closed at once
            release.set()
            assert read_message(busy_reader) == {
                "jsonrpc": "2.0",
                "id": "inflight",
                "result": {"finished": True},
            }
            assert busy_reader.readline() == b""
            assert server.stopped.wait(WAIT_SECONDS)
    stopped = events.of_type("service_state")[-1]
    assert (stopped["state"], stopped["drained"], stopped["cancelled"]) == ("stopped", 1, 0)


class _DrainWatchingServer(RpcServer):
    """Tells the test when the shutdown drain has given up waiting."""

    drained = threading.Event()

    async def _drain(self) -> tuple[int, int]:
        counts = await super()._drain()
        self.drained.set()
        return counts


def test_a_request_still_running_at_the_shutdown_timeout_is_cancelled(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    entered, release = _blocking_stub(monkeypatch, "test_block")
    _DrainWatchingServer.drained = threading.Event()
    quick = Settings.for_home(settings.home, kuzu_buffer_pool_mb=256, shutdown_timeout_ms=50)
    with running_server(quick, server_cls=_DrainWatchingServer) as (server, path, events):
        wait_settled(server)
        busy, busy_reader = raw_connect(path)
        with busy, busy_reader:
            send_line(busy, request("test_block"))
            assert entered.wait(WAIT_SECONDS)
            server.shutdown_threadsafe()
            assert _DrainWatchingServer.drained.wait(WAIT_SECONDS)
            # A worker thread cannot be interrupted: the service waits for it to return, then
            # stops without answering the cancelled request.
            release.set()
            assert busy_reader.readline() == b""
            assert server.stopped.wait(WAIT_SECONDS)
    stopped = events.of_type("service_state")[-1]
    assert (stopped["drained"], stopped["cancelled"]) == (0, 1)


def test_knowledge_close_while_the_engine_opens_stops_cleanly(settings: Settings) -> None:
    _SlowOpenServer.gate = threading.Event()
    with running_server(settings, server_cls=_SlowOpenServer) as (server, path, _):
        with RpcClient(path) as client:
            assert client.call("knowledge_close") == {"status": "closed"}
        _SlowOpenServer.gate.set()  # the open completes; the engine is then closed, not leaked
        assert server.stopped.wait(WAIT_SECONDS)
    assert not path.exists()
    # The database was closed (its lock released): it opens again here.
    open_engine(settings).close()
