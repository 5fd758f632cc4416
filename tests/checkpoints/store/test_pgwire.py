"""The put, the writes and the reads go to PostgreSQL through libpq without psycopg's
cursor (`checkpoints.store.postgres.sql`). What the server receives must be what psycopg's
cursor would have sent, a read's rows what its fetchall would have given, a failure must be
psycopg's own exception, and whatever it does not encode goes to the cursor instead."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal

import psycopg
import pytest
from django.db import connections, transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.base import empty_checkpoint
from psycopg.types.json import Jsonb, set_json_loads

from checkpoints.store.postgres import sql as pgwire
from checkpoints.store.postgres.pool import _conninfo
from checkpoints.store.postgres.sql import ByteaArray, Int4Array, TextArray
from tests.store_helpers import config_for, make_saver, watch_pgwire

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True, databases=["default", "pg"]),
]

# Every type the store's statements carry, each rendered back as text by the server (and
# a parameter used twice, as PUT's ``now`` is).
ECHO = pgwire.Statement(
    "SELECT %(s)s::text, %(n)s::int8::text, %(b)s::bytea::text, %(j)s::jsonb::text, "
    "%(t)s::timestamptz::text, %(ta)s::text[]::text, %(ba)s::bytea[]::text, "
    "%(ia)s::int4[]::text, %(none)s::text, (%(t)s::timestamptz = %(t)s::timestamptz)::text",
    columns=(bytes.decode,) * 10,
)


@pytest.fixture
def conn():
    with psycopg.connect(_conninfo(connections["pg"].settings_dict), autocommit=True) as conn:
        yield conn


def through_both(conn, params: dict, prepare: bool) -> tuple[tuple, tuple]:
    encoded = pgwire.encode(ECHO, params)
    assert encoded is not None
    direct = pgwire.run(conn, ECHO, encoded, prepare=prepare)
    plain = dict(params, ta=list(params["ta"]), ba=list(params["ba"]), ia=list(params["ia"]))
    with conn.cursor() as cur:
        cur.execute(ECHO.sql, plain, prepare=prepare)
        cursor = tuple(None if v is None else str(v) for v in cur.fetchone())
    return direct, cursor


texts = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"))


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    s=texts,
    n=st.integers(-(2**63), 2**63 - 1),
    b=st.binary(max_size=300),
    j=st.recursive(
        st.none() | st.booleans() | st.integers(-(10**12), 10**12) | texts,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
        max_leaves=8,
    ),
    t=st.datetimes(
        min_value=datetime(1, 1, 2),
        max_value=datetime(9999, 12, 30),
        timezones=st.sampled_from([UTC, timezone(timedelta(hours=5, minutes=30))]),
    ),
    ta=st.lists(texts | st.none(), max_size=4),
    ba=st.lists(st.binary(max_size=40) | st.none(), max_size=4),
    ia=st.lists(st.integers(-(2**31), 2**31 - 1), max_size=4),
    prepare=st.booleans(),
)
def test_the_server_receives_what_the_cursor_would_send(conn, s, n, b, j, t, ta, ba, ia, prepare):
    params = dict(
        s=s,
        n=n,
        b=b,
        j=Jsonb(j),
        t=t,
        ta=TextArray(ta),
        ba=ByteaArray(ba),
        ia=Int4Array(ia),
        none=None,
    )
    direct, cursor = through_both(conn, params, prepare)
    assert direct == cursor
    assert direct[-1] == "true"


def test_a_statement_is_prepared_once_per_connection_under_its_own_name(conn):
    params = dict(
        s="x",
        n=1,
        b=b"",
        j=Jsonb({}),
        t=datetime.now(UTC),
        ta=TextArray(),
        ba=ByteaArray(),
        ia=Int4Array(),
        none=None,
    )
    for _ in range(3):
        pgwire.run(conn, ECHO, pgwire.encode(ECHO, params), prepare=True)
    names = [row[0] for row in conn.execute("SELECT name FROM pg_prepared_statements").fetchall()]
    assert names == [ECHO.name.decode()]
    assert not names[0].startswith("_pg3_")
    pgwire.forget_prepared(conn)
    # Forgotten here but held by the server: preparing again is refused, as a pooler's
    # clash would be, with psycopg's own exception.
    with pytest.raises(psycopg.errors.DuplicatePreparedStatement):
        pgwire.run(conn, ECHO, pgwire.encode(ECHO, params), prepare=True)
    assert pgwire.usable(conn)


def test_a_nul_in_text_is_refused_as_the_cursor_refuses_it(conn):
    statement = pgwire.Statement("SELECT %(s)s::text")
    with pytest.raises(psycopg.DataError) as direct:
        pgwire.run(conn, statement, pgwire.encode(statement, {"s": "a\x00b"}), prepare=False)
    with pytest.raises(psycopg.DataError) as cursor:
        conn.execute(statement.sql, {"s": "a\x00b"})
    assert str(direct.value) == str(cursor.value)
    # In an array the NUL reaches the server, which refuses it on both paths alike.
    statement = pgwire.Statement("SELECT %(a)s::text[]")
    with pytest.raises(psycopg.Error) as direct:
        pgwire.run(
            conn, statement, pgwire.encode(statement, {"a": TextArray(["a\x00"])}), prepare=False
        )
    with pytest.raises(psycopg.Error) as cursor:
        conn.execute(statement.sql, {"a": TextArray(["a\x00"])})
    assert type(direct.value) is type(cursor.value)
    assert pgwire.usable(conn)


def test_a_failing_statement_raises_psycopgs_exception_and_leaves_the_connection_idle(conn):
    statement = pgwire.Statement("SELECT 1 / %(z)s::int", columns=(int,))
    for prepare in (False, True):
        with pytest.raises(psycopg.errors.DivisionByZero):
            pgwire.run(conn, statement, pgwire.encode(statement, {"z": 0}), prepare=prepare)
        assert pgwire.usable(conn)
        assert pgwire.run(conn, statement, pgwire.encode(statement, {"z": 1}), prepare=prepare) == (
            1,
        )


def test_async_runs_the_same(conn):
    params = dict(
        s="é",
        n=-5,
        b=b"\x00\x01",
        j=Jsonb({"a": [1, None]}),
        t=datetime.now(UTC),
        ta=TextArray(["x", None]),
        ba=ByteaArray([b"\xff"]),
        ia=Int4Array([3]),
        none=None,
    )
    expected, _ = through_both(conn, params, prepare=False)
    assert arun_thrice(ECHO, params) == [expected] * 3


def arun_thrice(statement: pgwire.Statement, params: dict) -> list:
    """``statement``'s answers on an async connection: prepared, prepared again, unnamed."""

    async def run() -> list:
        info = _conninfo(connections["pg"].settings_dict)
        async with await psycopg.AsyncConnection.connect(info, autocommit=True) as aconn:
            encoded = pgwire.encode(statement, params)
            return [
                await pgwire.arun(aconn, statement, encoded, prepare=p) for p in (True, True, False)
            ]

    return asyncio.run(run())


