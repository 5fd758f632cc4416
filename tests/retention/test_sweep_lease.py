"""The sweep's lease row on ORM stores: one sweep at a time across processes and hosts."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import timedelta

import pytest
from django.conf import settings

from checkpoints.models import StoreLease
from checkpoints.store.orm.lease import LeaseLost, Leases, new_owner
from checkpoints.store.planning import utcnow
from retention.locks import LOCK_NAME, sweep_lock
from retention.sweep import register_live_thread_filter, sweep_checkpoints
from tests.retention_fixtures import finished_past_due, holds
from tests.store_helpers import backing_saver
from tests.sweep_race import race_sweeps

ORM = ("sqlite", "postgres")


def leases(store) -> list[tuple[str, str]]:
    return list(
        StoreLease.objects.using(backing_saver(store).db_alias).values_list("name", "owner")
    )


@pytest.mark.parametrize("provider", ORM)
def test_the_lease_is_a_row_while_the_sweep_runs_and_gone_after(store):
    now = utcnow()
    finished_past_due(store, "done", now)
    seen = []
    register_live_thread_filter("peek", lambda ids: seen.append(leases(store)) or set())
    assert sweep_checkpoints(saver=backing_saver(store), now=now).finished_swept == 1
    [(name, owner)] = seen[0]
    assert name == LOCK_NAME and owner.split(":")[1] == str(os.getpid())
    assert leases(store) == []


@pytest.mark.parametrize("provider", ORM)
def test_a_stale_lease_is_taken_over(store):
    now = utcnow()
    finished_past_due(store, "done", now)
    StoreLease.objects.using(backing_saver(store).db_alias).create(
        name=LOCK_NAME,
        owner="crashed-host:99:dead",
        acquired_at=now - timedelta(minutes=10),
        expires_at=now - timedelta(seconds=1),
    )
    assert sweep_checkpoints(saver=backing_saver(store), now=now).finished_swept == 1
    assert leases(store) == []


@pytest.mark.parametrize("provider", ORM)
def test_a_lease_of_a_dead_process_on_this_host_is_taken_at_once(store):
    now = utcnow()
    finished_past_due(store, "done", now)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    StoreLease.objects.using(backing_saver(store).db_alias).create(
        name=LOCK_NAME,
        owner=f"{os.uname().nodename}:{dead.pid}:gone",
        acquired_at=now,
        expires_at=now + timedelta(minutes=10),
    )
    assert sweep_checkpoints(saver=backing_saver(store), now=now).finished_swept == 1
    assert leases(store) == []


@pytest.mark.parametrize("provider", ORM)
def test_only_the_owner_renews_or_releases_the_lease(store):
    lease = Leases(backing_saver(store).db_alias)
    first, second = new_owner(), new_owner()
    assert lease.take("job", first, 60) is None
    held = lease.take("job", second, 60)
    assert held is not None and held.owner == first
    # The first holder stalls past its expiry; the second takes over.
    StoreLease.objects.using(backing_saver(store).db_alias).filter(name="job").update(
        expires_at=utcnow() - timedelta(seconds=1)
    )
    assert lease.take("job", second, 60) is None
    assert lease.release("job", first) is False
    with pytest.raises(LeaseLost, match="ran out and was taken"):
        lease.renew("job", first, 60)
    assert leases(store) == [("job", second)]
    lease.renew("job", second, 60)
    assert lease.release("job", second) is True and leases(store) == []


@pytest.mark.parametrize("provider", ORM)
def test_the_keep_alive_renews_the_lease(store, settings):
    settings.CHECKPOINTS = {**settings.CHECKPOINTS, "SWEEP_LEASE_SECONDS": 30}
    with sweep_lock(backing_saver(store)) as keep_alive:
        row = StoreLease.objects.using(backing_saver(store).db_alias).get()
        time.sleep(0.05)
        keep_alive()
        renewed = StoreLease.objects.using(backing_saver(store).db_alias).get()
        assert renewed.expires_at > row.expires_at
        assert renewed.expires_at - renewed.acquired_at >= timedelta(seconds=30)
    assert leases(store) == []


@pytest.mark.parametrize("provider", ORM)
def test_a_sweep_that_lost_its_lease_stops_deleting(store):
    now = utcnow()
    for i in range(4):
        finished_past_due(store, f"t{i}", now)

    def taken_over(ids):
        StoreLease.objects.using(backing_saver(store).db_alias).update(
            owner="thief:1:x", expires_at=utcnow() + timedelta(minutes=5)
        )
        return set()

    register_live_thread_filter("thief", taken_over)
    settings_ = {**settings.CHECKPOINTS, "SWEEP_BATCH_SIZE": 2}
    from django.test import override_settings

    with override_settings(CHECKPOINTS=settings_), pytest.raises(LeaseLost):
        sweep_checkpoints(saver=backing_saver(store), now=now)
    assert sum(holds(store, f"t{i}") for i in range(4)) == 2
    assert leases(store) == [(LOCK_NAME, "thief:1:x")]


@pytest.mark.parametrize("provider", ORM)
def test_two_processes_sweeping_one_store_at_once_one_runs(store, tmp_path, settings):
    """Two real processes start a sweep at the same instant: exactly one runs."""
    settings.CHECKPOINTS = {**settings.CHECKPOINTS, "SWEEP_BATCH_SIZE": 2}
    now = utcnow()
    for i in range(8):
        finished_past_due(store, f"t{i}", now)
    outcomes = race_sweeps(tmp_path, store.provider, backing_saver(store).db_alias, processes=2)
    ran = [o["ran"] for o in outcomes if "ran" in o]
    refused = [o["refused"] for o in outcomes if "refused" in o]
    assert ran == [8] and len(refused) == 1, outcomes
    assert store.provider in refused[0] and "held by" in refused[0]
    assert not any(holds(store, f"t{i}") for i in range(8))
    assert leases(store) == []
