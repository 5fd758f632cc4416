"""A sweep run says which threads it deleted (one stored row each) and why it spared the
rest; a dry run lists exactly the ids the run then deletes; an operator's hold spares a
thread like a live-thread filter, on every provider the sweep covers."""

from __future__ import annotations

from datetime import timedelta

import pytest

from checkpoints.models import AuditEvent, Thread
from checkpoints.store.planning import utcnow
from retention.errors import HoldRefused
from retention.holds import HOLD_OWNER, hold_thread, release_hold
from retention.models import DeletedThread, Hold, SparedThread, SweepRun
from retention.result import FINISHED, WAITING
from retention.sweep import sweep_checkpoints
from tests.retention_fixtures import WAITING as WAITING_MINUTES
from tests.retention_fixtures import batch_size, finished_past_due, holds, write
from tests.store_helpers import backing_saver, on_every_provider_and_the_cluster

ORM = ("sqlite", "postgres")


def stored_ids(run_id: int) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {FINISHED: [], WAITING: []}
    for thread_id, horizon in (
        DeletedThread.objects.filter(sweep_run_id=run_id)
        .order_by("id")
        .values_list("thread_id", "horizon")
    ):
        found[horizon].append(thread_id)
    return found


def seed(store, now) -> None:
    """Seven finished threads past due, one of them held; on the ORM stores also four idle
    threads past the waiting horizon, one of them held."""
    for i in range(7):
        finished_past_due(store, f"done-{i}", now)
    hold_thread(backing_saver(store), "done-3", reason="refund dispute", by="ops", now=now)
    if backing_saver(store).supports_idle_sweep:
        for i in range(4):
            write(store, f"idle-{i}")
        Thread.objects.using(backing_saver(store).db_alias).filter(
            thread_id__startswith="idle-"
        ).update(last_write_at=now - timedelta(minutes=WAITING_MINUTES + 5))
        hold_thread(backing_saver(store), "idle-2", reason="legal asked", by="ops", now=now)


@on_every_provider_and_the_cluster
def test_the_dry_run_lists_exactly_the_ids_the_run_then_deletes_and_stores(store):
    now = utcnow()
    seed(store, now)
    with batch_size(2):
        dry = sweep_checkpoints(dry_run=True, saver=backing_saver(store), now=now)
        done = sweep_checkpoints(saver=backing_saver(store), now=now)
    listed = [t for ids in dry.deleted_ids.values() for t in ids]
    assert len(listed) == dry.swept_count == len(set(listed))
    assert stored_ids(done.sweep_run_id) == dry.deleted_ids == done.deleted_ids
    expected_finished = {f"done-{i}" for i in range(7)} - {"done-3"}
    assert set(dry.deleted_ids[FINISHED]) == expected_finished
    if backing_saver(store).supports_idle_sweep:
        assert set(dry.deleted_ids[WAITING]) == {"idle-0", "idle-1", "idle-3"}
    run = SweepRun.objects.get(pk=done.sweep_run_id)
    assert run.swept_count == DeletedThread.objects.filter(sweep_run=run).count()
    for thread_id in listed:
        assert not holds(store, thread_id)
    # The audit event counts the stored ids, and the spared and held threads.
    event = AuditEvent.objects.get(action="sweep")
    assert event.detail["deleted_ids_recorded"] == done.swept_count == run.swept_count
    held = 2 if backing_saver(store).supports_idle_sweep else 1
    assert event.detail["held_count"] == held == event.detail["spared_count"]


@on_every_provider_and_the_cluster
def test_a_hold_spares_the_thread_with_who_why_and_until(store):
    now = utcnow()
    finished_past_due(store, "kept", now)
    until = now + timedelta(days=2)
    hold_thread(
        backing_saver(store),
        "kept",
        reason="customer complaint #42",
        by="ops",
        until=until,
        now=now,
    )
    result = sweep_checkpoints(saver=backing_saver(store), now=now)
    assert result.swept_count == 0 and holds(store, "kept")
    (spared,) = result.spared
    assert (spared["thread_id"], spared["owner"]) == ("kept", HOLD_OWNER)
    assert spared["reason"] == (
        f"held by ops: customer complaint #42 until {until:%Y-%m-%d %H:%M:%S %Z}"
    )
    row = SparedThread.objects.get(sweep_run_id=result.sweep_run_id)
    assert row.reason == spared["reason"] and row.owner == HOLD_OWNER
    # Kept marked, as any spared finished thread is, so the next sweep asks again.
    assert backing_saver(store).finished_mark("kept") is not None
    # Past its end time the hold no longer claims: the next sweep deletes the thread.
    later = sweep_checkpoints(saver=backing_saver(store), now=until + timedelta(minutes=1))
    assert later.deleted_ids[FINISHED] == ["kept"] and not holds(store, "kept")


