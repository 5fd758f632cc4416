"""Pytest plugin (``-p lgsuite_plugin``) that runs LangGraph's suite on one of our savers.

LGSUITE_PROVIDER picks the saver: ``baseline`` (upstream's own InMemorySaver fixture, the
reference) or one of ours: memory, sqlite, postgres, redis (built by `get_saver`), or the
remote saver on a store service in this process (a live server thread) whose store is
sqlite, postgres or redis: ``remote-sqlite``, ``remote-postgres``, ``remote-redis``.
Upstream's ``sync_checkpointer`` / ``async_checkpointer`` fixtures in its tests/conftest.py
are replaced, before pytest parses that conftest, by the two below; every other fixture
and every test stays upstream's, unedited. Only tests that take one of the two fixtures
are kept, so each test id appears once per provider and the runs compare id by id.

LGSUITE_SUITE names a saver package's own suite instead (``checkpoint``, ``sqlite``,
``postgres``; see `run.SUITES`). Those tests build the peer saver themselves
(``InMemorySaver()``, ``SqliteSaver.from_conn_string(":memory:")``, ``PostgresSaver(conn)``),
so for ours the plugin swaps those names, in each collected test module, for stand-ins that
build our saver; ``Shallow*`` ones build ours with ``max_checkpoints=1`` (the remote
saver: its service's MAX_CHECKPOINTS set to 1, see `_service_keeps`). The peer's
PostgreSQL address is pointed at a database of this run's own on the shared server.

One helper of a peer suite is translated too: the postgres suite's prune tests observe
PostgresSaver's three tables through ``_rows(saver, thread_id)`` (each checkpoint's
namespace and id, each write's namespace, checkpoint id, task id and index, each blob's
namespace, channel and version). Ours keeps the same keys in its own tables, so on ours
``_rows`` reads those (`_our_rows`) and the tests' assertions about what a prune keeps run
on ours instead of failing on the peer's private ``_cursor``.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import socket
from collections.abc import AsyncIterator, Iterator

import pytest

PROVIDER = os.environ.get("LGSUITE_PROVIDER", "baseline")
# The store behind the saver: the provider's own, or for the remote saver its service's.
REMOTE = PROVIDER.startswith("remote-")
STORE = PROVIDER.removeprefix("remote-")
SUITE = os.environ.get("LGSUITE_SUITE", "langgraph")
PEER = SUITE != "langgraph"
TEST_TIMEOUT = int(os.environ.get("LGSUITE_TEST_TIMEOUT", "60"))
# Peer saver names a package's tests construct -> (async flavour, shallow).
STAND_INS = {
    "InMemorySaver": (False, False),
    "SqliteSaver": (False, False),
    "AsyncSqliteSaver": (True, False),
    "PostgresSaver": (False, False),
    "AsyncPostgresSaver": (True, False),
    "ShallowPostgresSaver": (False, True),
    "AsyncShallowPostgresSaver": (True, True),
}
OURS = (
    "memory",
    "sqlite",
    "postgres",
    "redis",
    "remote-sqlite",
    "remote-postgres",
    "remote-redis",
)
FIXTURES = ("sync_checkpointer", "async_checkpointer")
REDIS_LOCK = b"lgsuite:owner"
# Dbs the repository's own tests never pick (each run uses one of 2..13, its Celery broker
# too), claimed with a lock key; 15, the demo's cache, last.
REDIS_DBS = (14, 1, 15)

_state: dict = {}


def pytest_configure(config: pytest.Config) -> None:
    if PROVIDER not in OURS and PROVIDER != "baseline":
        raise pytest.UsageError(f"LGSUITE_PROVIDER={PROVIDER!r}; use baseline or {OURS}")
    if PROVIDER in OURS:
        _setup_django()
    if STORE == "redis":
        _claim_redis_db()
    if REMOTE:
        _start_service()


def pytest_unconfigure(config: pytest.Config) -> None:
    if "service" in _state:
        _state.pop("service").terminate()
    if "peer_pg" in _state:
        _drop_peer_pg(_state.pop("peer_pg"))
    if "databases" in _state:
        from django.test.utils import teardown_databases

        _release_pg()
        teardown_databases(_state.pop("databases"), verbosity=0)
    if "redis" in _state:
        client = _state.pop("redis")
        _empty_redis(client)
        client.delete(REDIS_LOCK)


@pytest.hookimpl(tryfirst=True)
def pytest_plugin_registered(plugin, manager) -> None:
    # Upstream's conftest is parsed for fixtures only when its directory is collected, so
    # swapping the two functions now makes pytest see ours in their place.
    if getattr(plugin, "__name__", "") != "tests.conftest":
        return
    if not PEER and hasattr(plugin, FIXTURES[0]):
        plugin.sync_checkpointer = sync_checkpointer
        plugin.async_checkpointer = async_checkpointer
    if SUITE == "postgres":
        # The test modules import these from the conftest, so set before they load (and
        # before pytest_configure: the rootdir's conftest is registered first).
        if "peer_pg" not in _state:
            _create_peer_pg()
        plugin.DEFAULT_POSTGRES_URI = _state["peer_pg"]["server"]
        plugin.DEFAULT_URI = _state["peer_pg"]["uri"]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    """In a peer suite a test that never returns (a walk round a cycle) fails, not hangs."""
    import signal

    if not PEER:
        yield
        return

    def stop(signum, frame):
        raise TimeoutError(f"{item.nodeid} still running after {TEST_TIMEOUT}s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(TEST_TIMEOUT)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    if PEER:
        if PROVIDER in OURS:
            for module in {id(i.module): i.module for i in items if i.module}.values():
                _substitute(module)
        return
    keep, drop = [], []
    for item in items:
        names = getattr(item, "fixturenames", ())
        (keep if any(f in names for f in FIXTURES) else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


# -- services -------------------------------------------------------------------------------
def _peer_pg_server() -> str:
    url = os.environ.get(
        "CHECKPOINTS_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/checkpoint_store"
    )
    return url.rsplit("/", 1)[0] + "/"


def _create_peer_pg() -> None:
    """A database of this run's own for the peer's fixtures (they DELETE FROM its tables)."""
    import psycopg

    server = _peer_pg_server()
    name = f"lgpeer_{os.environ.get('LGSUITE_RUN_TAG') or os.getpid()}"
    with psycopg.connect(server + "postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    _state["peer_pg"] = {"server": server, "name": name, "uri": f"{server}{name}?sslmode=disable"}


def _drop_peer_pg(peer: dict) -> None:
    import psycopg

    with psycopg.connect(peer["server"] + "postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{peer["name"]}" WITH (FORCE)')


def _setup_django() -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = "lgsuite_settings"
    import django

    django.setup()
    if STORE not in ("sqlite", "postgres") and not REMOTE:
        return
    from django.test.utils import setup_databases

    aliases = {"default", "pg"} if STORE == "postgres" else {"default"}
    _state["databases"] = setup_databases(verbosity=0, interactive=False, aliases=aliases)


def _release_pg() -> None:
    """Close this process's connections to its own test database so it can be dropped."""
    import gc

    from django.db import connections

    from checkpoints.store.postgres import pool as pg_pool

    for pool in list(pg_pool._pools.values()):
        pool.close()
    pg_pool._pools.clear()
    gc.collect()  # connections of finished executor threads
    if STORE != "postgres":
        return
    name = connections["pg"].settings_dict["NAME"]
    with connections["pg"].cursor() as cur:
        cur.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            [name],
        )
    connections.close_all()