class TaskId(str):
    """A str subclass, as a caller's own id type may be."""


@pytest.mark.parametrize(
    "value", [1.5, True, datetime(2026, 1, 1), TaskId("x"), Decimal("1"), [1], bytearray(b"x")]
)
def test_a_type_it_does_not_encode_is_left_to_the_cursor(value):
    assert pgwire.encode(pgwire.Statement("SELECT %(v)s"), {"v": value}) is None


def test_a_connection_in_a_transaction_is_not_used(conn):
    assert pgwire.usable(conn)
    with conn.transaction():
        assert not pgwire.usable(conn)
    conn.autocommit = False
    assert not pgwire.usable(conn)


def test_the_store_writes_through_it_and_falls_back_to_the_cursor_alike(request, monkeypatch):
    saver = make_saver(request, "postgres")
    direct: list[str] = []
    watch_pgwire(monkeypatch, lambda conn, statement, options: direct.append(statement.sql))
    config = saver.put(config_for("pgwire-fallback", None, ns=""), empty_checkpoint(), {}, {})
    saver.put_writes(config, [("b", 2)], "task-plain", "path")
    # The put's statement and the writes' (the put's twice if an earlier test left this
    # pooled connection without its prepared statements: see the test below).
    assert len(set(direct)) == 2
    through = len(direct)
    # Inside the caller's transaction pgwire leaves the writes to the cursor; the rows are
    # the same. (A str subclass id no longer does: the writes plan makes ids plain text.)
    with transaction.atomic(using=saver.using):
        saver.put_writes(config, [("a", 1)], TaskId("task-sub"), TaskId("path"))
    assert len(direct) == through
    stored = saver.get_tuple(config).pending_writes
    assert sorted(stored) == [("task-plain", "b", 2), ("task-sub", "a", 1)]


