"""The sweep's rules on every provider they apply to."""

from __future__ import annotations

import re
import threading
from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connections
from django.test import override_settings
from prometheus_client import REGISTRY

from checkpoints.errors import CheckpointConfigError, InvalidCheckpointInput
from checkpoints.store.planning import utcnow
from retention.batches import candidate_batches
from retention.errors import LiveFilterFailed, SweepAlreadyRunning
from retention.locks import sweep_lock
from retention.models import Park, SparedThread, SweepRun
from retention.policy import declare_retention
from retention.result import WRITTEN_SINCE
from retention.runs import mark_finished
from retention.sweep import register_live_thread_filter, sweep_checkpoints, sweep_threads
from tests.retention_fixtures import (
    FINISHED,
    WAITING,
    batch_size,
    finished_past_due,
    holds,
    write,
)
from tests.store_helpers import backing_saver, on_every_provider_and_the_cluster

ORM = ("sqlite", "postgres")
NOT_ORM = ("memory", "redis")


def spared_count(horizon: str, owner: str) -> float:
    value = REGISTRY.get_sample_value(
        "checkpoint_sweep_spared_total", {"horizon": horizon, "owner": owner}
    )
    return value or 0.0


# -- the finished horizon ---------------------------------------------------------------
@on_every_provider_and_the_cluster
def test_finished_threads_past_due_are_deleted_on_every_provider(store):
    now = utcnow()
    finished_past_due(store, "done", now)
    write(store, "not-yet")
    mark_finished(backing_saver(store), "not-yet", now=now)
    write(store, "open")

    result = sweep_checkpoints(saver=backing_saver(store), now=now)

    assert not holds(store, "done") and backing_saver(store).finished_mark("done") is None
    assert holds(store, "not-yet") and backing_saver(store).finished_mark("not-yet") is not None
    assert holds(store, "open")
    assert (result.swept_count, result.finished_swept, result.waiting_swept) == (1, 1, 0)
    assert result.provider == store.provider
    assert (result.waiting_minutes, result.finished_minutes) == (WAITING, FINISHED)
    assert result.spared == []


@on_every_provider_and_the_cluster
def test_a_mark_on_an_empty_thread_is_cleared(store):
    now = utcnow()
    mark_finished(backing_saver(store), "never-wrote", now=now - timedelta(days=2))
    result = sweep_checkpoints(saver=backing_saver(store), now=now)
    assert result.finished_swept == 1
    assert backing_saver(store).finished_mark("never-wrote") is None


# -- the waiting horizon ----------------------------------------------------------------
@pytest.mark.parametrize("provider", ORM)
def test_idle_threads_past_their_waiting_horizon_are_deleted_on_orm(store):
    write(store, "platform")
    write(store, "short")
    declare_retention(backing_saver(store), "short", waiting_minutes=30)
    now = utcnow()

    early = sweep_checkpoints(saver=backing_saver(store), now=now + timedelta(minutes=31))
    assert not holds(store, "short") and holds(store, "platform")
    assert (early.waiting_swept, early.finished_swept, early.skipped) == (1, 0, None)

    late = sweep_checkpoints(saver=backing_saver(store), now=now + timedelta(minutes=WAITING + 1))
    assert not holds(store, "platform")
    assert late.waiting_swept == 1


@pytest.mark.parametrize("provider", NOT_ORM)
def test_the_waiting_horizon_is_skipped_with_a_reason_on_redis_and_memory(store):
    write(store, "idle")
    result = sweep_checkpoints(
        saver=backing_saver(store), now=utcnow() + timedelta(minutes=WAITING * 2)
    )
    assert holds(store, "idle")
    assert result.waiting_swept == 0
    assert result.skipped.startswith(f"{store.provider}:")
    reason = "TTL" if store.provider == "redis" else "live with the process"
    assert reason in result.skipped


# -- live-thread filters ----------------------------------------------------------------
def _interrupting_graph(saver):
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph
    from langgraph.types import interrupt

    class State(TypedDict, total=False):
        answer: str

    def ask(state: State) -> State:
        return {"answer": interrupt("approve?")}

    builder = StateGraph(State)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", END)
    return builder.compile(checkpointer=saver)