def _claim_redis_db() -> None:
    import redis

    base = os.environ.get("CHECKPOINTS_TEST_REDIS_BASE", "redis://127.0.0.1:6379")
    owner = str(os.getpid()).encode()
    for db in REDIS_DBS:
        client = redis.Redis.from_url(f"{base}/{db}")
        if client.set(REDIS_LOCK, owner, nx=True, ex=4 * 3600):
            _state["redis"] = client
            _state["redis_url"] = f"{base}/{db}"
            _empty_redis(client)
            return
    raise pytest.UsageError(
        f"no free Redis db for the LangGraph suite: {REDIS_DBS} all hold {REDIS_LOCK!r} "
        "(another run); wait for it or delete the stale key"
    )


def _empty_redis(client) -> None:
    """Delete this run's keys one by one (never FLUSHDB: the lock key stays)."""
    batch = [k for k in client.scan_iter(count=1000) if k != REDIS_LOCK]
    for i in range(0, len(batch), 500):
        client.delete(*batch[i : i + 500])


def _empty_orm(alias: str) -> None:
    """Every checkpoints and retention table emptied but the store's format record, which
    the savers (and the service's) checked once and would otherwise check again."""
    from django.apps import apps
    from django.db import connections, transaction

    from checkpoints.models import StoreFormat

    tables = [
        m._meta.db_table
        for label in ("checkpoints", "retention")
        for m in apps.get_app_config(label).get_models()
        if m is not StoreFormat
    ]
    conn = connections[alias]
    statements = [f"DELETE FROM {conn.ops.quote_name(t)}" for t in tables]
    with transaction.atomic(using=alias), conn.cursor() as cur:
        # tests.fast_flush does the same, but the upstream suite's own `tests` package
        # shadows ours in this process, so it cannot be imported here.
        if conn.vendor == "postgresql":
            # DELETEs, not TRUNCATE: a few rows a table, and TRUNCATE's lock and new files cost
            # more than the rows; the keys are deferred, so the order does not matter.
            cur.execute("SET CONSTRAINTS ALL DEFERRED")
            cur.execute(";".join(statements))
        else:
            for statement in statements:
                cur.execute(statement)


