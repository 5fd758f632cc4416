"""The sweep never deletes an acknowledged write: a thread written after the sweep judged
it is kept (and reported), and a sweep killed between a batch's delete and its record
leaves a record counting exactly what it deleted."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connections

from checkpoints.store.planning import utcnow
from retention.models import SparedThread, SweepRun
from retention.result import WRITTEN_DURING
from retention.sweep import register_live_thread_filter, sweep_checkpoints, sweep_threads
from tests.retention_fixtures import WAITING, finished_past_due, holds, write
from tests.store_helpers import backing_saver, config_for, on_every_provider_and_the_cluster

ORM = ("sqlite", "postgres")
TARGETS = [f"busy-{i}" for i in range(10)]
OTHERS = [f"quiet-{i}" for i in range(5)]


def writer_during_filter(store, targets: list[str]) -> dict[str, str]:
    """A slow live-thread filter: on its first batch it waits while a writer thread puts a
    checkpoint to each target through the real saver. Returns target -> acknowledged id."""
    acknowledged: dict[str, str] = {}
    failures: list[BaseException] = []

    def writer():
        try:
            for thread_id in targets:
                config = write(store, thread_id)
                acknowledged[thread_id] = config["configurable"]["checkpoint_id"]
        except BaseException as exc:  # noqa: BLE001 - surfaced by the filter
            failures.append(exc)
        finally:
            connections.close_all()

    def slow(thread_ids):
        if not acknowledged and not failures:
            other = threading.Thread(target=writer)
            other.start()
            other.join(60)
            assert not failures, failures
            assert len(acknowledged) == len(targets)
        return set()

    register_live_thread_filter("slow", slow)
    return acknowledged


def survived(store, thread_id: str, checkpoint_id: str) -> bool:
    return store.get_tuple(config_for(thread_id, checkpoint_id, ns="")) is not None


def assert_written_during_kept(store, result, acknowledged, horizon: str) -> None:
    lost = [t for t, cid in acknowledged.items() if not survived(store, t, cid)]
    assert lost == []
    assert not any(holds(store, t) for t in OTHERS)
    assert (result.written_during, sorted(result.written_during_ids)) == (10, sorted(TARGETS))
    assert {s["thread_id"] for s in result.spared if s["owner"] == WRITTEN_DURING} == set(TARGETS)
    assert all(s["horizon"] == horizon for s in result.spared)
    run = SweepRun.objects.get(pk=result.sweep_run_id)
    assert (run.written_during, run.swept_count) == (10, len(OTHERS))
    recorded = SparedThread.objects.filter(sweep_run=run, owner=WRITTEN_DURING)
    assert sorted(recorded.values_list("thread_id", flat=True)) == sorted(TARGETS)


@on_every_provider_and_the_cluster
def test_a_write_during_the_sweep_survives_the_finished_horizon(store):
    now = utcnow()
    for thread_id in TARGETS + OTHERS:
        finished_past_due(store, thread_id, now)
    acknowledged = writer_during_filter(store, TARGETS)

    result = sweep_checkpoints(saver=backing_saver(store), now=now)

    assert_written_during_kept(store, result, acknowledged, "finished")
    assert result.finished_swept == len(OTHERS)
    # Kept whole: the mark stays, for the run's owner to mark again when that run ends.
    assert all(backing_saver(store).finished_mark(t) is not None for t in TARGETS)
    assert all(backing_saver(store).finished_mark(t) is None for t in OTHERS)


@pytest.mark.parametrize("provider", ORM)
def test_a_write_during_the_sweep_survives_the_waiting_horizon(store):
    for thread_id in TARGETS + OTHERS:
        write(store, thread_id)
    now = utcnow() + timedelta(minutes=WAITING + 1)
    acknowledged = writer_during_filter(store, TARGETS)

    result = sweep_checkpoints(saver=backing_saver(store), now=now)

    assert_written_during_kept(store, result, acknowledged, "waiting")
    assert (result.waiting_swept, result.finished_swept) == (len(OTHERS), 0)


@pytest.mark.parametrize("provider", ORM)
def test_a_write_during_a_fanned_out_batch_survives_the_waiting_horizon(store):
    for thread_id in TARGETS + OTHERS:
        write(store, thread_id)
    now = utcnow() + timedelta(minutes=WAITING + 1)
    acknowledged = writer_during_filter(store, TARGETS)

    result = sweep_threads(TARGETS + OTHERS, saver=backing_saver(store), now=now)

    assert_written_during_kept(store, result, acknowledged, "waiting")


# -- the store primitive, on every store -------------------------------------------------
@on_every_provider_and_the_cluster
def test_the_store_deletes_only_threads_still_at_their_judged_write(store):
    now = utcnow()
    for thread_id in ("same", "rewritten", "appeared"):
        finished_past_due(store, thread_id, now)
    backing_saver(store).mark_finished("marked-only", now)
    judged = backing_saver(store).last_writes(["same", "rewritten", "marked-only"])
    assert set(judged) == {"same", "rewritten"}
    judged["marked-only"] = None
    judged["appeared"] = None  # judged with no record; one exists by the delete
    write(store, "rewritten")

    kept = backing_saver(store).delete_threads_unwritten(judged)

    assert kept == {"rewritten", "appeared"}
    assert not holds(store, "same") and backing_saver(store).finished_mark("same") is None
    assert backing_saver(store).finished_mark("marked-only") is None
    for thread_id in ("rewritten", "appeared"):
        assert holds(store, thread_id) and backing_saver(store).finished_mark(thread_id) is not None
    assert backing_saver(store).delete_threads_unwritten({}) == set()


def test_a_task_write_after_the_judgment_keeps_the_thread(store):
    """An interrupt or a resume stored with put_writes, and no checkpoint after it, is a
    write like any other: the thread it lands on after the sweep judged it is kept, and the
    acknowledged write with it."""
    now = utcnow()
    for thread_id in ("quiet", "interrupted"):
        finished_past_due(store, thread_id, now)
    judged = backing_saver(store).last_writes(["quiet", "interrupted"])
    head = store.get_tuple({"configurable": {"thread_id": "interrupted"}})
    store.put_writes(head.config, [("__interrupt__", {"question": "publish?"})], "task-1")

    kept = backing_saver(store).delete_threads_unwritten(judged)

    assert kept == {"interrupted"}
    assert not holds(store, "quiet")
    after = store.get_tuple({"configurable": {"thread_id": "interrupted"}})
    assert [(w[1], w[2]) for w in after.pending_writes] == [
        ("__interrupt__", {"question": "publish?"})
    ]
    assert backing_saver(store).last_writes(["interrupted"])["interrupted"] > judged["interrupted"]


# -- a sweep killed between a batch's delete and its record -------------------------------
KILLER = """
import os, signal, sys
import django
os.environ["DJANGO_SETTINGS_MODULE"] = "tests.settings"
django.setup()
from django.conf import settings
from django.db import connections
# The store's own database as "default" (the run's record lives there too); the app's
# checks at setup opened the configured one, so its wrapper is dropped.
connections["default"].close()
del connections["default"]
settings.DATABASES["default"] = connections.settings["default"] = {database!r}
from django.test import override_settings
from checkpoints.store.registry import get_saver
from retention.sweep import sweep_checkpoints
records = []

