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
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Generic, TypeVar

__all__ = ["LoopClients"]

C = TypeVar("C")


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
        keeper = self._keep(loop, client)
        with self._lock:
            self._by_loop[loop] = (client, keeper)
        # The first step registers the generator with the loop (its firstiter hook) and parks
        # it at its `yield`; the loop's shutdown (or `aclose`) resumes it into the `finally`.
        await anext(keeper)
        return client

    async def _keep(self, loop: asyncio.AbstractEventLoop, client: C) -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            with self._lock:
                # Drop the entry: the closed client no longer pins its loop in the mapping.
                if (found := self._by_loop.get(loop)) is not None and found[0] is client:
                    del self._by_loop[loop]
            await self._close(client)

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
