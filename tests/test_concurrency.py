"""Eight writers (threads, then spawned processes) against one store while a sweep and a
rollback run: every acknowledged checkpoint is readable and intact, history stays ordered,
and nothing deadlocks."""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from datetime import timedelta

import pytest
from django.db import connections

from checkpoints.store.planning import utcnow
from checkpoints.timetravel import TimeTravel
from retention.sweep import sweep_checkpoints
from tests.reliability_fixtures import put_value, write_batch, writer_process
from tests.store_helpers import IN_PROCESS, config_for

WRITERS = 8
PUTS = 12
DOOMED = 6
JOIN_SECONDS = 120


def _writer_threads(i: int) -> list[str]:
    return ["shared", f"own-{i}"]


class Background:
    """Sweeps and rollbacks in loops until told to stop; failures are kept, not lost."""

    def __init__(self, saver, rollback_target: str) -> None:
        self.saver = saver
        self.target = rollback_target
        self.stop = threading.Event()
        self.errors: list[BaseException] = []
        self.sweeps: list = []
        self.rollbacks: list[str] = []
        self.threads = [
            threading.Thread(target=self._loop, args=(self._sweep,), daemon=True),
            threading.Thread(target=self._loop, args=(self._rollback,), daemon=True),
        ]

    def _sweep(self) -> None:
        self.sweeps.append(sweep_checkpoints(saver=self.saver))

    def _rollback(self) -> None:
        snapshot = TimeTravel(self.saver).rollback("rb", self.target)
        self.rollbacks.append(snapshot.checkpoint_id)

    def _loop(self, step) -> None:
        try:
            # At least one round each, however fast the writers are.
            step()
            while not self.stop.is_set():
                step()
                # Paced, so the loops contend with the writers without starving them of CPU.
                time.sleep(0.2)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.errors.append(exc)
        finally:
            connections.close_all()

    def __enter__(self) -> Background:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=JOIN_SECONDS)
        stuck = [t.name for t in self.threads if t.is_alive()]
        assert not stuck, f"background sweep/rollback did not finish in {JOIN_SECONDS}s: {stuck}"


def record_format_generation(saver) -> None:
    """Record the format row a flushed test database lost, as a first deployment would.

    This process remembers it checked the format already, so its saver would not write the
    row again, and a fresh saver in a child process would refuse the store without it.
    """
    from checkpoints.store.orm.ledger import forget_format_checks

    forget_format_checks()
    saver.ensure_format()


def _seed(saver) -> str:
    """Doomed threads (finished, past due) and the rollback thread; return the target id."""
    for i in range(DOOMED):
        put_value(saver, f"doomed-{i}", None, {"gone": i})
        saver.mark_finished(f"doomed-{i}", utcnow() - timedelta(minutes=1), "test")
    first = put_value(saver, "rb", None, {"rb": 0})
    put_value(saver, "rb", first, {"rb": 1})
    return first["configurable"]["checkpoint_id"]


def _check(saver, acknowledged: list[tuple[dict, dict]], background: Background) -> None:
    assert not background.errors, background.errors
    assert background.sweeps and background.rollbacks
    assert sum(r.finished_swept for r in background.sweeps) == DOOMED
    for i in range(DOOMED):
        assert saver.get_tuple(config_for(f"doomed-{i}", ns="")) is None

    assert len(acknowledged) == WRITERS * PUTS
    per_thread: dict[str, set[str]] = defaultdict(set)
    for stored, values in acknowledged:
        tup = saver.get_tuple(stored)
        assert tup is not None, f"acknowledged checkpoint {stored} is gone"
        assert tup.checkpoint["channel_values"] == values, stored
        conf = stored["configurable"]
        per_thread[conf["thread_id"]].add(conf["checkpoint_id"])

    rb_ids = set(background.rollbacks)
    per_thread["rb"] |= rb_ids
    for thread_id, wanted in per_thread.items():
        listed = [
            t.config["configurable"]["checkpoint_id"]
            for t in saver.list(config_for(thread_id, ns=""))
        ]
        assert listed == sorted(listed, reverse=True), thread_id
        assert wanted <= set(listed), (thread_id, wanted - set(listed))
        if thread_id != "rb":
            # No checkpoint appeared that no writer acknowledged.
            assert set(listed) == wanted, thread_id
    assert len(list(saver.list(config_for("rb", ns="")))) == 2 + len(background.rollbacks)
    head = saver.get_tuple(config_for("rb", ns=""))
    assert head.metadata["source"] == "rollback"
    assert head.checkpoint["channel_values"] == {"rb": 0}


# Its writer processes each build their own in-process saver from the provider's connection
# (alias, URL), beside a sweep and rollbacks on the store.
@pytest.mark.parametrize("provider", IN_PROCESS)
def test_thread_writers_with_sweep_and_rollback(store):
    target = _seed(store)

    def run(i: int):
        try:
            return write_batch(store, f"t{i}", _writer_threads(i), PUTS)
        finally:
            connections.close_all()

    acknowledged = []
    pool = ThreadPoolExecutor(max_workers=WRITERS)
    try:
        with Background(store, target) as background:
            futures = [pool.submit(run, i) for i in range(WRITERS)]
            for future in futures:
                acknowledged += future.result(timeout=JOIN_SECONDS)
    except FutureTimeout:
        pytest.fail(f"a writer thread did not finish within {JOIN_SECONDS}s (deadlock?)")
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    _check(store, acknowledged, background)


@pytest.mark.parametrize("provider", ["sqlite", "postgres", "redis"])
def test_process_writers_with_sweep_and_rollback(store, provider):
    if provider != "redis":
        record_format_generation(store)
    target = _seed(store)
    base = {"provider": provider, "count": PUTS}
    if provider == "redis":
        base["redis_url"] = store.url
    else:
        base["alias"] = store.using
        base["db_name"] = connections[store.using].settings_dict["NAME"]
    specs = [base | {"writer": f"p{i}", "thread_ids": _writer_threads(i)} for i in range(WRITERS)]

    acknowledged = []
    pool = ProcessPoolExecutor(max_workers=WRITERS, mp_context=multiprocessing.get_context("spawn"))
    try:
        with Background(store, target) as background:
            futures = [pool.submit(writer_process, spec) for spec in specs]
            for future in futures:
                acknowledged += future.result(timeout=JOIN_SECONDS)
    except FutureTimeout:
        pytest.fail(f"a writer process did not finish within {JOIN_SECONDS}s (deadlock?)")
    finally:
        for process in list((pool._processes or {}).values()):
            if process.is_alive():
                process.kill()
        pool.shutdown(wait=True, cancel_futures=True)
    _check(store, acknowledged, background)
