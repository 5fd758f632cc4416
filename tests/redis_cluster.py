"""A private Redis Cluster for the tests: 3 masters + 3 replicas on spare ports 7000-7099.

Started by a session fixture, stopped after; a master can be killed to test failover.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time

from tests.reliability_fixtures import wait_port

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


class LocalRedisCluster:
    """Six ``redis-server --cluster-enabled yes`` processes in a temp dir."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="cp-redis-cluster-")
        self.ports = _ports()
        self.processes: dict[int, subprocess.Popen] = {}

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in self.ports[:3])

    def _cli(self, *args: str, port: int | None = None, timeout: float = 60) -> str:
        cmd = ["redis-cli"]
        if port is not None:
            cmd += ["-p", str(port)]
        done = subprocess.run(
            [*cmd, *args], capture_output=True, text=True, timeout=timeout, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"redis-cli {' '.join(args)} failed: {done.stdout}{done.stderr}")
        return done.stdout

    def start_node(self, port: int) -> None:
        self.processes[port] = subprocess.Popen(
            [
                "redis-server",
                "--port", str(port),
                "--bind", "127.0.0.1",
                "--dir", self.dir,
                "--cluster-enabled", "yes",
                "--cluster-config-file", f"nodes-{port}.conf",
                "--cluster-node-timeout", "1000",
                # A replica always stands for election, however long since it synced.
                "--cluster-replica-validity-factor", "0",
                "--appendonly", "yes",
                "--appendfilename", f"aof-{port}.aof",
                "--appenddirname", f"aof-{port}",
                "--dbfilename", f"dump-{port}.rdb",
                "--save", "",
                "--daemonize", "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        wait_port(port, "cluster node redis-server")

    def start(self) -> None:
        try:
            for port in self.ports:
                self.start_node(port)
            self._cli(
                "--cluster", "create", *(f"127.0.0.1:{p}" for p in self.ports),
                "--cluster-replicas", "1", "--cluster-yes",
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
                    infos.append(self._cli("cluster", "info", port=p, timeout=5))
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
                info = self._cli("info", "replication", port=port, timeout=5)
                if "role:slave" in info and "master_link_status:up" not in info:
                    pending.append(port)
            if not pending:
                return
            time.sleep(0.2)
        raise RuntimeError(f"Redis Cluster replicas {pending} not synced within {timeout}s")

    def nodes(self) -> str:
        live = next(p for p, proc in self.processes.items() if proc.poll() is None)
        return self._cli("cluster", "nodes", port=live)

    def masters(self) -> list[int]:
        """Ports of the live masters, as the cluster sees them."""
        out = []
        for line in self.nodes().splitlines():
            parts = line.split()
            if "master" in parts[2] and "fail" not in parts[2]:
                out.append(int(parts[1].split(":")[1].split("@")[0]))
        return sorted(out)

    def kill(self, port: int) -> None:
        proc = self.processes[port]
        proc.kill()
        proc.wait(timeout=10)

    def stop(self) -> None:
        for proc in self.processes.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
        self.processes.clear()
        shutil.rmtree(self.dir, ignore_errors=True)
