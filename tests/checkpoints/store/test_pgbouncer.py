"""The PostgreSQL store behind a real PgBouncer in transaction-pooling mode (issue 17).

With the defaults: no named prepared statement is used behind the pooler (it is detected),
LangGraph's conformance suite passes, a real graph interrupts and resumes across
processes, concurrent writers lose nothing they were told was written, and of three
sweeps started at once exactly one runs (the lease row, not a session lock).
"""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from django.db import connections
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.types import Command

from checkpoints.models import StoreLease
from checkpoints.store.planning import utcnow
from checkpoints.store.postgres.pool import behind_pooler, prepared_statements_allowed
from checkpoints.store.registry import get_saver
from tests.checkpoints.store.graphs import interrupt_graph
from tests.conformance import run_suite
from tests.pgbouncer import bounced_url
from tests.retention_fixtures import finished_past_due, holds
from tests.standalone import plain_env, run_graph
from tests.store_helpers import config_for
from tests.sweep_race import race_sweeps

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True, databases=["default", "pg", "pgb"]),
]


@pytest.fixture
def bounced(request, transactional_db, pgbouncer_port):
    """An ORM saver on the test database, through PgBouncer, with the default settings."""
    from checkpoints.store.orm.ledger import forget_format_checks

    forget_format_checks()
    return get_saver("postgres", using="pgb")


def test_the_pooler_is_detected_and_no_statement_is_prepared_behind_it(bounced):
    direct = get_saver("postgres", using="pg")
    with connections["pg"].cursor() as cur:
        assert not behind_pooler(cur.connection)
        assert prepared_statements_allowed("pg", direct.prepare_mode, cur.connection)
    connections[bounced.using].ensure_connection()
    raw = connections[bounced.using].connection
    assert behind_pooler(raw)
    assert not prepared_statements_allowed(bounced.using, bounced.prepare_mode, raw)


@pytest.mark.parametrize("path", ["async", "sync"])
def test_conformance_suite_through_pgbouncer(bounced, path):
    run_suite(bounced, "pgbouncer", path)


def test_a_graph_interrupts_and_resumes_through_pgbouncer(bounced):
    graph = interrupt_graph(bounced)
    config = config_for("bounced-graph")
    first = graph.invoke({"question": "name?"}, config)
    assert [i.value for i in first["__interrupt__"]] == [{"question": "name?"}]
    resumed = graph.invoke(Command(resume="Ada"), config)
    assert "Ada" in json.dumps(resumed)
    assert graph.get_state(config).next == ()


def test_a_users_script_runs_a_graph_through_pgbouncer_in_two_processes(
    pgbouncer_port,
    tmp_path,
):
    """Default settings, as a user's process: start in one process, resume in another."""
    url = bounced_url(pgbouncer_port)
    env = plain_env()
    started = run_graph(url, "script-thread", "start", cwd=tmp_path, env=env)
    assert started[-1]["interrupted"] is True
    resumed = run_graph(url, "script-thread", "resume", cwd=tmp_path, env=env)
    assert resumed[-1]["log"] == ["drafted", "approved:yes"] or "approved" in str(resumed)
    again = run_graph(url, "async-thread", "async-start", "async-resume", cwd=tmp_path, env=env)
    assert again[0]["interrupted"] is True and "approved" in str(again[-1]["log"])


WRITERS = 8
PER_WRITER = 150