def die_before_the_second_record(execute, sql, params, many, context):
    # The second batch's progress: its delete has run, its record has not.
    if sql.startswith('UPDATE "retention_sweeprun" SET "swept_count"'):
        records.append(sql)
        if len(records) == 2:
            os.kill(os.getpid(), signal.SIGKILL)
    return execute(sql, params, many, context)

with override_settings(CHECKPOINTS={{**settings.CHECKPOINTS, "SWEEP_BATCH_SIZE": 2}}):
    saver = get_saver({provider!r}, using="default")
    with connections["default"].execute_wrapper(die_before_the_second_record):
        sweep_checkpoints(saver=saver, triggered_by="doomed process")
sys.exit("the sweep finished: it was never killed")
"""


@pytest.mark.parametrize("provider", ORM)
def test_a_sweep_killed_between_delete_and_record_records_what_it_deleted(store, tmp_path):
    """A real sweep process, SIGKILLed after its second batch's delete ran and before that
    batch's progress reached the run's record (here in the store's own database)."""
    now = utcnow()
    doomed = [f"doomed-{i}" for i in range(6)]
    for thread_id in doomed:
        finished_past_due(store, thread_id, now)
    database = dict(connections[backing_saver(store).db_alias].settings_dict)
    connections.close_all()
    script = tmp_path / "sweep_and_die.py"
    script.write_text(
        textwrap.dedent(KILLER).format(
            database={k: v for k, v in database.items() if k != "TEST"}, provider=store.provider
        )
    )
    env = {**os.environ, "PYTHONPATH": str(settings.BASE_DIR)}
    done = subprocess.run(
        [sys.executable, str(script)], cwd=settings.BASE_DIR, env=env, capture_output=True
    )
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()[-2000:]

    killed = SweepRun.objects.using(backing_saver(store).db_alias).get()
    deleted = sum(not holds(store, t) for t in doomed)
    assert killed.status == "running" and killed.finished_at is None
    assert (killed.swept_count, killed.finished_swept) == (deleted, deleted) == (2, 2)