PREPARED_NAMES = "SELECT name FROM pg_prepared_statements"


def server_statements(conn) -> set[str]:
    return {row[0] for row in conn.execute(PREPARED_NAMES, prepare=False)}


async def aserver_statements(aconn) -> set[str]:
    return {row[0] async for row in await aconn.execute(PREPARED_NAMES, prepare=False)}


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_rollback_that_drops_the_sessions_statements_costs_one_prepare_not_the_processs(
    request, monkeypatch, flavour
):
    """psycopg sends DEALLOCATE ALL when it rolls back a connection it prepared statements
    on (here the pool taking back one a failed transaction left behind), which drops the
    put's statement too. The next put on that connection prepares it again; it used to be
    taken for a pooler's loss and stop this process preparing on the database for good."""
    from checkpoints.store.postgres.pool import (
        async_statement_connection,
        prepared_statements_allowed,
        statement_connection,
    )

    saver = make_saver(request, "postgres")
    assert saver.pooled
    calls: list[tuple[object, bool]] = []
    watch_pgwire(
        monkeypatch, lambda conn, statement, options: calls.append((conn, options["prepare"]))
    )
    put_name = pgwire.Statement(pgwire.PUT).name.decode()
    config = config_for(f"dropped-{flavour}", None, ns="")

    def fail_a_transaction(conn) -> None:
        # A statement psycopg itself prepares: its rollback then deallocates everything.
        conn.execute("SELECT 1", prepare=True)
        assert put_name in server_statements(conn)
        conn.execute("BEGIN")
        with pytest.raises(psycopg.errors.DivisionByZero):
            conn.execute("SELECT 1 / 0")

    if flavour == "sync":
        head = saver.put(config, empty_checkpoint(), {"step": 1}, {})
        with statement_connection("pg") as (conn, pooled):
            assert pooled and conn is calls[-1][0]  # the pool hands out the one used last
            fail_a_transaction(conn)
        assert put_name not in server_statements(conn)  # the pool rolled it back
        del calls[:]
        head = saver.put(head, empty_checkpoint(), {"step": 2}, {})
    else:

        async def both():
            head = await saver.aput(config, empty_checkpoint(), {"step": 1}, {})
            async with async_statement_connection("pg") as aconn:
                assert aconn is calls[-1][0]
                await aconn.execute("SELECT 1", prepare=True)
                await aconn.execute("BEGIN")
                with pytest.raises(psycopg.errors.DivisionByZero):
                    await aconn.execute("SELECT 1 / 0")
            assert put_name not in await aserver_statements(aconn)
            del calls[:]
            head = await saver.aput(head, empty_checkpoint(), {"step": 2}, {})
            return head, await aserver_statements(aconn), aconn

        head, names, conn = asyncio.run(both())
        assert put_name in names
    # Lost once, prepared again on the same connection; the process still prepares.
    assert calls == [(conn, True), (conn, True)]
    assert prepared_statements_allowed("pg", saver.prepare_mode, conn)
    if flavour == "sync":
        assert put_name in server_statements(conn)
    assert saver.get_tuple(head).metadata["step"] == 2


