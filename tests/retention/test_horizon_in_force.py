"""The horizon in force has one home, `ThreadRetention.in_force`: retention's policy, the
Redis keys' TTL and the ORM's idle listing (its SQL form and its Python form) all follow it."""

from __future__ import annotations

from datetime import timedelta

import pytest
import redis

from checkpoints.models import Thread
from checkpoints.store.planning import utcnow
from checkpoints.store.planning.retention import ThreadRetention
from checkpoints.store.redis.keys import thread_prefix
from checkpoints.store.registry import get_saver
from retention.policy import declare_retention, effective_retention, platform_retention
from tests.retention_fixtures import FINISHED, WAITING, write
from tests.store_helpers import backing_saver


@pytest.mark.parametrize(
    ("declared", "expected"),
    [
        (ThreadRetention(), (WAITING, FINISHED)),
        (ThreadRetention(600, 60), (600, 60)),
        # An unset finished is the platform's, capped at the waiting in force.
        (ThreadRetention(30), (30, 30)),
        (ThreadRetention(5000), (5000, FINISHED)),
        (ThreadRetention(None, 15), (WAITING, 15)),
    ],
)
def test_declared_values_are_in_force_over_the_platforms(declared, expected):
    in_force = declared.in_force()
    assert (in_force.waiting_minutes, in_force.finished_minutes) == expected
    assert declared.waiting_in_force(WAITING) == expected[0]


def test_the_platforms_values_may_be_given():
    platform = ThreadRetention(90, 45)
    assert ThreadRetention().in_force(platform) == ThreadRetention(90, 45)
    assert ThreadRetention(20).in_force(platform) == ThreadRetention(20, 20)
    assert ThreadRetention(None, 5).in_force(platform) == ThreadRetention(90, 5)


def test_the_platforms_values_are_the_settings(settings):
    settings.CHECKPOINTS = {
        **settings.CHECKPOINTS,
        "RETENTION_WAITING_MINUTES": 90,
        "RETENTION_FINISHED_MINUTES": 45,
    }
    assert ThreadRetention.platform() == ThreadRetention(90, 45)
    assert platform_retention() == (90, 45)
    assert ThreadRetention(None, 60).in_force() == ThreadRetention(90, 60)


def test_retention_asks_the_rule_of_the_threads_declaration(store):
    declare_retention(backing_saver(store), "short", waiting_minutes=30)
    declared = backing_saver(store).thread_retention("short")
    in_force = declared.in_force()
    assert effective_retention(backing_saver(store), "short") == (in_force.waiting_minutes, 30)


@pytest.mark.django_db
def test_redis_keys_live_the_waiting_horizon_in_force(settings, redis_url):
    settings.CHECKPOINTS = {**settings.CHECKPOINTS, "RETENTION_WAITING_MINUTES": 90}
    saver = get_saver("redis", conn_string=redis_url)
    write(saver, "platform")
    declare_retention(saver, "declared", waiting_minutes=30)
    write(saver, "declared")
    client = redis.Redis.from_url(redis_url)
    for thread_id, minutes in (("platform", 90), ("declared", 30)):
        keys = list(client.scan_iter(match=thread_prefix(thread_id) + "*"))
        assert keys, thread_id
        for key in keys:
            ttl = client.pttl(key)
            assert (minutes - 1) * 60000 < ttl <= minutes * 60000, (thread_id, key, ttl)


def test_the_orm_lists_idle_threads_by_the_same_rule_in_sql_and_in_python(saver):
    now = utcnow()
    ages = {"fresh": 10, "old": WAITING + 10, "declared-old": 70, "declared-fresh": 50}
    for thread_id, minutes in ages.items():
        write(saver, thread_id)
        Thread.objects.filter(thread_id=thread_id).update(
            last_write_at=now - timedelta(minutes=minutes)
        )
    for thread_id in ("declared-old", "declared-fresh"):
        declare_retention(saver, thread_id, waiting_minutes=60)
    expected = {
        thread_id
        for thread_id, minutes in ages.items()
        if minutes > saver.thread_retention(thread_id).waiting_in_force(WAITING)
    }
    assert expected == {"old", "declared-old"}
    assert set(saver.idle_writes(now, WAITING)) == expected
    assert set(saver.idle_among(list(ages), now, WAITING)) == expected
