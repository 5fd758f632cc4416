"""Finished marks, thread_run's rules, and parks."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.test import override_settings

from checkpoints.store.planning import utcnow
from retention.errors import ParkNotSupported, ParkRefused
from retention.models import Park
from retention.policy import declare_retention
from retention.runs import mark_finished, park, thread_run, unmark_finished
from tests.retention_fixtures import FINISHED, WAITING, write
from tests.store_helpers import backing_saver

PARKING = ("postgres", "redis")


def _settings(**values):
    base = {"RETENTION_WAITING_MINUTES": WAITING, "RETENTION_FINISHED_MINUTES": FINISHED}
    return override_settings(CHECKPOINTS={**base, **values})


def test_mark_is_due_the_finished_retention_after_the_mark(store):
    now = utcnow()
    entry = mark_finished(backing_saver(store), "t1", owner="flows", now=now)
    assert entry.due_at == now + timedelta(minutes=FINISHED)
    stored = backing_saver(store).finished_mark("t1")
    assert stored.due_at == now + timedelta(minutes=FINISHED) and stored.owner == "flows"


def test_changing_the_finished_value_later_moves_only_new_marks(store):
    now = utcnow()
    mark_finished(backing_saver(store), "old", now=now)
    with _settings(RETENTION_FINISHED_MINUTES=10):
        mark_finished(backing_saver(store), "new", now=now)
        assert backing_saver(store).finished_mark("old").due_at == now + timedelta(minutes=FINISHED)
    assert backing_saver(store).finished_mark("new").due_at == now + timedelta(minutes=10)


def test_a_declared_finished_retention_sets_the_due_time(store):
    now = utcnow()
    declare_retention(backing_saver(store), "t1", finished_minutes=5)
    assert mark_finished(backing_saver(store), "t1", now=now).due_at == now + timedelta(minutes=5)


def test_unmark_takes_the_thread_out_of_the_finished_set(store):
    mark_finished(backing_saver(store), "t1")
    assert unmark_finished(backing_saver(store), "t1") is True
    assert backing_saver(store).finished_mark("t1") is None
    assert unmark_finished(backing_saver(store), "t1") is False


def test_a_minted_thread_is_marked_finished_when_the_run_succeeds(store):
    with thread_run(backing_saver(store)) as run:
        uuid.UUID(run.thread_id)
        assert run.config == {"configurable": {"thread_id": run.thread_id}}
        write(store, run.thread_id)
        assert backing_saver(store).finished_mark(run.thread_id) is None
    assert backing_saver(store).finished_mark(run.thread_id) is not None


def test_a_minted_thread_is_marked_finished_when_the_run_fails(store):
    with pytest.raises(RuntimeError, match="node blew up"):
        with thread_run(backing_saver(store)) as run:
            raise RuntimeError("node blew up")
    assert backing_saver(store).finished_mark(run.thread_id) is not None


def test_a_callers_thread_is_unmarked_at_start_and_never_marked(store):
    mark_finished(backing_saver(store), "mine")
    with thread_run(backing_saver(store), "mine") as run:
        assert run.thread_id == "mine"
        assert backing_saver(store).finished_mark("mine") is None
    assert backing_saver(store).finished_mark("mine") is None


def test_a_parked_minted_thread_is_left_to_the_waiting_horizon(store):
    with thread_run(backing_saver(store)) as run:
        if store.provider in PARKING:
            run.park(utcnow() + timedelta(hours=1))
        else:
            with pytest.raises(ParkNotSupported):
                run.park(utcnow() + timedelta(hours=1))
    if store.provider in PARKING:
        assert backing_saver(store).finished_mark(run.thread_id) is None
        assert Park.objects.filter(thread_id=run.thread_id, provider=store.provider).exists()
    else:
        assert backing_saver(store).finished_mark(run.thread_id) is not None
        assert not Park.objects.exists()


@pytest.mark.parametrize("provider", PARKING)
def test_a_minted_thread_parked_through_the_module_function_is_not_marked(store):
    with thread_run(backing_saver(store)) as run:
        park(backing_saver(store), run.thread_id, utcnow() + timedelta(hours=1))
    assert backing_saver(store).finished_mark(run.thread_id) is None


@pytest.mark.parametrize("provider", PARKING)
def test_an_expired_park_does_not_keep_a_minted_thread_from_being_marked(store):
    with thread_run(backing_saver(store)) as run:
        run.park(utcnow() + timedelta(hours=1))
        Park.objects.filter(thread_id=run.thread_id).update(deadline=utcnow() - timedelta(1))
    assert backing_saver(store).finished_mark(run.thread_id) is not None


@pytest.mark.asyncio
async def test_async_thread_run_follows_the_same_rules(store):
    marked = sync_to_async(backing_saver(store).finished_mark, thread_sensitive=True)
    async with thread_run(backing_saver(store)) as run:
        await store.aput(
            {"configurable": {"thread_id": run.thread_id, "checkpoint_ns": ""}},
            {**_empty(), "id": str(uuid.uuid4())},
            {"source": "input", "step": -1},
            {},
        )
    assert await marked(run.thread_id) is not None

    with pytest.raises(ValueError):
        async with thread_run(backing_saver(store)) as failing:
            raise ValueError("bad input")
    assert await marked(failing.thread_id) is not None

    await sync_to_async(mark_finished, thread_sensitive=True)(backing_saver(store), "caller")
    async with thread_run(backing_saver(store), "caller"):
        assert await marked("caller") is None
    assert await marked("caller") is None

    async with thread_run(backing_saver(store)) as parked:
        if store.provider in PARKING:
            await parked.apark(utcnow() + timedelta(minutes=5))
        else:
            with pytest.raises(ParkNotSupported):
                await parked.apark(utcnow() + timedelta(minutes=5))
    assert (await marked(parked.thread_id) is None) == (store.provider in PARKING)


def _empty():
    from langgraph.checkpoint.base import empty_checkpoint

    return empty_checkpoint()


def test_park_is_refused_on_stores_that_cannot_hold_one(store):
    if store.provider in PARKING:
        assert park(backing_saver(store), "t1", utcnow() + timedelta(minutes=1)).thread_id == "t1"
        return
    with pytest.raises(ParkNotSupported) as caught:
        park(backing_saver(store), "t1", utcnow() + timedelta(minutes=1))
    assert store.provider in str(caught.value)
    assert not Park.objects.exists()


@pytest.mark.parametrize("provider", PARKING)
def test_park_without_a_deadline_is_refused_before_parking(store):
    with pytest.raises(ParkRefused, match="no deadline"):
        park(backing_saver(store), "t1", None)
    assert not Park.objects.exists()


@pytest.mark.parametrize("provider", PARKING)
def test_park_past_the_waiting_horizon_is_refused_naming_it(store):
    now = utcnow()
    with pytest.raises(ParkRefused, match="waiting horizon") as caught:
        park(backing_saver(store), "t1", now + timedelta(minutes=WAITING + 1), now=now)
    assert (now + timedelta(minutes=WAITING)).isoformat() in str(caught.value)
    declare_retention(backing_saver(store), "short", waiting_minutes=30)
    with pytest.raises(ParkRefused, match="30 minutes"):
        park(backing_saver(store), "short", now + timedelta(minutes=31), now=now)
    assert (
        park(backing_saver(store), "short", now + timedelta(minutes=29), now=now).provider
        == store.provider
    )
    assert Park.objects.count() == 1


@pytest.mark.parametrize("provider", PARKING)
def test_park_with_a_naive_or_past_deadline_is_refused(store):
    with pytest.raises(ParkRefused, match="timezone-aware"):
        park(backing_saver(store), "t1", utcnow().replace(tzinfo=None) + timedelta(minutes=1))
    with pytest.raises(ParkRefused, match="not after"):
        park(backing_saver(store), "t1", utcnow() - timedelta(minutes=1))
    assert not Park.objects.exists()
