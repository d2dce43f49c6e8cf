"""LoopClients: one client per running loop, closed on that loop when it shuts down."""

from __future__ import annotations

import asyncio

from lcg.loopclients import LoopClients


class FakeClient:
    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.closed_on: asyncio.AbstractEventLoop | None = None

    async def aclose(self) -> None:
        self.closed_on = asyncio.get_running_loop()


def make() -> tuple[LoopClients[FakeClient], list[FakeClient]]:
    built: list[FakeClient] = []

    def factory() -> FakeClient:
        built.append(FakeClient())
        return built[-1]

    async def close(client: FakeClient) -> None:
        await client.aclose()

    return LoopClients(factory, close), built


def test_one_client_per_loop_closed_by_the_loop_shutdown_on_that_loop() -> None:
    clients, built = make()

    async def twice() -> FakeClient:
        first = await clients.get()
        assert await clients.get() is first
        return first

    one = asyncio.run(twice())
    two = asyncio.run(twice())
    assert built == [one, two]
    assert one.loop is not two.loop
    assert one.closed_on is one.loop and two.closed_on is two.loop
    assert clients.loops() == 0


def test_aclose_closes_the_running_loops_client_only_and_get_builds_a_new_one() -> None:
    clients, built = make()

    async def run() -> None:
        first = await clients.get()
        await clients.aclose()
        assert first.closed_on is asyncio.get_running_loop()
        assert clients.loops() == 0
        second = await clients.get()
        assert second is not first and second.closed_on is None

    asyncio.run(run())
    assert len(built) == 2 and all(c.closed_on is c.loop for c in built)
