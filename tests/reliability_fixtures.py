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

    from checkpoints.store.registry import get_saver

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


def wait_for(condition, seconds: float, why=None) -> None:
    """Poll ``condition`` until it holds or ``seconds`` pass; then assert it (``why()``
    adds what to show on a timeout)."""
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert condition(), f"timed out{why() if why else ''}"


def failover_writer(
    name: str,
    saver,
    threads: list[str],
    *,
    stop,
    acked: dict[str, list],
    unavailable: list,
    failures: list,
    gone: str,
) -> None:
    """Put checkpoints round-robin until ``stop``; the "patient" writer must never see
    StoreUnavailable, the others retry it (30 s at most). Records every acknowledged put."""
    from checkpoints.errors import StoreUnavailable

    parents: dict = dict.fromkeys(threads)
    seq = 0
    try:
        while not stop.is_set():
            thread_id = threads[seq % len(threads)]
            values = {"writer": name, "seq": seq}
            for _attempt in range(300):  # bounded: 30 s of failover at most
                try:
                    stored = put_value(saver, thread_id, parents[thread_id], values)
                    break
                except StoreUnavailable as exc:
                    if name == "patient":
                        raise
                    unavailable.append(exc)
                    time.sleep(0.1)
            else:
                raise AssertionError(f"{name}: {gone}")
            parents[thread_id] = stored
            acked[name].append((time.monotonic(), stored, values))
            seq += 1
    except Exception as exc:  # noqa: BLE001 - surfaced by the caller's assert
        failures.append(exc)


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
        try:
            wait_port(self.port, "redis-server")
        except RuntimeError:
            self.stop()
            raise

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        self.process = None


def health(checks) -> tuple[int, dict]:
    """``/health/``'s answer with ``checks``: the status code and the JSON body by check."""
    import json

    from asgiref.sync import async_to_sync
    from django.test import RequestFactory

    from checkpoints.health import HealthView

    request = RequestFactory().get("/health/", HTTP_ACCEPT="application/json")
    response = async_to_sync(HealthView.as_view(checks=checks))(request)
    return response.status_code, json.loads(response.content)
