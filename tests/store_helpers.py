"""The store under test: a fresh saver per provider, thread configs, and writes made directly
through a saver (or under it, as a person with access to the database could)."""

from __future__ import annotations

import pytest
from django.conf import settings
from langgraph.checkpoint.base import empty_checkpoint

from tests.services import need_service

# Spawned writer processes import this module (through tests.reliability_fixtures) before
# they set Django up: what needs the apps is imported where it is used.

# The in-process savers: a test about a saver's own mechanics (its connections, its locks, its
# process-local state) runs on these; the remote saver holds none of them.
IN_PROCESS = ["memory", "sqlite", "postgres", "redis"]
# The providers the `store` fixture (tests/conftest.py) runs each test on: the in-process
# savers, and the remote saver on a live store service (marked, so a CI leg can pick it).
REMOTE = pytest.param("remote", marks=pytest.mark.remote)
PROVIDERS = [*IN_PROCESS, REMOTE]
# A test so marked runs on the private Redis Cluster too (the `redis_cluster` fixture).
on_every_provider_and_the_cluster = pytest.mark.parametrize(
    "provider", [*PROVIDERS, pytest.param("redis-cluster", marks=pytest.mark.redis)]
)


def make_saver(request, provider: str, **options):
    """A fresh, empty saver for ``provider`` (databases flushed by the transactional fixture)."""
    if provider == "memory":
        from checkpoints.store.memory import STORE, MemorySaver

        STORE.clear()
        request.addfinalizer(STORE.clear)
        return MemorySaver(**options)
    if provider == "sqlite":
        request.getfixturevalue("transactional_db")
        from checkpoints.store.orm.ledger import forget_format_checks
        from checkpoints.store.registry import get_saver

        # The flush between tests empties StoreFormat too: record it again.
        forget_format_checks()

        return get_saver("sqlite", using="default", **options)
    if provider == "postgres":
        need_service(settings.POSTGRES_UNAVAILABLE)
        request.getfixturevalue("transactional_db")
        from checkpoints.store.orm.ledger import forget_format_checks
        from checkpoints.store.registry import get_saver

        forget_format_checks()
        return get_saver("postgres", using="pg", **options)
    if provider == "redis":
        url = request.getfixturevalue("redis_url")
        from checkpoints.store.registry import get_saver

        return get_saver("redis", conn_string=url, **options)
    if provider in ("redis-cluster", "redis-sentinel"):
        # The Redis saver on a private cluster or behind private sentinels; parks and
        # retention rows need the database.
        request.getfixturevalue("transactional_db")
        url = request.getfixturevalue(provider.replace("-", "_") + "_url")
        from checkpoints.store.registry import get_saver

        return get_saver("redis", conn_string=url, **options)
    if provider == "remote":
        return remote_saver(request, **options)
    raise ValueError(provider)


def service_token(user) -> str:
    """A DRF token of ``user`` for the store service (made once per user)."""
    from rest_framework.authtoken.models import Token

    return Token.objects.get_or_create(user=user)[0].key


# Options of the service's store rather than of the client: on remote they become the
# service's settings (one store configuration per service, so per test).
SERVICE_SETTINGS = {"max_checkpoints": "MAX_CHECKPOINTS"}


def remote_saver(request, *, user=None, **options):
    """The remote saver on the service on a live port (its store: the test database's
    SQLite saver), as a superuser's token unless ``user`` is given.

    Options the client takes go to `RemoteSaver`; store options (``max_checkpoints``)
    configure the service's saver for this test.
    """
    request.getfixturevalue("transactional_db")
    service = {SERVICE_SETTINGS[k]: options.pop(k) for k in list(options) if k in SERVICE_SETTINGS}
    if service:
        overrides = request.getfixturevalue("settings")
        overrides.CHECKPOINTS = {**overrides.CHECKPOINTS, **service}
    live = request.getfixturevalue("live_server")
    from django.contrib.auth.models import User

    from checkpoints.remote import RemoteSaver
    from checkpoints.store.orm.ledger import forget_format_checks
    from checkpoints.store_service.views import forget_service_saver

    # The flush between tests empties StoreFormat: the service's saver records it again.
    forget_format_checks()
    forget_service_saver()
    if user is None:
        user = User.objects.filter(username="store-service-admin").first()
        user = user or User.objects.create_superuser("store-service-admin", "", "pw")
    saver = RemoteSaver(live.url, api_key=service_token(user), retry_seconds=5, **options)
    request.addfinalizer(saver.close)
    return saver


