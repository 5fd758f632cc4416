"""A rollback's version bump and its put are one unit of work, on every provider: a put the
store refuses leaves the thread's version (its ETag) where it was, and a stale version
writes nothing."""

from __future__ import annotations

import pytest
import redis
from asgiref.sync import sync_to_async
from django.conf import settings
from django.test import override_settings
from langgraph.checkpoint.base import empty_checkpoint

from checkpoints.errors import ThreadVersionConflict, ValueTooLarge
from checkpoints.store.redis import scripts
from checkpoints.store.registry import get_saver
from tests.checkpoints.timetravel.graphs import ids, seeded
from tests.store_helpers import IN_PROCESS, config_for, put_chain


# The unit of work under test is the in-process saver's own (put_as_head with its version
# bump, made to fail from inside): a remote worker holds neither.
@pytest.fixture(params=IN_PROCESS)
def provider(request):
    return request.param


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


def _monitored(url, action):
    """Run ``action`` while MONITOR records every command the server runs; return them."""
    import threading

    client = redis.Redis.from_url(url)
    seen: list[str] = []
    ready = threading.Event()

    def listen():
        with client.monitor() as monitor:
            ready.set()
            for entry in monitor.listen():
                if entry["command"] == "ECHO monitored-end":
                    return
                seen.append(entry["command"])

    listener = threading.Thread(target=listen)
    listener.start()
    ready.wait(5)
    client.ping()  # the MONITOR stream is open once a command of ours shows in it
    try:
        action()
    finally:
        redis.Redis.from_url(url).echo("monitored-end")
        listener.join(10)
    return seen


@pytest.mark.django_db
def test_a_redis_rollback_is_one_script(redis_url):
    """The version check, the put and the bump reach Redis as ONE script, so no other
    client's write lands between them (before, a put and then a separate bump)."""
    store = get_saver("redis", conn_string=redis_url)
    _, tt = seeded(store)
    target = ids(tt, "t")[-1]
    version = store.thread_version("t")
    # Loaded beforehand: a server without it answers NOSCRIPT, and the saver sends it again.
    redis.Redis.from_url(redis_url).script_load(scripts.PUT_HEAD.source)
    commands = _monitored(redis_url, lambda: tt.rollback("t", target, expected_version=version))
    evals = [c.split()[1] for c in commands if c.startswith("EVALSHA ")]
    assert evals.count(scripts.PUT_HEAD.sha) == 1
    assert scripts.PUT.sha not in evals and scripts.BUMP.sha not in evals
    assert store.thread_version("t") == version + 1


@pytest.mark.django_db
def test_a_stale_redis_rollback_script_writes_nothing(redis_url):
    """A version bumped by another client just before the rollback's script: the script
    refuses before writing, so neither the bump nor the put is visible."""
    store = get_saver("redis", conn_string=redis_url)
    _, tt = seeded(store)
    target = ids(tt, "t")[-1]
    version = store.thread_version("t")
    other = get_saver("redis", conn_string=redis_url)
    other.bump_thread_version("t", expected=version)  # the racing writer
    raw = redis.Redis.from_url(redis_url)
    before = {key: raw.dump(key) for key in raw.scan_iter(match="cp:*")}
    with pytest.raises(ThreadVersionConflict, match=f"at version {version + 1}, not {version}"):
        tt.rollback("t", target, expected_version=version)
    after = {key: raw.dump(key) for key in raw.scan_iter(match="cp:*")}
    assert after == before
    assert store.thread_version("t") == version + 1


@pytest.mark.asyncio
async def test_put_as_head_refuses_a_stale_version_on_every_store(store):
    """The store request itself (`StoreHead`), sync and async: a stale version raises and
    leaves the head and the version; the expected one writes the head and bumps once."""
    put_chain(store, "h", {"n": 1}, steps=2)
    head = await sync_to_async(store.get_tuple)(config_for("h", ns=""))
    version = await sync_to_async(store.thread_version)("h")
    checkpoint = {**head.checkpoint, "id": empty_checkpoint()["id"]}  # newer than the head
    args = (config_for("h", ns=""), checkpoint, {"step": 9}, {})
    with pytest.raises(ThreadVersionConflict):
        await store.aput_as_head(*args, expected_version=version + 1)
    with pytest.raises(ThreadVersionConflict):
        await sync_to_async(store.put_as_head)(*args, expected_version=version - 1)
    assert (await sync_to_async(store.get_tuple)(config_for("h", ns=""))).config == head.config
    assert await sync_to_async(store.thread_version)("h") == version
    stored = await store.aput_as_head(*args, expected_version=version)
    assert stored["configurable"]["checkpoint_id"] == checkpoint["id"]
    assert await sync_to_async(store.thread_version)("h") == version + 1
    newest = await sync_to_async(store.get_tuple)(config_for("h", ns=""))
    assert newest.config["configurable"]["checkpoint_id"] == checkpoint["id"]