@on_every_provider_and_the_cluster
def test_a_pending_interrupt_spares_the_thread_until_it_resumes(store, caplog):
    from langgraph.types import Command

    graph = _interrupting_graph(store)
    config = {"configurable": {"thread_id": "paused"}}
    graph.invoke({}, config)
    assert graph.get_state(config).next == ("ask",)
    now = utcnow()
    mark_finished(backing_saver(store), "paused", now=now - timedelta(days=2))
    before = spared_count("finished", "interrupts")

    result = sweep_checkpoints(saver=backing_saver(store), now=now)

    assert [(s["thread_id"], s["horizon"], s["owner"]) for s in result.spared] == [
        ("paused", "finished", "interrupts")
    ]
    # Why, in words: the question it waits on, and since when.
    assert re.fullmatch(
        r"waiting on a human: “approve\?”, asked \d+\W+minutes? ago \(.+ UTC\)",
        result.spared[0]["reason"],
    ), result.spared[0]["reason"]
    assert result.swept_count == 0
    assert holds(store, "paused") and backing_saver(store).finished_mark("paused") is not None
    assert spared_count("finished", "interrupts") == before + 1
    warned = [r for r in caplog.records if r.levelname == "WARNING" and "'paused'" in r.message]
    assert warned and "'interrupts'" in warned[0].message

    graph.invoke(Command(resume="yes"), config)
    assert graph.get_state(config).values == {"answer": "yes"}
    # The resumed run wrote since the mark (the run rule spares it) until it is marked again.
    resumed = sweep_checkpoints(saver=backing_saver(store), now=now)
    assert [(s["thread_id"], s["owner"]) for s in resumed.spared] == [("paused", WRITTEN_SINCE)]
    mark_finished(backing_saver(store), "paused", now=now - timedelta(days=2))
    after = sweep_checkpoints(saver=backing_saver(store), now=now)
    assert after.finished_swept == 1 and not holds(store, "paused")


@on_every_provider_and_the_cluster
def test_an_unexpired_park_spares_the_thread(store):
    now = utcnow()
    finished_past_due(store, "parked", now)
    Park.objects.create(
        thread_id="parked",
        deadline=now + timedelta(minutes=5),
        created_at=now,
        provider=store.provider,
    )

    result = sweep_checkpoints(saver=backing_saver(store), now=now)
    assert [(s["thread_id"], s["horizon"], s["owner"]) for s in result.spared] == [
        ("parked", "finished", "parks")
    ]
    assert result.spared[0]["reason"].startswith("parked until ")
    assert holds(store, "parked")

    expired = sweep_checkpoints(saver=backing_saver(store), now=now + timedelta(minutes=6))
    assert expired.finished_swept == 1 and not holds(store, "parked")


@pytest.mark.parametrize("provider", ORM)
def test_a_park_spares_an_idle_thread_on_orm(store):
    write(store, "waiting-on-ask")
    now = utcnow() + timedelta(minutes=WAITING + 1)
    Park.objects.create(
        thread_id="waiting-on-ask", deadline=now + timedelta(minutes=1), created_at=now
    )
    before = spared_count("waiting", "parks")
    result = sweep_checkpoints(saver=backing_saver(store), now=now)
    assert [(s["thread_id"], s["horizon"], s["owner"]) for s in result.spared] == [
        ("waiting-on-ask", "waiting", "parks")
    ]
    assert holds(store, "waiting-on-ask")
    assert spared_count("waiting", "parks") == before + 1


@on_every_provider_and_the_cluster
def test_a_filter_registered_in_code_is_asked_and_named(store):
    now = utcnow()
    finished_past_due(store, "keep", now)
    finished_past_due(store, "drop", now)
    asked = []

    def claim_keep(thread_ids):
        asked.append(sorted(thread_ids))
        return {"keep", "not-in-the-batch"}

    register_live_thread_filter("billing", claim_keep)
    result = sweep_checkpoints(saver=backing_saver(store), now=now)
    assert asked == [["drop", "keep"]]
    assert result.spared == [
        {
            "thread_id": "keep",
            "horizon": "finished",
            "owner": "billing",
            "reason": "live-thread filter 'billing' claims it",
        }
    ]
    assert holds(store, "keep") and not holds(store, "drop")


