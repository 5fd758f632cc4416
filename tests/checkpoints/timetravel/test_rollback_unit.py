"""A rollback's version bump and its put are one unit of work, on every provider: a put the
store refuses leaves the thread's version (its ETag) where it was, and a stale version
writes nothing."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.test import override_settings

from checkpoints.errors import ThreadVersionConflict, ValueTooLarge
from tests.checkpoints.timetravel.graphs import ids, seeded
from tests.store_helpers import config_for


def test_a_refused_put_leaves_the_version_and_the_head(store):
    _, tt = seeded(store)
    target = ids(tt, "t")[-1]
    head = store.get_tuple(config_for("t", ns=""))
    version = store.thread_version("t")
    # Limits lowered since the thread was written: the copy of the target is refused.
    tight = {**settings.CHECKPOINTS, "MAX_CHECKPOINT_BYTES": 1}
    with override_settings(CHECKPOINTS=tight), pytest.raises(ValueTooLarge):
        tt.rollback("t", target, expected_version=version)
    assert store.thread_version("t") == version
    assert store.get_tuple(config_for("t", ns="")).config == head.config
    # The same rollback within the limits bumps the version once and writes the new head.
    rolled = tt.rollback("t", target, expected_version=version)
    assert store.thread_version("t") == version + 1
    assert (
        store.get_tuple(config_for("t", ns="")).config["configurable"]["checkpoint_id"]
        == (rolled.config["configurable"]["checkpoint_id"])
    )


@pytest.mark.asyncio
async def test_a_stale_version_writes_nothing_sync_or_async(store):
    _, tt = await sync_to_async(seeded)(store)
    history = await sync_to_async(ids)(tt, "t")
    version = await sync_to_async(store.thread_version)("t")
    with pytest.raises(ThreadVersionConflict):
        await tt.arollback("t", history[-1], expected_version=version + 1)
    with pytest.raises(ThreadVersionConflict):
        await sync_to_async(tt.rollback)("t", history[-1], expected_version=version + 1)
    assert await sync_to_async(ids)(tt, "t") == history
    assert await sync_to_async(store.thread_version)("t") == version