@pytest.mark.parametrize("provider", ["memory", "redis", "sqlite", "postgres"])
def test_a_released_hold_lets_the_next_sweep_delete(store):
    now = utcnow()
    finished_past_due(store, "kept", now)
    hold_thread(backing_saver(store), "kept", reason="look at the tool calls", by="ops", now=now)
    assert sweep_checkpoints(saver=backing_saver(store), now=now).swept_count == 0
    assert release_hold(backing_saver(store), "kept", by="ops") is True
    assert release_hold(backing_saver(store), "kept", by="ops") is False
    assert sweep_checkpoints(saver=backing_saver(store), now=now).deleted_ids[FINISHED] == ["kept"]
    actions = list(AuditEvent.objects.order_by("id").values_list("action", flat=True))
    assert actions.count("hold") == 1 and actions.count("release_hold") == 1
    hold = Hold.objects.get()
    assert (hold.released_by, hold.provider) == ("ops", store.provider)


@pytest.mark.parametrize("provider", ["sqlite"])
def test_a_hold_on_one_store_does_not_keep_the_same_id_on_another(store):
    now = utcnow()
    finished_past_due(store, "same-id", now)
    Hold.objects.create(
        thread_id="same-id", provider="redis", reason="elsewhere", created_at=now, created_by="x"
    )
    assert sweep_checkpoints(saver=backing_saver(store), now=now).deleted_ids[FINISHED] == [
        "same-id"
    ]


@pytest.mark.parametrize("provider", ["sqlite"])
def test_holding_again_replaces_the_hold_and_both_are_audited(store):
    now = utcnow()
    write(store, "t")
    first = hold_thread(backing_saver(store), "t", reason="first look", by="ops", now=now)
    second = hold_thread(backing_saver(store), "t", reason="second look", by="lead", now=now)
    first.refresh_from_db()
    assert first.released_at is not None and first.released_by == "lead"
    assert second.released_at is None
    events = AuditEvent.objects.filter(action="hold").order_by("id")
    assert [e.detail["reason"] for e in events] == ["first look", "second look"]
    assert events.last().detail["replaced"] is True


@pytest.mark.parametrize("provider", ["sqlite"])
@pytest.mark.parametrize(
    ("reason", "until", "field", "words"),
    [
        ("", None, "reason", "needs a reason"),
        ("   ", None, "reason", "needs a reason"),
        ("x" * 2001, None, "reason", "at most 2000"),
        ("ok", "naive", "until", "timezone-aware"),
        ("ok", "past", "until", "is not after now"),
    ],
)
def test_a_hold_without_a_reason_or_with_a_bad_end_is_refused(store, reason, until, field, words):
    now = utcnow()
    if until == "naive":
        until = now.replace(tzinfo=None) + timedelta(hours=1)
    elif until == "past":
        until = now - timedelta(minutes=1)
    with pytest.raises(HoldRefused, match=words) as refused:
        hold_thread(backing_saver(store), "t", reason=reason, by="ops", until=until, now=now)
    assert refused.value.field == field and "'t'" in refused.value.message
    assert not Hold.objects.exists() and not AuditEvent.objects.filter(action="hold").exists()


@pytest.mark.parametrize("provider", ORM)
def test_spared_rows_say_why_in_words(store):
    from tests.admin_fixtures import run_paused

    now = utcnow()
    run_paused(store, "asks")
    Thread.objects.using(backing_saver(store).db_alias).filter(thread_id="asks").update(
        last_write_at=now - timedelta(minutes=WAITING_MINUTES + 5)
    )
    finished_past_due(store, "again", now)
    write(store, "again")
    result = sweep_checkpoints(saver=backing_saver(store), now=now)
    why = {s["thread_id"]: s["reason"] for s in result.spared}
    assert why["asks"].startswith("waiting on a human: “approve the answer?”, asked ")
    assert "ago (" in why["asks"]
    assert why["again"].startswith("written ") and "after its finished mark at" in why["again"]
    rows = dict(
        SparedThread.objects.filter(sweep_run_id=result.sweep_run_id).values_list(
            "thread_id", "reason"
        )
    )
    assert rows == why