@pytest.mark.parametrize("provider", ["memory"])
def test_filters_are_checked_when_registered_and_when_configured(store):
    with pytest.raises(InvalidCheckpointInput, match="owner"):
        register_live_thread_filter("", lambda ids: set())
    with pytest.raises(InvalidCheckpointInput, match="callable"):
        register_live_thread_filter("x", "not a function")
    broken = {**settings.CHECKPOINTS, "LIVE_THREAD_FILTERS": {"ghost": "nowhere.at_all"}}
    write(store, "kept")
    mark_finished(backing_saver(store), "kept", now=utcnow() - timedelta(days=2))
    with override_settings(CHECKPOINTS=broken):
        with pytest.raises(CheckpointConfigError, match="'ghost'.*nowhere.at_all"):
            sweep_checkpoints(saver=backing_saver(store))
    assert holds(store, "kept")


def test_a_filter_answering_nonsense_fails_the_sweep(store):
    now = utcnow()
    finished_past_due(store, "a", now)
    register_live_thread_filter("sloppy", lambda ids: None)
    with pytest.raises(LiveFilterFailed, match="sloppy"):
        sweep_checkpoints(saver=backing_saver(store), now=now)
    assert holds(store, "a")


def test_a_failing_filter_fails_the_sweep_and_deletes_nothing(store):
    now = utcnow()
    finished_past_due(store, "a", now)
    finished_past_due(store, "b", now)

    def broken(thread_ids):
        raise ConnectionError("park index unreachable")

    register_live_thread_filter("agents", broken)
    with pytest.raises(LiveFilterFailed) as caught:
        sweep_checkpoints(saver=backing_saver(store), now=now)
    assert "'agents'" in str(caught.value) and "park index unreachable" in str(caught.value)
    assert caught.value.owner == "agents"
    assert holds(store, "a") and holds(store, "b")
    run = SweepRun.objects.get()
    assert "LiveFilterFailed" in run.error and run.swept_count == 0


def test_a_filter_failing_on_a_later_batch_stops_from_that_batch_on(store):
    now = utcnow()
    for name in ("t1", "t2", "t3", "t4", "t5"):
        finished_past_due(store, name, now)
    calls = []

    def fails_second_time(thread_ids):
        calls.append(list(thread_ids))
        if len(calls) == 2:
            raise RuntimeError("second batch")
        return set()

    register_live_thread_filter("flaky", fails_second_time)
    with batch_size(2), pytest.raises(LiveFilterFailed, match="flaky"):
        sweep_checkpoints(saver=backing_saver(store), now=now)
    deleted = {t for t in ("t1", "t2", "t3", "t4", "t5") if not holds(store, t)}
    assert deleted == set(calls[0]) and len(deleted) == 2
    assert SweepRun.objects.get().finished_swept == 2


# -- batches ----------------------------------------------------------------------------
@on_every_provider_and_the_cluster
def test_batches_reach_every_thread_and_spared_ones_are_not_asked_twice(store):
    now = utcnow()
    names = [f"t{i}" for i in range(7)]
    for name in names:
        finished_past_due(store, name, now)
    sizes = []

    def claim_three(thread_ids):
        sizes.append(len(thread_ids))
        return {"t0", "t3", "t6"}

    register_live_thread_filter("keeper", claim_three)
    with batch_size(2):
        result = sweep_checkpoints(saver=backing_saver(store), now=now)
    assert max(sizes) <= 2 and sum(sizes) == 7
    assert sorted(s["thread_id"] for s in result.spared) == ["t0", "t3", "t6"]
    assert result.finished_swept == 4
    assert [n for n in names if holds(store, n)] == ["t0", "t3", "t6"]