# A read's rows: every type the store's reads return, NULLs among them, and as many rows
# as the parameter asks (none at all too).
ROWS = pgwire.Statement(
    "SELECT g, %(s)s::text, %(b)s::bytea, %(j)s::jsonb, %(t)s::timestamptz, "
    "array[array[convert_to(%(s)s::text, 'UTF8'), %(b)s::bytea]], NULL::bytea[], "
    "CASE WHEN mod(g, 2) = 0 THEN %(j)s::jsonb END "
    "FROM generate_series(1, %(n)s::int) AS g",
    rows=True,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    s=texts,
    b=st.binary(max_size=300),
    j=st.recursive(
        st.none() | st.booleans() | st.integers(-(10**12), 10**12) | texts,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
        max_leaves=8,
    ),
    n=st.integers(0, 5),
    prepare=st.booleans(),
)
def test_a_reads_rows_are_the_cursors_fetchall(conn, s, b, j, n, prepare):
    params = dict(s=s, b=b, j=Jsonb(j), t=datetime.now(UTC), n=n)
    direct = pgwire.run(conn, ROWS, pgwire.encode(ROWS, params), prepare=prepare)
    with conn.cursor() as cur:
        cur.execute(ROWS.sql, params, prepare=prepare, binary=True)
        fetched = cur.fetchall()
    assert direct == fetched
    assert [tuple(map(type, row)) for row in direct] == [tuple(map(type, r)) for r in fetched]
    assert len(direct) == n
    assert pgwire.usable(conn)


@pytest.mark.parametrize("kept", [False, True])
def test_which_loaders_a_read_loads_with(conn, kept):
    """On a connection others use too (Django's), a loader registered after a read is the
    next read's, as it is a fresh cursor's. A connection only the store uses (``kept``, its
    pool's) keeps the transformer of its first read, and with it that read's loaders, as
    the cursor it kept per statement did, and holds no result between reads."""
    params = dict(s="x", b=b"", j=Jsonb({"k": 1}), t=datetime.now(UTC), n=1)
    encoded = pgwire.encode(ROWS, params)
    assert pgwire.run(conn, ROWS, encoded, prepare=True, kept=kept)[0][3] == {"k": 1}
    set_json_loads(lambda data: ("loaded", bytes(data)), conn)
    again = pgwire.run(conn, ROWS, encoded, prepare=True, kept=kept)
    if kept:
        assert again[0][3] == {"k": 1}
        assert conn._checkpoints_loader.pgresult is None
    else:
        with conn.cursor() as cur:
            assert again == cur.execute(ROWS.sql, params, binary=True).fetchall()
        assert again[0][3] == ("loaded", b'{"k": 1}')
        assert "_checkpoints_loader" not in conn.__dict__


def test_a_call_interrupted_while_its_statement_is_prepared_prepares_it_once(conn):
    """The server may hold a statement whose prepare's answer the caller never read (a
    cancelled task, a timeout): the next call runs it, where preparing it again would be
    refused as a pooler's clash is."""
    statement = pgwire.Statement("SELECT g + 1 FROM generate_series(1, %(n)s::int) g", rows=True)
    encoded = pgwire.encode(statement, {"n": 2})
    wait = conn.wait

    def interrupted(gen, *args, **kwargs):
        wait(gen, *args, **kwargs)  # the prepare is answered, and then the caller is gone
        conn.wait = wait
        raise KeyboardInterrupt

    conn.wait = interrupted
    with pytest.raises(KeyboardInterrupt):
        pgwire.run(conn, statement, encoded, prepare=True)
    assert pgwire.run(conn, statement, encoded, prepare=True) == [(2,), (3,)]
    names = [row[0] for row in conn.execute("SELECT name FROM pg_prepared_statements")]
    assert names == [statement.name.decode()]
    # A prepare the server refuses is not taken for held: the next call prepares it.
    bad = pgwire.Statement("SELECT %(n)s::int / 0 FROM no_such_table", rows=True)
    for _ in range(2):
        with pytest.raises(psycopg.errors.UndefinedTable):
            pgwire.run(conn, bad, pgwire.encode(bad, {"n": 1}), prepare=True)
    assert pgwire.usable(conn)


