"""Async HTTP clients kept across calls: one per (owner, running event loop).

An async HTTP client's connection pool belongs to the event loop it first ran on: its sockets
are that loop's transports. lcg calls its providers from the service's loop, from `anyio.run`
in the CLI, from folder-ingestion threads (each with its own loop) and from a fresh loop per
test, so an owner (a provider) keeps one client per running loop and never hands a client to
another loop.

A client lives as long as its loop, or until the owner's `aclose()`: creating it starts a
small async generator on that loop whose `finally` closes the client. Every loop runner
(`asyncio.run`, `asyncio.Runner`, `anyio.run`) closes the async generators still open on its
loop (`loop.shutdown_asyncgens()`) before closing the loop, so the client's sockets are closed
on their own loop, while it still runs, with nothing left for the garbage collector (no
ResourceWarning).

The keepers are held here, by loop, not by their owner: an owner dropped while its loop runs
must not leave live sockets to the garbage collector, whose finalizers would close them behind
the loop's back (the loop's selector then holds a stale registration for a descriptor number
that the next connection reuses, and that connection's replies are lost). Such an owner's idle
connections stay open until its loop shuts down (or the server closes them).
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any, Generic, TypeVar

__all__ = ["KEEPALIVE", "LoopClients"]

# How long an idle kept-alive connection is reused. Below the 5 s after which common servers
# (uvicorn under vLLM and llama-cpp-python, Node and Go defaults) close an idle connection
# themselves: at httpx's own default of 5 s a request could go out on a connection the server
# is closing at that moment, and fail with no reply to retry on.
KEEPALIVE = 2.0

C = TypeVar("C")

_keepers_lock = threading.Lock()
# Every open client's keeper, by loop and id(client); a keeper removes itself when it closes
# its client.
_keepers: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, dict[int, AsyncGenerator[None, None]]
] = weakref.WeakKeyDictionary()


class LoopClients(Generic[C]):
    """The clients of one owner: `await get()` returns the running loop's, built on first use
    by `factory()`; `close(client)` closes one."""

    def __init__(self, factory: Callable[[], C], close: Callable[[C], Awaitable[None]]) -> None:
        self._factory = factory
        self._close = close
        self._lock = threading.Lock()  # folder ingestion calls one provider from several threads
        # The loop -> (client, the generator that closes it at the loop's shutdown).
        self._by_loop: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, tuple[C, AsyncGenerator[None, None]]
        ] = weakref.WeakKeyDictionary()

    async def get(self) -> C:
        loop = asyncio.get_running_loop()
        with self._lock:
            entry = self._by_loop.get(loop)
        if entry is not None:
            return entry[0]
        client = self._factory()
        keeper = _keep(self._by_loop, self._lock, loop, client, self._close)
        with self._lock:
            self._by_loop[loop] = (client, keeper)
        with _keepers_lock:
            _keepers.setdefault(loop, {})[id(client)] = keeper
        # The first step registers the generator with the loop (its firstiter hook) and parks
        # it at its `yield`; the loop's shutdown (or `aclose`) resumes it into the `finally`.
        await anext(keeper)
        return client

    async def aclose(self) -> None:
        """Close the running loop's client now (the next `get` on this loop builds another).

        Clients of other loops are closed by those loops' shutdown: a client must never be
        touched from a loop other than its own.
        """
        loop = asyncio.get_running_loop()
        with self._lock:
            entry = self._by_loop.get(loop)
        if entry is not None:
            await entry[1].aclose()

    def loops(self) -> int:
        """How many loops hold an open client (for tests)."""
        with self._lock:
            return len(self._by_loop)


async def _keep(
    by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[C, Any]],
    lock: threading.Lock,
    loop: asyncio.AbstractEventLoop,
    client: C,
    close: Callable[[C], Awaitable[None]],
) -> AsyncGenerator[None, None]:
    """Park until the loop's shutdown (or the owner's `aclose`), then close `client`.

    A function, not a method: the keeper must not hold its owner alive.
    """
    try:
        yield
    finally:
        with lock:
            # Drop the entry: the closed client no longer pins its loop in the mapping.
            if (found := by_loop.get(loop)) is not None and found[0] is client:
                del by_loop[loop]
        with _keepers_lock:
            if (mine := _keepers.get(loop)) is not None:
                mine.pop(id(client), None)
        await close(client)