def backing_saver(saver):
    """The in-process saver whose store ``saver`` writes to: for a remote saver, the service's
    own (same process, same test database), with the deployment's serializer, so a test can
    set up or inspect the rows the service wrote; any other saver is its own."""
    from checkpoints.remote import RemoteSaver

    if not isinstance(saver, RemoteSaver):
        return saver
    import copy

    from checkpoints.store_service.views import service_saver

    service = service_saver()
    backing = copy.copy(service)
    backing.serde = service.serde.inner
    return backing


def config_for(
    thread_id: str, checkpoint_id: str | None = None, *, ns: str | None = None, **configurable
) -> dict:
    """The config of a thread (at ``checkpoint_id`` when given), plus ``configurable``.

    Without ``ns`` it names no namespace: what a graph takes, and ``list()`` spans every
    namespace. ``ns=""`` is the root namespace, which a saver's ``put`` wants.
    """
    config = {"thread_id": thread_id, **configurable}
    if ns is not None:
        config["checkpoint_ns"] = ns
    if checkpoint_id:
        config["checkpoint_id"] = checkpoint_id
    return {"configurable": config}


def put_chain(saver, thread_id: str, values: dict, *, steps: int = 1, ns: str = ""):
    """Put ``steps`` checkpoints on a thread, each holding ``values``; return the last config."""
    config = config_for(thread_id, ns=ns)
    versions: dict = {}
    for step in range(1, steps + 1):
        checkpoint = empty_checkpoint()
        new_versions = {}
        for channel in values:
            versions[channel] = saver.get_next_version(versions.get(channel), None)
            new_versions[channel] = versions[channel]
        checkpoint["channel_values"] = dict(values)
        checkpoint["channel_versions"] = dict(versions)
        config = saver.put(config, checkpoint, {"source": "loop", "step": step}, new_versions)
    return config


def corrupt_values(saver, thread_id: str, typed: tuple[str, bytes], channel: str = "") -> None:
    """Overwrite every stored channel value of the thread (or of ``channel`` alone) with
    ``typed``, as a person with access to the database could."""
    saver = backing_saver(saver)
    if saver.provider in ("sqlite", "postgres"):
        from checkpoints.models import ChannelBlob

        rows = ChannelBlob.objects.using(saver.db_alias).filter(thread__thread_id=thread_id)
        (rows.filter(channel=channel) if channel else rows).update(type=typed[0], blob=typed[1])
    elif saver.provider == "memory":
        blobs = saver.store.blobs
        for key in [k for k, v in blobs.items() if k[0] == thread_id and v is not None]:
            if not channel or key[2] == channel:
                blobs[key] = typed
    else:
        from checkpoints.store.redis.keys import ns_hex, pack, thread_prefix, unpack

        client = saver.client
        key = f"{thread_prefix(thread_id)}b:{ns_hex('')}"
        for field in client.hgetall(key):
            if not channel or unpack(field)[0].decode() == channel:
                client.hset(key, field, pack(*typed))


def watch_pgwire(monkeypatch, record) -> None:
    """Every statement the PostgreSQL saver sends through libpq (`sql.run` and `sql.arun`),
    sync or async, first handed to ``record(conn, statement, options)``."""
    from checkpoints.store.postgres import sql as pgwire

    run, arun = pgwire.run, pgwire.arun

    def watched(conn, statement, encoded, **options):
        record(conn, statement, options)
        return run(conn, statement, encoded, **options)

    async def awatched(conn, statement, encoded, **options):
        record(conn, statement, options)
        return await arun(conn, statement, encoded, **options)

    monkeypatch.setattr(pgwire, "run", watched)
    monkeypatch.setattr(pgwire, "arun", awatched)