def test_candidate_batches_and_a_fanned_out_batch_recheck_horizons(store):
    now = utcnow()
    finished_past_due(store, "due", now)
    write(store, "fresh")
    mark_finished(backing_saver(store), "fresh", now=now)
    with batch_size(1):
        batches = candidate_batches(backing_saver(store), now=now, max_batches=5)
    assert batches == [["due"]]
    result = sweep_threads(["due", "fresh", "unknown"], saver=backing_saver(store), now=now)
    assert result.finished_swept == 1 and result.swept_count == 1
    assert not holds(store, "due") and holds(store, "fresh")
    again = sweep_threads(["due"], saver=backing_saver(store), now=now)
    assert again.swept_count == 0


# -- dry run and history ----------------------------------------------------------------
@on_every_provider_and_the_cluster
def test_a_dry_run_reports_the_same_and_deletes_nothing(store):
    now = utcnow()
    finished_past_due(store, "done", now)
    finished_past_due(store, "kept", now)
    register_live_thread_filter("keeper", lambda ids: {"kept"})

    dry = sweep_checkpoints(dry_run=True, saver=backing_saver(store), now=now)
    assert (
        dry.dry_run
        and holds(store, "done")
        and backing_saver(store).finished_mark("done") is not None
    )
    assert not SweepRun.objects.exists()

    real = sweep_checkpoints(saver=backing_saver(store), now=now)
    assert not holds(store, "done")
    for key in ("swept_count", "finished_swept", "waiting_swept", "spared", "skipped"):
        assert getattr(dry, key) == getattr(real, key)


@on_every_provider_and_the_cluster
def test_each_sweep_is_recorded_with_its_spared_threads(store):
    now = utcnow()
    finished_past_due(store, "done", now)
    finished_past_due(store, "kept", now)
    register_live_thread_filter("keeper", lambda ids: {"kept"})

    result = sweep_checkpoints(saver=backing_saver(store), now=now, triggered_by="tests")

    run = SweepRun.objects.get(pk=result.sweep_run_id)
    assert (run.provider, run.swept_count, run.finished_swept, run.triggered_by) == (
        store.provider,
        1,
        1,
        "tests",
    )
    assert run.finished_at >= run.started_at and run.error == "" and not run.dry_run
    assert run.skipped == result.skipped
    assert list(SparedThread.objects.values_list("thread_id", "horizon", "owner")) == [
        ("kept", "finished", "keeper")
    ]
    assert result.as_dict()["spared"] == [
        {
            "thread_id": "kept",
            "horizon": "finished",
            "owner": "keeper",
            "reason": "live-thread filter 'keeper' claims it",
        }
    ]


# -- one sweep at a time ----------------------------------------------------------------
@on_every_provider_and_the_cluster
def test_a_second_concurrent_sweep_is_refused_and_deletes_nothing(store):
    now = utcnow()
    finished_past_due(store, "done", now)
    held, release, failures = threading.Event(), threading.Event(), []

    def hold_the_lock():
        try:
            with sweep_lock(backing_saver(store)):
                held.set()
                release.wait(30)
        except Exception as exc:  # noqa: BLE001 - surfaced by the assert below
            failures.append(exc)
            held.set()
        finally:
            connections.close_all()

    other = threading.Thread(target=hold_the_lock)
    other.start()
    try:
        assert held.wait(30) and not failures
        with pytest.raises(SweepAlreadyRunning, match=store.provider):
            sweep_checkpoints(saver=backing_saver(store), now=now)
        assert holds(store, "done")
    finally:
        release.set()
        other.join(30)
    assert sweep_checkpoints(saver=backing_saver(store), now=now).finished_swept == 1


@pytest.mark.parametrize("provider", ORM)
def test_a_lease_held_from_another_host_refuses_the_sweep(store):
    from checkpoints.models import StoreLease

    until = utcnow() + timedelta(minutes=5)
    StoreLease.objects.using(backing_saver(store).db_alias).create(
        name="checkpoint-sweep", owner="elsewhere:4242:abc", acquired_at=utcnow(), expires_at=until
    )
    with pytest.raises(SweepAlreadyRunning, match="held by elsewhere:4242:abc"):
        sweep_checkpoints(saver=backing_saver(store))
    assert (
        StoreLease.objects.using(backing_saver(store).db_alias).get().owner == "elsewhere:4242:abc"
    )


# A writer racing the sweep's delete: tests/retention/test_sweep_written_during.py (a thread
# written after the sweep judged it is kept, not deleted again).
