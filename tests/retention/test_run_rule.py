"""The run rule: a finished thread written since it was marked is spared, and shown as such.

A new run writes on a thread its owner had marked finished. The put path does not take
the thread out of the finished set (no query added to every put); the sweep compares the
mark's time with the thread's last write and spares it, the API and the admin show
"finished, written since", and the waiting horizon, counted from the new write, still
applies where the store sweeps idle threads.
"""

from __future__ import annotations

import re
import time
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from langchain_core.messages import HumanMessage

from checkpoints.api.serializers import ThreadSerializer
from checkpoints.selectors import thread_get
from checkpoints.store.planning import utcnow
from retention.fanout import fan_out, run_batch
from retention.models import SparedThread, SweepRun
from retention.result import WRITTEN_SINCE
from retention.runs import mark_finished
from retention.sweep import sweep_checkpoints, sweep_threads
from tests.admin_fixtures import chat_graph, run_chat
from tests.retention_fixtures import FINISHED, WAITING, holds
from tests.store_helpers import backing_saver

DUE = timedelta(minutes=FINISHED + 5)  # past the finished horizon, inside the waiting one


def finished_then_written(store, thread_id: str) -> None:
    """A real graph run, its mark, then a new run's checkpoints on the finished thread."""
    run_chat(store, thread_id, turns=1)
    mark_finished(backing_saver(store), thread_id, owner="tests")
    time.sleep(0.01)  # the Redis registry keeps write times in milliseconds
    chat_graph(store).invoke(
        {"messages": [HumanMessage(content="one more question")]},
        {"configurable": {"thread_id": thread_id}},
    )


def staff():
    return get_user_model()(username="ops", is_staff=True, is_superuser=True)


def test_the_sweep_spares_a_finished_thread_written_since_and_reports_it(store):
    finished_then_written(store, "again")
    run_chat(store, "done", turns=1)
    mark_finished(backing_saver(store), "done", owner="tests")
    result = sweep_checkpoints(saver=backing_saver(store), now=utcnow() + DUE)
    assert (result.finished_swept, result.swept_count) == (1, 1)
    assert [(s["thread_id"], s["horizon"], s["owner"]) for s in result.spared] == [
        ("again", "finished", WRITTEN_SINCE)
    ]
    assert re.fullmatch(
        r"written .+, after its finished mark at .+: its run's owner marks it again",
        result.spared[0]["reason"],
    )
    assert holds(store, "again") and not holds(store, "done")
    assert (
        backing_saver(store).finished_mark("again") is not None
    )  # still marked: shown as written since
    spared = SparedThread.objects.get(sweep_run_id=result.sweep_run_id)
    assert (spared.thread_id, spared.owner) == ("again", WRITTEN_SINCE)
    # Marked again when that run ends: swept as finished.
    mark_finished(backing_saver(store), "again", owner="tests")
    again = sweep_checkpoints(saver=backing_saver(store), now=utcnow() + DUE)
    assert again.finished_swept == 1 and not holds(store, "again")


def test_the_api_shows_finished_written_since_on_every_provider(store):
    finished_then_written(store, "again")
    run_chat(store, "done", turns=1)
    mark_finished(backing_saver(store), "done", owner="tests")
    shown = {
        t: ThreadSerializer(thread_get(saver=backing_saver(store), user=staff(), thread_id=t)).data
        for t in ("again", "done")
    }
    assert shown["again"]["status"] == "finished" and shown["again"]["written_since_finished"]
    assert shown["done"]["status"] == "finished" and not shown["done"]["written_since_finished"]
    assert shown["again"]["last_write_at"] > shown["again"]["finished_marked_at"]


def test_a_fanned_out_batch_applies_the_same_rule(store):
    finished_then_written(store, "again")
    run_chat(store, "done", turns=1)
    mark_finished(backing_saver(store), "done", owner="tests")
    now = utcnow() + DUE
    planned = fan_out(backing_saver(store), now=now, max_batches=None, triggered_by="test")
    [outcome] = [
        run_batch(backing_saver(store), planned.run.pk, i, ids, now=now, worker="w", final=True)
        for i, ids in enumerate(planned.batches)
    ]
    assert (outcome["deleted"], outcome["spared"]) == (1, 1)
    assert holds(store, "again") and not holds(store, "done")
    assert SweepRun.objects.get(pk=planned.run.pk).status == SweepRun.OK
    listed = sweep_threads(["again"], saver=backing_saver(store), now=now)
    assert listed.swept_count == 0 and listed.spared[0]["owner"] == WRITTEN_SINCE


@pytest.mark.parametrize("provider", ["sqlite", "postgres"])
def test_the_waiting_horizon_still_takes_it_once_idle(store):
    finished_then_written(store, "again")
    later = utcnow() + timedelta(minutes=WAITING + 5)
    result = sweep_checkpoints(saver=backing_saver(store), now=later)
    # Idle past the waiting horizon since its new write: deleted by that horizon only.
    assert (result.waiting_swept, result.finished_swept, result.spared) == (1, 0, [])
    assert not holds(store, "again")


def test_the_http_api_and_the_admin_show_it(saver, superuser, client):
    finished_then_written(saver, "again")
    client.force_login(superuser)
    body = client.get("/api/threads/again/").json()
    assert body["status"] == "finished" and body["written_since_finished"] is True
    listed = client.get("/api/threads/").json()
    assert [t["written_since_finished"] for t in listed["results"]] == [True]
    page = client.get("/admin/checkpoints/thread/").content.decode()
    assert "finished, written since" in page and "the sweep spares it" in page
