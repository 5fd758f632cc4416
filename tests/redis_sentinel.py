"""A private Redis Sentinel setup for the tests: a master, a replica and three sentinels.

Started by a session fixture on spare ports, stopped after; the master can be killed to
test failover (the sentinels promote the replica).
"""

from __future__ import annotations

import time

from tests.private_servers import PrivateRedis, free_port

SERVICE = "cpmaster"


class LocalRedisSentinel(PrivateRedis):
    def __init__(self) -> None:
        super().__init__("cp-redis-sentinel-")
        self.master, self.replica = free_port(), free_port()
        self.sentinels = [free_port() for _ in range(3)]

    @property
    def url(self) -> str:
        nodes = ",".join(f"127.0.0.1:{p}" for p in self.sentinels)
        return f"redis+sentinel://{nodes}/{SERVICE}/0"

    def _cli(self, port: int, *args: str) -> str:
        # While the sentinels fail over, a node may not answer: that reads as no output.
        return self.cli(port, *args, timeout=10, check=False)

    def start(self) -> None:
        try:
            self.start_server(self.master, "--appendonly", "no")
            self.start_server(
                self.replica, "--appendonly", "no", "--replicaof", "127.0.0.1", str(self.master)
            )
            for port in self.sentinels:
                conf = self.dir / f"sentinel-{port}.conf"
                conf.write_text(
                    f"port {port}\nbind 127.0.0.1\ndir {self.dir}\n"
                    f"sentinel monitor {SERVICE} 127.0.0.1 {self.master} 2\n"
                    f"sentinel down-after-milliseconds {SERVICE} 1000\n"
                    f"sentinel failover-timeout {SERVICE} 5000\n"
                )
                self.spawn(port, ["redis-server", str(conf), "--sentinel"], "redis-sentinel")
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
