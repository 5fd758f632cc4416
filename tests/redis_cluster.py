"""A private Redis Cluster for the tests: 3 masters + 3 replicas on spare ports 7000-7099.

Started by a session fixture, stopped after; a master can be killed to test failover.
"""

from __future__ import annotations

import socket
import subprocess
import time

from tests.private_servers import PrivateRedis

FIRST_PORT, LAST_PORT = 7000, 7099
NODES = 6


def _free(port: int) -> bool:
    # The cluster bus listens on port + 10000 too.
    for p in (port, port + 10000):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", p))
            except OSError:
                return False
    return True


def _ports() -> list[int]:
    for base in range(FIRST_PORT, LAST_PORT - NODES + 2, NODES):
        ports = list(range(base, base + NODES))
        if all(_free(p) for p in ports):
            return ports
    raise RuntimeError(f"no {NODES} free ports in {FIRST_PORT}-{LAST_PORT} for a Redis Cluster")


class LocalRedisCluster(PrivateRedis):
    """Six ``redis-server --cluster-enabled yes`` processes in a temp dir."""

    def __init__(self) -> None:
        super().__init__("cp-redis-cluster-")
        self.ports = _ports()

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in self.ports[:3])

    def start_node(self, port: int) -> None:
        self.start_server(
            port,
            "--cluster-enabled", "yes",
            "--cluster-config-file", f"nodes-{port}.conf",
            "--cluster-node-timeout", "1000",
            # A replica always stands for election, however long since it synced.
            "--cluster-replica-validity-factor", "0",
            "--appendonly", "yes",
            "--appendfilename", f"aof-{port}.aof",
            "--appenddirname", f"aof-{port}",
            what="cluster node redis-server",
        )  # fmt: skip

    def start(self) -> None:
        try:
            for port in self.ports:
                self.start_node(port)
            self.cli(
                None,
                "--cluster", "create", *(f"127.0.0.1:{p}" for p in self.ports),
                "--cluster-replicas", "1", "--cluster-yes",
                timeout=60,
            )  # fmt: skip
            self.wait_ok()
            self.wait_replicas_synced()
        except BaseException:
            self.stop()
            raise

    def wait_ok(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            live = [p for p, proc in self.processes.items() if proc.poll() is None]
            infos = []
            for p in live:
                try:
                    infos.append(self.cli(p, "cluster", "info", timeout=5))
                except (RuntimeError, subprocess.TimeoutExpired):
                    infos.append("")
            if infos and all("cluster_state:ok" in i for i in infos):
                return
            time.sleep(0.2)
        raise RuntimeError(f"Redis Cluster on ports {self.ports} not ok within {timeout}s")

    def wait_replicas_synced(self, timeout: float = 30) -> None:
        """Until every live replica's link to its master is up (its first sync done)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pending = []
            for port, proc in self.processes.items():
                if proc.poll() is not None:
                    continue
                info = self.cli(port, "info", "replication", timeout=5)
                if "role:slave" in info and "master_link_status:up" not in info:
                    pending.append(port)
            if not pending:
                return
            time.sleep(0.2)
        raise RuntimeError(f"Redis Cluster replicas {pending} not synced within {timeout}s")

    def nodes(self) -> str:
        live = next(p for p, proc in self.processes.items() if proc.poll() is None)
        return self.cli(live, "cluster", "nodes")

    def masters(self) -> list[int]:
        """Ports of the live masters, as the cluster sees them."""
        out = []
        for line in self.nodes().splitlines():
            parts = line.split()
            if "master" in parts[2] and "fail" not in parts[2]:
                out.append(int(parts[1].split(":")[1].split("@")[0]))
        return sorted(out)
