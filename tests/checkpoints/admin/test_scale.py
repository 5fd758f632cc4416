"""Every console page answers on a store of 100,000 threads and 1,000,000 checkpoints
(PostgreSQL): its views, filters, paginators and templates hold up at that size.

How fast they answer is measured by the benchmark, not here (a timed test fails on a loaded
machine and passes on a quiet one): `python -m bench.sweep --lists` times the same pages
(`bench.lists.console_pages`) on the same seed (`bench.seeding`).

The store is a database of its own, created, migrated and seeded once for this module
(set-based SQL from bench/seeding.py) and dropped after; the deployment's saver points at it
through CHECKPOINTS["CONN_STRING"], as a real deployment's would.
"""

from __future__ import annotations

import hashlib
import os
import time
from datetime import timedelta

import psycopg
import pytest
from django.conf import settings as django_settings

pytestmark = [pytest.mark.scale, pytest.mark.postgres]

THREADS = 100_000
PER_THREAD = 10
LONG_THREAD = 2_000
# Referencing tables first: a logged table may not point at an unlogged one.
TABLES = (
    "checkpoints_checkpoint",
    "checkpoints_channelblob",
    "checkpoints_pendingwrite",
    "checkpoints_thread",
    "checkpoints_finishedmark",
)
_pg = django_settings.DATABASES.get("pg", {})
KEEP = os.environ.get("CHECKPOINTS_SCALE_DB")
DB_NAME = KEEP or f"checkpoint_scale_{os.getpid()}"
SCALE_URL = (
    f"postgres://{_pg.get('USER') or 'postgres'}@{_pg.get('HOST') or '127.0.0.1'}:"
    f"{_pg.get('PORT') or 5432}/{DB_NAME}"
)
# The alias checkpoints.dburl registers for that URL: the test may query it.
ALIAS = "checkpoints_" + hashlib.sha1(SCALE_URL.encode()).hexdigest()[:12]


def _server():
    conn = psycopg.connect(
        host=_pg.get("HOST") or "127.0.0.1",
        port=_pg.get("PORT") or 5432,
        user=_pg.get("USER") or "postgres",
        dbname="postgres",
        autocommit=True,
    )
    return conn


def _seed_store(now) -> None:
    from django.db import connections

    from bench.seeding import checkpoint_body, mark_finished, seed, seed_status_writes
    from checkpoints.store.registry import get_saver

    idle, recent = timedelta(days=3), timedelta(minutes=5)
    half = THREADS // 2
    started = time.perf_counter()
    saver = get_saver()
    long_thread = f"sweep-{THREADS}"

    def done(what: str) -> None:
        print(f"  {time.perf_counter() - started:5.1f} s  {what}")

    # The saver records the store's format generation first, as on a real store.
    saver.get_tuple({"configurable": {"thread_id": "none"}})
    with connections[ALIAS].cursor() as cur:
        body = checkpoint_body(cur)
        # A throwaway database, seeded fast: its tables skip the write-ahead log, the rows
        # (consistent by construction) skip the foreign-key triggers, and the checkpoint
        # table's plain indexes are built once after the rows are in (seconds) instead of
        # kept up to date row by row (minutes). Reads, plans and indexes end up the same.
        for table in TABLES:
            cur.execute(f'ALTER TABLE "{table}" SET UNLOGGED')
        cur.execute("SET session_replication_role = replica")
        cur.execute("SET maintenance_work_mem = '256MB'")
        cur.execute(
            "SELECT indexrelid::regclass::text, pg_get_indexdef(indexrelid) FROM pg_index i "
            "WHERE indrelid = 'checkpoints_checkpoint'::regclass AND NOT EXISTS "
            "(SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)"
        )
        plain = cur.fetchall()
        for name, _ in plain:
            cur.execute(f'DROP INDEX "{name}"')
        # Half idle for days, half written minutes ago, one long thread for the history.
        seed(cur, first=1, last=half, age=idle, per_thread=PER_THREAD, body=body, now=now)
        seed(
            cur,
            first=half + 1,
            last=THREADS - 1,
            age=recent,
            per_thread=PER_THREAD,
            body=body,
            now=now,
        )
        done(f"{THREADS - 1} threads x {PER_THREAD} checkpoints")
        seed(
            cur,
            first=THREADS,
            last=THREADS,
            age=timedelta(0),
            per_thread=LONG_THREAD,
            body=body,
            now=now,
        )
        done(f"one thread of {LONG_THREAD} checkpoints")
        # One thread in a hundred waits on an interrupt at its head, one in a hundred
        # failed; one in ten is marked finished.
        seed_status_writes(
            cur, saver=saver, per_thread=PER_THREAD, unique_ids=False, skip=(long_thread,)
        )
        mark_finished(cur, now=now)
        done("interrupts, errors, finished marks")
        cur.execute("SET session_replication_role = DEFAULT")
        for _, definition in plain:
            cur.execute(definition)
        done(f"{len(plain)} indexes of the checkpoint table rebuilt")
        # What autovacuum does to a settled table: the visibility map lets the status
        # filter's partial index and a deep page's walk of the thread index answer without
        # the heap.
        cur.execute("VACUUM (ANALYZE) checkpoints_pendingwrite")
        cur.execute("VACUUM (ANALYZE) checkpoints_thread")
        cur.execute("ANALYZE")
        done("VACUUM, ANALYZE")