def test_concurrent_writers_through_pgbouncer_lose_nothing_acknowledged(bounced):
    acknowledged: list[tuple[str, str]] = []
    failures: list[BaseException] = []
    lock = threading.Lock()
    start = threading.Barrier(WRITERS)

    def writer(n: int) -> None:
        config = config_for(f"writer-{n}", ns="")
        start.wait()
        try:
            for i in range(PER_WRITER):
                checkpoint = empty_checkpoint()
                checkpoint["channel_values"] = {"n": i}
                checkpoint["channel_versions"] = {"n": i + 1}
                saved = bounced.put(config, checkpoint, {"step": i}, {"n": i + 1})
                with lock:
                    acknowledged.append(
                        ("writer-" + str(n), saved["configurable"]["checkpoint_id"])
                    )
                config = saved
        except BaseException as exc:  # noqa: BLE001 - surfaced by the assert below
            failures.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(WRITERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not failures, failures[:3]
    assert len(acknowledged) == WRITERS * PER_WRITER
    direct = get_saver("postgres", using="pg")
    for thread_id, checkpoint_id in acknowledged:
        config = config_for(thread_id, checkpoint_id, ns="")
        assert direct.get_tuple(config) is not None, (thread_id, checkpoint_id)
    print(f"pgbouncer writers: {len(acknowledged)} acknowledged, all read back")


def test_three_sweeps_through_pgbouncer_at_once_exactly_one_runs(
    bounced,
    pgbouncer_port,
    tmp_path,
    settings,
):
    settings.CHECKPOINTS = {**settings.CHECKPOINTS, "SWEEP_BATCH_SIZE": 2}
    now = utcnow()
    for i in range(8):
        finished_past_due(bounced, f"t{i}", now)
    outcomes = race_sweeps(
        tmp_path,
        "postgres",
        "pg",
        processes=3,
        conn_string=bounced_url(pgbouncer_port),
        timeout=180,
    )
    ran = [o["ran"] for o in outcomes if "ran" in o]
    refused = [o for o in outcomes if "refused" in o]
    assert ran == [8] and len(refused) == 2, outcomes
    assert not any(holds(bounced, f"t{i}") for i in range(8))
    assert not StoreLease.objects.using("pg").exists()
    # Nothing stays held by an idle server connection: a direct sweep runs at once.
    from retention.sweep import sweep_checkpoints

    assert sweep_checkpoints(saver=get_saver("postgres", using="pg")).swept_count == 0
    print(f"pgbouncer sweeps: {len(ran)} ran, {len(refused)} refused")


def test_a_prepared_statement_the_pooler_lost_never_reaches_the_user_raw(
    bounced,
    pgbouncer_port,
    settings,
):
    """Forced on behind the pooler: the clash is real, and the saver rides it out."""
    import psycopg

    from checkpoints.store.postgres.pool import close_pools
    from checkpoints.store.postgres.sql import GET_LATEST

    close_pools()  # forget the verdict "auto" reached for this alias
    settings.CHECKPOINTS = {**settings.CHECKPOINTS, "PG_PREPARED_STATEMENTS": True}
    forced = get_saver("postgres", using="pgb")
    assert forced.prepare_mode == "on"
    checkpoint = empty_checkpoint()
    forced.put({"configurable": {"thread_id": "clash", "checkpoint_ns": ""}}, checkpoint, {}, {})
    # A batch goes through psycopg's cursor (the put and the reads do not: `postgres.sql`
    # names their statements itself).
    forced.put_many([(config_for("clash-batch", ns=""), empty_checkpoint(), {}, {})])
    assert forced.get_tuple({"configurable": {"thread_id": "clash"}}) is not None
    url = bounced_url(pgbouncer_port)
    params = {"thread_id": "clash", "ns": "", "checkpoint_id": None}
    with (
        psycopg.connect(url, autocommit=True) as second,
        psycopg.connect(url, autocommit=True) as third,
    ):
        # Every client names its first prepared statement _pg3_0; the saver's batch prepared
        # one on the server connection PgBouncer now hands to the next client in turn.
        with pytest.raises(psycopg.errors.DuplicatePreparedStatement):
            second.execute("SELECT %s::text", ["x"], prepare=True)
        with psycopg.Cursor(third) as cur:
            forced._execute(cur, GET_LATEST, params, binary=True)
            [row] = cur.fetchall()
        assert row[4] == checkpoint["id"]
        assert not prepared_statements_allowed("pgb", "on", third)
        # Later calls no longer prepare, so they cannot clash.
        assert forced.get_tuple({"configurable": {"thread_id": "clash"}}) is not None
        second.execute("DEALLOCATE ALL")
    close_pools()


def test_an_async_call_rides_out_a_prepared_statement_the_pooler_lost(
    bounced,
    pgbouncer_port,
    settings,
):
    """The same clash on the native async path: it runs again unprepared, never raw."""
    import psycopg

    from checkpoints.store.postgres.pool import close_pools
    from checkpoints.store.postgres.sql import GET_LATEST

    close_pools()
    settings.CHECKPOINTS = {**settings.CHECKPOINTS, "PG_PREPARED_STATEMENTS": True}
    forced = get_saver("postgres", using="pgb")
    checkpoint = empty_checkpoint()
    forced.put({"configurable": {"thread_id": "aclash", "checkpoint_ns": ""}}, checkpoint, {}, {})
    forced.put_many([(config_for("aclash-batch", ns=""), empty_checkpoint(), {}, {})])  # _pg3_0
    assert forced.get_tuple({"configurable": {"thread_id": "aclash"}}) is not None
    url = bounced_url(pgbouncer_port)
    params = {"thread_id": "aclash", "ns": "", "checkpoint_id": None}

    async def clash() -> tuple:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as third:
            cur = psycopg.AsyncCursor(third)
            await forced._aexecute(cur, GET_LATEST, params, binary=True)
            rows = await cur.fetchall()
            return rows, await forced.aget_tuple({"configurable": {"thread_id": "aclash"}})

    with psycopg.connect(url, autocommit=True) as second:
        with pytest.raises(psycopg.errors.DuplicatePreparedStatement):
            second.execute("SELECT %s::text", ["x"], prepare=True)
        assert prepared_statements_allowed("pgb", "on", second)
        [row], again = asyncio.run(clash())
        assert row[4] == checkpoint["id"]
        assert not prepared_statements_allowed("pgb", "on", second)
        assert again.checkpoint["id"] == checkpoint["id"]
        second.execute("DEALLOCATE ALL")
    close_pools()


@pytest.mark.parametrize("call", ["put", "get"])
@pytest.mark.parametrize("lost", ["taken", "gone"])
@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_direct_statement_rides_out_its_own_prepared_statement_the_pooler_lost(
    bounced, pgbouncer_port, settings, lost, flavour, call
):
    """The put, the writes and the reads prepare under names of their own (`postgres.sql`),
    so the clash there takes other shapes: the server connection PgBouncer hands over
    already holds the name ("taken": another client prepared it), or no longer holds what
    this client prepared ("gone": DEALLOCATE ALL ran there). Either way the call lands,
    unprepared, and the process stops preparing behind this pooler."""
    import psycopg

    from checkpoints.store.postgres.pool import close_pools

    close_pools()
    settings.CHECKPOINTS = {**settings.CHECKPOINTS, "PG_PREPARED_STATEMENTS": True}
    forced = get_saver("postgres", using="pgb")
    thread = f"own-{lost}-{flavour}-{call}"

    config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}

    def lose_it() -> None:
        if lost == "taken":
            close_pools()  # new client connections, which prepared nothing yet
        else:
            with psycopg.connect(bounced_url(pgbouncer_port), autocommit=True) as other:
                other.execute("DEALLOCATE ALL")

    def both() -> dict:
        forced.put(config, empty_checkpoint(), {"step": 1}, {})
        if call == "get":
            forced.get_tuple(config)
        assert prepared_statements_allowed("pgb", "on", None)
        lose_it()
        if call == "get":
            return forced.get_tuple(config).config
        return forced.put(config, empty_checkpoint(), {"step": 2}, {})

    async def aboth() -> dict:
        await forced.aput(config, empty_checkpoint(), {"step": 1}, {})
        if call == "get":
            await forced.aget_tuple(config)
        assert prepared_statements_allowed("pgb", "on", None)
        lose_it()  # on this loop: its pool's connection is the one that must notice
        if call == "get":
            return (await forced.aget_tuple(config)).config
        return await forced.aput(config, empty_checkpoint(), {"step": 2}, {})

    landed = both() if flavour == "sync" else asyncio.run(aboth())
    assert not prepared_statements_allowed("pgb", "on", None)
    stored = forced.get_tuple(landed)
    assert stored is not None and stored.metadata["step"] == (2 if call == "put" else 1)
    with psycopg.connect(bounced_url(pgbouncer_port), autocommit=True) as other:
        other.execute("DEALLOCATE ALL")
    close_pools()
