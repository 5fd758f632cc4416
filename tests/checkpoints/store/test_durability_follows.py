"""Durability stamps follow the server's configuration (issue 17).

Each PostgreSQL write stamps the level its own session committed with; the store's
advertised level is read again after ``DURABILITY_RECHECK_SECONDS`` and after a
reconnect. Only this run's private test database is changed (never ALTER SYSTEM).
"""

from __future__ import annotations

import pytest
from django.db import connections
from langgraph.checkpoint.base import empty_checkpoint

from checkpoints.store.postgres.pool import close_pools
from checkpoints.store.registry import get_saver

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True, databases=["default", "pg"]),
]


def level_of_new_write(saver, thread_id: str) -> str:
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    saved = saver.put(config, empty_checkpoint(), {}, {})
    return saver.get_durability(saved)["level"]


def _saver(settings, **overrides):
    from checkpoints.store.orm.ledger import forget_format_checks

    forget_format_checks()
    settings.CHECKPOINTS = {**settings.CHECKPOINTS, **overrides}
    return get_saver("postgres", using="pg")


def test_a_session_that_stops_syncing_commits_stamps_memory_at_once(settings):
    # Unpooled: the saver writes on this thread's own connection, whose session we change.
    saver = _saver(settings, PG_POOL=False, DURABILITY_RECHECK_SECONDS=3600)
    assert level_of_new_write(saver, "before") == "disk"
    assert saver.durability == "disk"
    with connections["pg"].cursor() as cur:
        cur.execute("SET synchronous_commit = off")
    try:
        # The write says what held for it, though the advertised level is still cached...
        assert level_of_new_write(saver, "unsynced") == "memory"
        assert saver.durability == "disk"
        # ...until the bounded interval has passed.
        settings.CHECKPOINTS = {**settings.CHECKPOINTS, "DURABILITY_RECHECK_SECONDS": 0}
        assert saver.durability == "memory"
    finally:
        with connections["pg"].cursor() as cur:
            cur.execute("RESET synchronous_commit")
    assert level_of_new_write(saver, "after") == "disk" and saver.durability == "disk"
    assert saver.get_durability({"configurable": {"thread_id": "before"}})["level"] == "disk"


def test_a_database_setting_is_followed_after_reconnect(settings):
    """ALTER DATABASE on this run's private test database: new sessions commit unsynced."""
    saver = _saver(settings, DURABILITY_RECHECK_SECONDS=3600)
    assert level_of_new_write(saver, "before") == "disk" and saver.durability == "disk"
    name = connections["pg"].settings_dict["NAME"]
    with connections["pg"].cursor() as cur:
        cur.execute(f'ALTER DATABASE "{name}" SET synchronous_commit = off')
    try:
        # Reconnect: the pooled connections and this thread's own one are new sessions.
        close_pools()
        connections["pg"].close()
        assert level_of_new_write(saver, "unsynced") == "memory"
        assert saver.durability == "memory"
    finally:
        with connections["pg"].cursor() as cur:
            cur.execute(f'ALTER DATABASE "{name}" RESET synchronous_commit')
        close_pools()
        connections["pg"].close()
    assert level_of_new_write(saver, "after") == "disk" and saver.durability == "disk"
