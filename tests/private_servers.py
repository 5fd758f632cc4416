"""Private servers the tests start and kill: spare ports, and redis-server processes.

A private server disturbs no one else when a test kills it. ``PrivateRedis`` runs the
redis-server processes of one setup in a temp dir (a lone server here; the cluster in
tests/redis_cluster.py, the sentinels in tests/redis_sentinel.py).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path


def free_port() -> int:
    """A port no one listens on now, chosen by the system."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def free_ports(ports: range, count: int = 1) -> list[int]:
    """``count`` free ports in ``ports``, starting at a per-process offset so two test runs on
    one machine rarely try the same ones."""
    found = []
    start = os.getpid() % len(ports)
    for offset in range(len(ports)):
        port = ports[(start + offset) % len(ports)]
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        found.append(port)
        if len(found) == count:
            return found
    raise RuntimeError(f"no {count} free port(s) in {ports.start}-{ports.stop - 1}")


def wait_port(port: int, what: str) -> None:
    """Wait (10 s at most) until a private server listens on ``port``."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} on port {port} did not start within 10s")


class PrivateRedis:
    """The redis-server processes of one setup, by port, in a temp dir; ``stop`` kills them
    all and removes the dir. A context manager: started on entry, stopped on exit."""

    def __init__(self, prefix: str) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix=prefix))
        self.processes: dict[int, subprocess.Popen] = {}

    def start(self) -> None:
        raise NotImplementedError

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def spawn(self, port: int, command: list[str], what: str = "redis-server") -> None:
        """Run ``command``, a server that will listen on ``port``, and wait until it does."""
        self.dir.mkdir(exist_ok=True)  # again, after a stop
        self.processes[port] = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        wait_port(port, what)

    def start_server(self, port: int, *extra: str, what: str = "redis-server") -> None:
        """A redis-server on ``port``, writing no snapshot, with ``extra`` options."""
        self.spawn(
            port,
            [
                "redis-server",
                "--port", str(port),
                "--bind", "127.0.0.1",
                "--dir", str(self.dir),
                "--dbfilename", f"dump-{port}.rdb",
                "--save", "",
                "--daemonize", "no",
                *extra,
            ],
            what,
        )  # fmt: skip

    def cli(self, port: int | None, *args: str, timeout: float = 30, check: bool = True) -> str:
        """``redis-cli -p port args...``'s output; a failure raises unless ``check`` is off."""
        command = ["redis-cli", *(["-p", str(port)] if port is not None else []), *args]
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        if check and done.returncode != 0:
            raise RuntimeError(f"redis-cli {' '.join(args)} failed: {done.stdout}{done.stderr}")
        return done.stdout

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


class RedisServer(PrivateRedis):
    """One private redis-server without persistence; it can be stopped and started again."""

    def __init__(self, port: int | None = None) -> None:
        super().__init__("cp-redis-")
        self.port = port or free_port()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        try:
            self.start_server(self.port, "--appendonly", "no")
        except BaseException:
            self.stop()
            raise