# -- the saver ------------------------------------------------------------------------------
def _make(clean: bool = True, **options):
    """A saver on an empty store.

    Emptied here too, not only after the previous test: a graph's background work (a
    cancelled run's last write) can land after that test's teardown, and would otherwise
    show up in this test's thread "1".
    """
    if clean:
        _clean()
    from checkpoints.store.registry import get_saver

    if REMOTE:
        from checkpoints.remote import RemoteSaver

        _service_keeps(options.pop("max_checkpoints", 0))
        url, key = _state["remote"]
        return RemoteSaver(url, api_key=key, **options)
    if PROVIDER == "memory":
        from checkpoints.store.memory import MemorySaver, MemoryStore

        return MemorySaver(store=MemoryStore(), **options)
    if PROVIDER == "redis":
        return get_saver("redis", conn_string=_state["redis_url"], **options)
    return get_saver(PROVIDER, using="pg" if PROVIDER == "postgres" else "default", **options)


def _start_service() -> None:
    """The project's URLs served by a live server thread of this process, its store this
    run's test database (the suite's clean-ups empty it as for the in-process saver)."""
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.db import connections
    from django.test.testcases import LiveServerThread, _StaticFilesHandler
    from django.test.utils import override_settings
    from rest_framework.authtoken.models import Token

    from checkpoints.dburl import database_url

    changed = {"ALLOWED_HOSTS": [*settings.ALLOWED_HOSTS, "127.0.0.1"]}
    if STORE == "postgres":
        pg = database_url(connections["pg"].settings_dict)
        changed["CHECKPOINTS"] = {**settings.CHECKPOINTS, "PROVIDER": "postgres", "CONN_STRING": pg}
    elif STORE == "redis":
        # Its users and tokens stay in the SQLite test database; the checkpoints go to Redis.
        url = _state["redis_url"]
        changed["CHECKPOINTS"] = {**settings.CHECKPOINTS, "PROVIDER": "redis", "CONN_STRING": url}
    # Through override_settings, so the store's cached settings are read again.
    override_settings(**changed).enable()

    class NoDelayServer(LiveServerThread.server_class):
        # Django's test server sends headers and body apart: without TCP_NODELAY each
        # keep-alive answer waited ~40 ms for the client's delayed ACK, most of a test's
        # time on the remote saver. (Upstream's own `tests` package shadows ours here, so
        # the suite's tests/live_servers.py cannot be imported.)
        def get_request(self):
            sock, address = super().get_request()
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return sock, address

    LiveServerThread.server_class = NoDelayServer
    thread = LiveServerThread("127.0.0.1", _StaticFilesHandler, port=0)
    thread.daemon = True
    thread.start()
    thread.is_ready.wait()
    if thread.error:
        raise thread.error
    user = User.objects.create_superuser("lgsuite", "", "lgsuite")
    _state["service"] = thread
    _state["remote"] = (f"http://127.0.0.1:{thread.port}", Token.objects.create(user=user).key)


def _service_keeps(most: int):
    """The service keeps ``most`` checkpoints a thread (0: all). A worker's saver has no
    ``max_checkpoints`` of its own: a shallow saver on the remote saver is a service whose
    deployment sets MAX_CHECKPOINTS, so a ``Shallow*`` stand-in sets it here (the change of
    setting makes the service build its saver afresh) and any other saver puts it back."""
    from django.conf import settings
    from django.test.utils import override_settings

    if (settings.CHECKPOINTS.get("MAX_CHECKPOINTS") or 0) == most:
        return None
    changed = override_settings(CHECKPOINTS={**settings.CHECKPOINTS, "MAX_CHECKPOINTS": most})
    changed.enable()
    return changed  # the suite's process never undoes it; a test of this function does


