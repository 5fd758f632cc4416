"""Shared pieces of the reliability suites: writers (thread or spawned process) and checks."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from langgraph.checkpoint.base import empty_checkpoint

from tests.store_helpers import config_for

# Over INLINE_COMPRESS_BYTES (64 KiB), so some writes go through the zstd path too.
BIG = 70_000


def put_value(saver, thread_id: str, parent: dict | None, values: dict[str, Any]) -> dict:
    """Put one checkpoint holding ``values`` on the thread; return the acknowledged config."""
    config = parent or config_for(thread_id, ns="")
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


def wait_for(condition, seconds: float, why=None) -> None:
    """Poll ``condition`` until it holds or ``seconds`` pass; then assert it (``why()``
    adds what to show on a timeout)."""
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert condition(), f"timed out{why() if why else ''}"


def assert_reads_back(saver, acknowledged) -> None:
    """Every acknowledged ``(config, values)`` reads back through ``saver``."""
    for config, values in acknowledged:
        got = saver.get_tuple(config)
        assert got is not None, config
        assert got.checkpoint["channel_values"] == values


def concurrent_writers(url: str, threads_of, count: int, writers: int = 8) -> list:
    """``writers`` threads, each with a Redis saver of its own on ``url``, put ``count``
    checkpoints round-robin on ``threads_of(n)``; return every acknowledged
    ``(config, values)`` once all are done, none of them having failed."""
    from django.db import connections

    from checkpoints.store.registry import get_saver

    acknowledged: list = []
    failures: list = []

    def writer(n: int) -> None:
        try:
            saver = get_saver("redis", conn_string=url)
            acknowledged.extend(write_batch(saver, f"w{n}", threads_of(n), count))
        except Exception as exc:  # noqa: BLE001 - surfaced by the assert below
            failures.append(exc)
        finally:
            connections.close_all()

    workers = [threading.Thread(target=writer, args=(n,)) for n in range(writers)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(120)
    assert not failures, failures
    assert len(acknowledged) == writers * count
    return acknowledged


class FailoverWriters:
    """Writers putting checkpoints round-robin on ``threads`` while a test kills a server.

    "patient", the default Redis saver on ``url``, must ride the failover out on its bounded
    retries and never see StoreUnavailable; "impatient" (``?retries=0``) meets it and retries
    itself (30 s at most, else ``gone``). ``acked`` holds each writer's acknowledged puts as
    (time, config, values); a test may add writers of its own with ``add``.
    """

    def __init__(self, url: str, threads: list[str], *, gone: str) -> None:
        from checkpoints.store.registry import get_saver

        self.patient = get_saver("redis", conn_string=url)
        self.impatient = get_saver("redis", conn_string=url + "?retries=0")
        self.threads, self.gone = threads, gone
        self.acked: dict[str, list] = {}
        self.unavailable: list = []
        self.failures: list = []
        self.stop = threading.Event()
        self.workers: list[threading.Thread] = []
        for name, saver in (("patient", self.patient), ("impatient", self.impatient)):
            self.add(name, lambda name=name, saver=saver: self._write(name, saver))

    def add(self, name: str, loop) -> None:
        """Run ``loop()`` as one more writer; it records its puts in ``acked[name]`` and
        its exception, if any, in ``failures``."""
        self.acked[name] = []

        def run() -> None:
            try:
                loop()
            except Exception as exc:  # noqa: BLE001 - surfaced by assert_nothing_lost
                self.failures.append(exc)

        self.workers.append(threading.Thread(target=run))

    def _write(self, name: str, saver) -> None:
        from checkpoints.errors import StoreUnavailable

        parents: dict = dict.fromkeys(self.threads)
        seq = 0
        while not self.stop.is_set():
            thread_id = self.threads[seq % len(self.threads)]
            values = {"writer": name, "seq": seq}
            for _attempt in range(300):  # bounded: 30 s of failover at most
                try:
                    stored = put_value(saver, thread_id, parents[thread_id], values)
                    break
                except StoreUnavailable as exc:
                    if name == "patient":
                        raise
                    self.unavailable.append(exc)
                    time.sleep(0.1)
            else:
                raise AssertionError(f"{name}: {self.gone}")
            parents[thread_id] = stored
            self.acked[name].append((time.monotonic(), stored, values))
            seq += 1

    def start(self) -> None:
        for worker in self.workers:
            worker.start()

    def each_wrote(self, count: int, since: float = 0.0) -> bool:
        """Every writer has ``count`` puts acknowledged after ``since``, or one failed."""
        after = (sum(1 for t, _, _ in items if t > since) for items in self.acked.values())
        return bool(self.failures) or min(after) >= count

    def finish(self) -> None:
        self.stop.set()
        for worker in self.workers:
            worker.join(60)

    def assert_nothing_lost(self, named: str) -> None:
        """No writer failed, the impatient one met the failover (its error naming ``named``),
        and every put any writer was told of reads back."""
        assert not self.failures, self.failures
        assert self.unavailable, "the impatient writer never met the failover"
        assert named in str(self.unavailable[0])
        assert_reads_back(
            self.patient, [(c, v) for items in self.acked.values() for _, c, v in items]
        )


def health(checks) -> tuple[int, dict]:
    """``/health/``'s answer with ``checks``: the status code and the JSON body by check."""
    import json

    from asgiref.sync import async_to_sync
    from django.test import RequestFactory

    from checkpoints.health import HealthView

    request = RequestFactory().get("/health/", HTTP_ACCEPT="application/json")
    response = async_to_sync(HealthView.as_view(checks=checks))(request)
    return response.status_code, json.loads(response.content)