def _facts() -> dict:
    """Primary keys the pages are asked for: the long thread, a waiting one, their rows."""
    from bench.lists import store_facts

    return store_facts(ALIAS, f"sweep-{THREADS}")


@pytest.fixture(scope="module")
def scale_store(django_db_setup, django_db_blocker):
    """A migrated, seeded PostgreSQL store of its own; dropped when the module ends.

    CHECKPOINTS_SCALE_DB names a database to keep between runs instead (seeded the first
    time, never dropped): for working on the pages, not for CI.
    """
    if django_settings.POSTGRES_UNAVAILABLE is not None:
        pytest.fail(f"the scale test needs PostgreSQL: {django_settings.POSTGRES_UNAVAILABLE}")
    from django.core.management import call_command
    from django.db import connections
    from django.test.utils import override_settings

    from checkpoints.connect import alias_for_conn_string
    from checkpoints.store.planning import utcnow

    with _server() as server:
        exists = server.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", [DB_NAME]
        ).fetchone()
        fresh = not (KEEP and exists)
        if fresh:
            server.execute(f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)")
            server.execute(f"CREATE DATABASE {DB_NAME}")
    assert alias_for_conn_string(SCALE_URL) == ALIAS
    store = override_settings(
        CHECKPOINTS={
            **django_settings.CHECKPOINTS,
            "PROVIDER": "postgres",
            "CONN_STRING": SCALE_URL,
        }
    )
    store.enable()
    try:
        with django_db_blocker.unblock():
            started = time.perf_counter()
            call_command("migrate", database=ALIAS, verbosity=0, interactive=False)
            print(f"\nscale store migrated in {time.perf_counter() - started:.0f} s")
            if fresh:
                _seed_store(utcnow())
                print(f"scale store seeded in {time.perf_counter() - started:.0f} s")
            facts = _facts()
        yield facts
    finally:
        store.disable()
        connections[ALIAS].close()
        # Forget the alias: tests on databases="__all__" that run after this module in the
        # same worker would otherwise set up and flush a database dropped below.
        del connections[ALIAS]
        connections.settings.pop(ALIAS, None)
        if not KEEP:
            with _server() as server:
                server.execute(f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)")


@pytest.mark.django_db(databases=["default", ALIAS])
def test_every_console_page_answers_on_the_big_store(scale_store, admin_client, admin_user):
    from bench.lists import console_pages
    from bench.seeding import seed_side_tables
    from checkpoints import status
    from checkpoints.store.planning import utcnow

    # Parks, holds, sweep runs and audit events, a few thousand each, where the console
    # keeps them (the default database).
    seed_side_tables("default", utcnow())
    pages = console_pages(scale_store, owner_pk=admin_user.pk)
    th = "/admin/checkpoints/thread/"
    pages |= {f"thread list, status {kind}": f"{th}?status={kind}" for kind in status.KINDS}
    # Every page twice: a page that errs only once its caches are warm is caught too.
    answers = {
        name: [admin_client.get(url).status_code for _ in range(2)] for name, url in pages.items()
    }
    failed = {name: codes for name, codes in answers.items() if set(codes) != {200}}
    assert not failed, f"pages that did not answer 200: {failed}"
