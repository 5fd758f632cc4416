"""The hot paths' arrays go to PostgreSQL in binary without psycopg's list adapter; what
the server receives must be exactly what a plain list would have given."""

from __future__ import annotations

import psycopg
import pytest
from django.db import connections

from checkpoints.store.postgres.pool import _conninfo
from checkpoints.store.postgres.sql import ByteaArray, Int4Array, TextArray, pack_params

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(databases=["default", "pg"])]

TEXTS = ["messages", "", "naïve ✓ 𝄞", 'a,b{c}"d\\e', "x" * 70_000]
BLOBS = [b"", b"\x00\xff" * 10, b"\\x00", bytes(range(256)) * 300]
INTS = [0, -1, -3, 2**31 - 1, -(2**31)]


@pytest.mark.parametrize("prepare", [False, True])
def test_arrays_arrive_as_a_plain_list_would(prepare):
    with psycopg.connect(_conninfo(connections["pg"].settings_dict), autocommit=True) as conn:
        sql = "SELECT %s::text[], %s::bytea[], %s::int[], %s::text[], %s::bytea[]"
        ours = conn.execute(
            sql,
            (TextArray(TEXTS), ByteaArray(BLOBS), Int4Array(INTS), TextArray(), ByteaArray()),
            prepare=prepare,
        ).fetchone()
        plain = conn.execute(sql, (TEXTS, BLOBS, INTS, [], []), prepare=prepare).fetchone()
    assert ours == plain == (TEXTS, BLOBS, INTS, [], [])


def test_a_null_element_is_sent_as_null():
    with psycopg.connect(_conninfo(connections["pg"].settings_dict), autocommit=True) as conn:
        row = conn.execute(
            "SELECT %s::text[], %s::bytea[]", (TextArray(["a", None]), ByteaArray([None]))
        ).fetchone()
    assert row == (["a", None], [None])


@pytest.mark.parametrize("encoding", ["UTF8", "LATIN1"])
def test_arrays_packed_ahead_arrive_as_a_plain_list_would(encoding):
    # An import's read-ahead packs the arrays in its own thread (`pack_params`), as UTF-8;
    # a connection in another encoding packs the text again in its own.
    texts = [t for t in TEXTS if encoding == "UTF8" or t.isascii()] + ["café"]
    params = pack_params(
        {"t": TextArray(texts), "b": ByteaArray(BLOBS), "i": Int4Array(INTS), "e": TextArray()}
    )
    assert all(value.packed is not None for value in params.values())
    with psycopg.connect(_conninfo(connections["pg"].settings_dict), autocommit=True) as conn:
        conn.execute(f"SET client_encoding = {encoding}")
        row = conn.execute(
            "SELECT %(t)s::text[], %(b)s::bytea[], %(i)s::int[], %(e)s::text[]", params
        ).fetchone()
    assert row == (texts, BLOBS, INTS, [])
