"""Shared pieces of the reliability suites: writers (thread or spawned process) and checks."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from typing import Any

from langgraph.checkpoint.base import empty_checkpoint

# Over INLINE_COMPRESS_BYTES (64 KiB), so some writes go through the zstd path too.
BIG = 70_000


def put_value(saver, thread_id: str, parent: dict | None, values: dict[str, Any]) -> dict:
    """Put one checkpoint holding ``values`` on the thread; return the acknowledged config."""
    config = parent or {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    checkpoint = empty_checkpoint()
    versions = {channel: saver.get_next_version(None, None) for channel in values}
    checkpoint["channel_values"] = dict(values)
    checkpoint["channel_versions"] = dict(versions)
    return saver.put(config, checkpoint, {"source": "loop", "step": 1}, versions)


def write_batch(saver, writer: str, thread_ids: list[str], count: int) -> list[tuple[dict, dict]]:
    """``count`` puts spread round-robin over ``thread_ids``; return (config, values) pairs."""
    acknowledged = []
    parents: dict[str, dict | None] = dict.fromkeys(thread_ids)
    for seq in range(count):
        thread_id = thread_ids[seq % len(thread_ids)]
        size = BIG if seq % 5 == 4 else 40
        values = {"writer": writer, "seq": seq, "payload": f"{writer}:{seq}:" + "x" * size}
        stored = put_value(saver, thread_id, parents[thread_id], values)
        parents[thread_id] = stored
        acknowledged.append((stored, values))
    return acknowledged


def writer_process(spec: dict[str, Any]) -> list[tuple[dict, dict]]:
    """Entry point of a spawned writer: set Django up on the parent's test database, write."""
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.settings"
    from django.conf import settings

    alias = spec.get("alias")
    if alias:
        # The parent runs on the test database; point this process at the very same one.
        settings.DATABASES[alias]["NAME"] = spec["db_name"]
    import django

    django.setup()
    from django.db import connections

    from checkpoints.savers import get_saver

    try:
        if spec["provider"] == "redis":
            saver = get_saver("redis", conn_string=spec["redis_url"])
        else:
            saver = get_saver(spec["provider"], using=alias)
        return write_batch(saver, spec["writer"], spec["thread_ids"], spec["count"])
    finally:
        connections.close_all()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RedisServer:
    """A private redis-server on its own port, so killing it disturbs no one else."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"redis-server on port {self.port} did not start within 10s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        self.process = None