def test_async_reads_the_same_rows(conn):
    params = dict(s="é", b=b"\x00\xff", j=Jsonb({"a": [1, None]}), t=datetime.now(UTC), n=3)
    with conn.cursor() as cur:
        expected = cur.execute(ROWS.sql, params, binary=True).fetchall()
    assert arun_thrice(ROWS, params) == [expected] * 3


def test_a_failing_read_raises_psycopgs_exception_and_leaves_the_connection_idle(conn):
    statement = pgwire.Statement("SELECT 1 / g FROM generate_series(0, %(n)s::int) g", rows=True)
    for prepare in (False, True):
        with pytest.raises(psycopg.errors.DivisionByZero):
            pgwire.run(conn, statement, pgwire.encode(statement, {"n": 1}), prepare=prepare)
        assert pgwire.usable(conn)
    statement = pgwire.Statement("SELECT g FROM generate_series(1, %(n)s::int) g", rows=True)
    assert pgwire.run(conn, statement, pgwire.encode(statement, {"n": 2}), prepare=True) == [
        (1,),
        (2,),
    ]


def test_a_read_names_no_columns():
    with pytest.raises(ValueError, match="names no columns"):
        pgwire.Statement("SELECT 1", columns=(int,), rows=True)


def test_the_store_reads_through_it_and_falls_back_to_the_cursor_alike(request, monkeypatch):
    """get_tuple and list's pages (sync and async) go out through libpq; inside the caller's
    transaction they take the cursor, and the tuples are the same."""
    saver = make_saver(request, "postgres")
    head = saver.put(config_for("pgwire-reads", None, ns=""), empty_checkpoint(), {"a": 1}, {})
    saver.put_writes(head, [("c", b"\x00")], "task", "path")
    direct: list[str] = []
    watch_pgwire(monkeypatch, lambda conn, statement, options: direct.append(statement.sql))
    root = config_for("pgwire-reads", None, ns="")

    def reads():
        return [saver.get_tuple(root), saver.get_tuple(head), *saver.list(root)]

    async def areads():
        return [
            await saver.aget_tuple(root),
            await saver.aget_tuple(head),
            *[t async for t in saver.alist(root)],
        ]

    through = reads()
    assert {pgwire.GET_LATEST, pgwire.GET_BY_ID} <= set(direct)
    assert any("LIMIT %(limit)s" in sql for sql in direct)
    assert len(direct) == 3
    assert asyncio.run(areads()) == through
    assert len(direct) == 6
    with transaction.atomic(using=saver.using):
        assert reads() == through
    assert len(direct) == 6
    assert through[0].pending_writes == [("task", "c", b"\x00")]
    assert through[0].metadata == {"a": 1}


def test_unpooled_reads_on_djangos_connection_keep_no_transformer(settings):
    """With PG_POOL off the saver reads on Django's connection, which a project may register
    loaders on: each read takes the loaders it has then, and nothing is left on it."""
    from checkpoints.store.orm.ledger import forget_format_checks
    from checkpoints.store.registry import get_saver

    forget_format_checks()
    settings.CHECKPOINTS = {**settings.CHECKPOINTS, "PG_POOL": False}
    saver = get_saver("postgres", using="pg")
    assert not saver.pooled
    head = saver.put(config_for("unpooled-read", None, ns=""), empty_checkpoint(), {"a": 1}, {})
    assert saver.get_tuple(head).metadata == {"a": 1}
    raw = connections["pg"].connection
    assert "_checkpoints_loader" not in raw.__dict__
    set_json_loads(lambda data: {"loaded": True}, raw)
    try:
        assert saver.get_tuple(head).metadata == {"loaded": True}
    finally:
        set_json_loads(json.loads, raw)