class _StandInMeta(type):
    """A peer saver class whose construction builds ours (in a worker thread: a test may
    construct it inside its event loop, where Django refuses the ORM)."""

    def __call__(cls, *args, serde=None, **kwargs):
        import concurrent.futures

        options = {"serde": serde} if serde is not None else {}
        if cls.shallow:
            options["max_checkpoints"] = 1
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            saver = pool.submit(_make, False, **options).result()
        saver._lgpeer_kinds = {*getattr(saver, "_lgpeer_kinds", ()), cls.__name__}
        if cls.is_async:

            async def setup() -> None:
                return None

        else:

            def setup() -> None:
                return None

        saver.setup = setup  # ours is set up by its migrations
        return saver

    def __instancecheck__(cls, obj) -> bool:
        return cls.__name__ in getattr(obj, "_lgpeer_kinds", ())


def _stand_in(name: str) -> type:
    import contextlib

    is_async, shallow = STAND_INS[name]

    @contextlib.contextmanager
    def from_conn_string(cls, *args, **kwargs):
        yield cls()

    @contextlib.asynccontextmanager
    async def afrom_conn_string(cls, *args, **kwargs):
        yield cls()

    return _StandInMeta(
        name,
        (),
        {
            "is_async": is_async,
            "shallow": shallow,
            "from_conn_string": classmethod(afrom_conn_string if is_async else from_conn_string),
        },
    )


def _substitute(module) -> None:
    """Point the module's peer saver names at stand-ins that build ours (and, in the
    postgres suite, its table reader at ours)."""
    for name in STAND_INS:
        if isinstance(module.__dict__.get(name), type):
            setattr(module, name, _stand_in(name))
    rows = module.__dict__.get("_rows")
    if (
        SUITE == "postgres"
        and STORE == "postgres"
        and inspect.iscoroutinefunction(rows)
        and list(inspect.signature(rows).parameters) == ["saver", "thread_id"]
    ):
        module._rows = _our_rows


async def _our_rows(saver, thread_id: str) -> dict[str, list[tuple]]:
    """The postgres suite's ``_rows`` on ours: the rows its three queries name, in the
    order they ask for (ORDER BY on the same server, so the same collation)."""
    return await asyncio.to_thread(_read_our_rows, thread_id)


def _read_our_rows(thread_id: str) -> dict[str, list[tuple]]:
    from django.db import connections

    from checkpoints.models import ChannelBlob, PendingWrite
    from checkpoints.models import Checkpoint as CheckpointRow

    def rows(model, *fields: str) -> list[tuple]:
        found = model.objects.using("pg").filter(thread__thread_id=thread_id)
        return [tuple(r) for r in found.order_by(*fields).values_list(*fields)]

    try:
        return {
            "checkpoints": rows(CheckpointRow, "checkpoint_ns", "checkpoint_id"),
            "writes": rows(PendingWrite, "checkpoint_ns", "checkpoint_id", "task_id", "idx"),
            "blobs": rows(ChannelBlob, "checkpoint_ns", "channel", "version"),
        }
    finally:
        connections.close_all()  # this worker thread's; the store is emptied between tests


@pytest.fixture(autouse=True)
def _lgpeer_empty_store() -> Iterator[None]:
    """Peer tests reuse thread ids and build savers mid-test: start each on an empty store."""
    if PEER and PROVIDER in OURS:
        _clean()
    yield


def _clean() -> None:
    """Empty the store, so the next test (upstream reuses thread ids) starts from nothing."""
    if STORE == "redis":
        _empty_redis(_state["redis"])
    elif STORE in ("sqlite", "postgres"):
        from django.db import connections

        _empty_orm("pg" if STORE == "postgres" else "default")
        connections.close_all()
    if REMOTE and STORE == "redis":
        # The emptied Redis store lost its format record: the service's saver records it
        # again (the ORM stores keep theirs).
        from checkpoints.store_service.views import forget_service_saver

        forget_service_saver()


# One parameter, id "memory" whatever the provider: upstream's syrupy snapshots are keyed by
# test ids such as test_weather_subgraph[memory], and equal ids let the runs be compared.
@pytest.fixture(params=[PROVIDER], ids=["memory"])
def sync_checkpointer() -> Iterator:
    if PROVIDER == "baseline":
        from tests.conftest_checkpointer import _checkpointer_memory

        with _checkpointer_memory() as saver:
            yield saver
        return
    try:
        yield _make()
    finally:
        _clean()


@pytest.fixture(params=[PROVIDER], ids=["memory"])
async def async_checkpointer() -> AsyncIterator:
    if PROVIDER == "baseline":
        from tests.conftest_checkpointer import _checkpointer_memory

        with _checkpointer_memory() as saver:
            yield saver
        return
    # Django refuses its ORM inside an event loop: build and empty the store in a thread.
    try:
        yield await asyncio.to_thread(_make)
    finally:
        await asyncio.to_thread(_clean)
