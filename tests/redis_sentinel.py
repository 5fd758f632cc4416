"""A private Redis Sentinel setup for the tests: a master, a replica and three sentinels.

Started by a session fixture on spare ports, stopped after; the master can be killed to
test failover (the sentinels promote the replica).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from tests.reliability_fixtures import free_port, wait_port

SERVICE = "cpmaster"


class LocalRedisSentinel:
    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="cp-redis-sentinel-"))
        self.master, self.replica = free_port(), free_port()
        self.sentinels = [free_port() for _ in range(3)]
        self.processes: dict[int, subprocess.Popen] = {}

    @property
    def url(self) -> str:
        nodes = ",".join(f"127.0.0.1:{p}" for p in self.sentinels)
        return f"redis+sentinel://{nodes}/{SERVICE}/0"

    def _cli(self, port: int, *args: str) -> str:
        done = subprocess.run(
            ["redis-cli", "-p", str(port), *args],
            capture_output=True, text=True, timeout=10, check=False,
        )  # fmt: skip
        return done.stdout

    def start_server(self, port: int, *extra: str) -> None:
        self.processes[port] = subprocess.Popen(
            [
                "redis-server",
                "--port", str(port),
                "--bind", "127.0.0.1",
                "--dir", str(self.dir),
                "--dbfilename", f"dump-{port}.rdb",
                "--save", "",
                "--appendonly", "no",
                *extra,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        wait_port(port, "redis-server")

    def start(self) -> None:
        try:
            self.start_server(self.master)
            self.start_server(self.replica, "--replicaof", "127.0.0.1", str(self.master))
            for port in self.sentinels:
                conf = self.dir / f"sentinel-{port}.conf"
                conf.write_text(
                    f"port {port}\nbind 127.0.0.1\ndir {self.dir}\n"
                    f"sentinel monitor {SERVICE} 127.0.0.1 {self.master} 2\n"
                    f"sentinel down-after-milliseconds {SERVICE} 1000\n"
                    f"sentinel failover-timeout {SERVICE} 5000\n"
                )
                self.processes[port] = subprocess.Popen(
                    ["redis-server", str(conf), "--sentinel"],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                wait_port(port, "redis-sentinel")
            self.wait_synced()
            self.wait_sentinels_agree()
        except BaseException:
            self.stop()
            raise

    def current_master(self) -> int:
        reply = self._cli(self.sentinels[0], "sentinel", "get-master-addr-by-name", SERVICE)
        lines = reply.split()
        return int(lines[1]) if len(lines) == 2 else 0

    def wait_synced(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            info = "".join(
                self._cli(p, "info", "replication")
                for p in (self.master, self.replica)
                if self.processes[p].poll() is None
            )
            if "role:slave" not in info or "master_link_status:up" in info:
                return
            time.sleep(0.2)
        raise RuntimeError("the sentinel setup's replica did not sync within 30s")

    def wait_sentinels_agree(self, timeout: float = 30) -> None:
        """Until every sentinel knows the replica and the other sentinels."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ok = True
            for port in self.sentinels:
                info = self._cli(port, "info", "sentinel")
                if "slaves=1,sentinels=3" not in info:
                    ok = False
            if ok:
                return
            time.sleep(0.2)
        raise RuntimeError("the sentinels did not find each other and the replica within 30s")

    def kill(self, port: int) -> None:
        self.processes[port].kill()
        self.processes[port].wait(timeout=10)

    def stop(self) -> None:
        for proc in self.processes.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
        self.processes.clear()
        shutil.rmtree(self.dir, ignore_errors=True)
