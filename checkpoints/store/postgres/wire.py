"""The statements a graph step writes, sent straight through libpq, and their arrays.

psycopg's cursor is general: each ``execute`` builds a query object, looks a dumper up
for each parameter, consults its prepared-statement cache and walks its result machinery:
~15-25 us of CPU a statement beside a round trip of ~30 (`bench.per_call postgres`: a
put 235-240 -> 194-217 us, the writes 172-182 -> 144-161; bench/README). A put and the
writes run once each per graph step, so here each is converted to libpq's ``$n`` form
once, its parameters are encoded by their type, and it goes out with
`PGconn.send_query_prepared` (or unnamed where named statements are not allowed), waited
on with psycopg's own generator; a failure raises psycopg's own exception for it. A
connection in a transaction, or not speaking UTF-8, or a parameter of a type not encoded
here, takes the cursor instead (`encode` says so).

The arrays (`TextArray`, `ByteaArray`, `Int4Array`) go in binary without psycopg's
generic list adapter, on this path and the cursor's alike. psycopg adapts a plain list by
looking at its elements to choose a dumper, then dumps each element through it; for the
four arrays a put or put_writes sends, that was a quarter of the saver's CPU in a graph
turn (`python -m bench.e2e_split postgres`). The statements cast each array
(``%(blobs)s::bytea[]``), so the element type is known here: these lists say which it is
and are packed straight into PostgreSQL's binary array format. The parameter goes out
untyped (oid 0) and the server takes the cast's type, so the registration below changes
nothing for any other list or connection.
"""

from __future__ import annotations

import hashlib
import json
import re
import struct
from collections.abc import Callable
from datetime import datetime

import psycopg
from psycopg import errors, generators
from psycopg._encodings import conn_encoding
from psycopg.adapt import Dumper
from psycopg.pq import ExecStatus, Format, TransactionStatus
from psycopg.types.json import Jsonb

# -- arrays -------------------------------------------------------------------------------
_HEADER = struct.Struct("!iiiii")  # ndim, has nulls, element oid, length, lower bound
_LENGTH = struct.Struct("!i")
pack_int4 = struct.Struct("!i").pack
TEXT_OID, BYTEA_OID, INT4_OID = 25, 17, 23


class TextArray(list):
    """A list of str sent as ``text[]``."""


class ByteaArray(list):
    """A list of bytes sent as ``bytea[]``."""


class Int4Array(list):
    """A list of int sent as ``int4[]``."""


def pack_array(items, oid: int, encode) -> bytes:
    """``items`` in PostgreSQL's binary format of a one-dimensional array of ``oid``."""
    parts = [_HEADER.pack(1, int(None in items), oid, len(items), 1)]
    for item in items:
        if item is None:
            parts.append(_LENGTH.pack(-1))
            continue
        data = encode(item)
        parts.append(_LENGTH.pack(len(data)))
        parts.append(data)
    return b"".join(parts)


class _ArrayDumper(Dumper):
    format = Format.BINARY
    oid = 0  # untyped: the statement's cast names the type


class TextArrayDumper(_ArrayDumper):
    def __init__(self, cls, context=None):
        super().__init__(cls, context)
        encoding = conn_encoding(self.connection)
        self._encode = lambda text: text.encode(encoding)

    def dump(self, obj):
        return pack_array(obj, TEXT_OID, self._encode)


class ByteaArrayDumper(_ArrayDumper):
    def dump(self, obj):
        return pack_array(obj, BYTEA_OID, bytes)


class Int4ArrayDumper(_ArrayDumper):
    def dump(self, obj):
        return pack_array(obj, INT4_OID, pack_int4)


psycopg.adapters.register_dumper(TextArray, TextArrayDumper)
psycopg.adapters.register_dumper(ByteaArray, ByteaArrayDumper)
psycopg.adapters.register_dumper(Int4Array, Int4ArrayDumper)


# -- statements ---------------------------------------------------------------------------
_PARAMETER = re.compile(r"%\((\w+)\)s")
# What this module prepared on a connection, kept on the connection itself.
_PREPARED = "_checkpoints_prepared"
_FAILED = (ExecStatus.FATAL_ERROR, ExecStatus.BAD_RESPONSE)
_IDLE = TransactionStatus.IDLE


class Statement:
    """One statement in libpq's ``$n`` form, named on the server by a digest of its text
    (never psycopg's ``_pg3_N``, so the two cannot take each other's name); ``columns``
    turn its first row's text values into Python ones."""

    __slots__ = ("sql", "query", "names", "name", "columns")

    def __init__(self, sql: str, columns: tuple[Callable[[bytes], object], ...] = ()):
        if "%%" in sql:
            raise ValueError("a direct statement holds no literal '%'")
        names: list[str] = []

        def number(match: re.Match) -> str:
            if match.group(1) not in names:
                names.append(match.group(1))
            return f"${names.index(match.group(1)) + 1}"

        self.sql = sql
        self.query = _PARAMETER.sub(number, sql).encode()
        self.names = tuple(names)
        self.name = b"checkpoints_" + hashlib.sha1(self.query).hexdigest()[:24].encode()
        self.columns = columns


def usable(conn) -> bool:
    """Whether ``conn`` can take a statement here: autocommit, idle, in UTF-8."""
    pgconn = conn.pgconn
    return (
        conn.autocommit
        and pgconn.transaction_status == _IDLE
        and pgconn.parameter_status(b"client_encoding") == b"UTF8"
    )


def _text(value: str) -> bytes:
    if "\x00" in value:
        # psycopg's own refusal: libpq would end the text at the NUL and store the rest.
        raise psycopg.DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes")
    return value.encode()


def encode(statement: Statement, params: dict) -> tuple[list, list] | None:
    """The parameter values and formats, or None if one is of a type not encoded here."""
    values: list = []
    formats: list = []
    for name in statement.names:
        value = params[name]
        kind = type(value)
        if kind is str:
            values.append(_text(value))
            formats.append(0)
        elif value is None:
            values.append(None)
            formats.append(0)
        elif kind is bytes:
            values.append(value)
            formats.append(1)
        elif kind is int:
            values.append(str(value).encode())
            formats.append(0)
        elif kind is TextArray:
            # Binary arrays carry lengths: a NUL reaches the server, which refuses it.
            values.append(pack_array(value, TEXT_OID, str.encode))
            formats.append(1)
        elif kind is ByteaArray:
            values.append(pack_array(value, BYTEA_OID, bytes))
            formats.append(1)
        elif kind is Int4Array:
            values.append(pack_array(value, INT4_OID, pack_int4))
            formats.append(1)
        elif kind is Jsonb:
            # JSON escapes a NUL; the server refuses "\u0000" in jsonb as it would anyway.
            values.append((value.dumps or json.dumps)(value.obj).encode())
            formats.append(0)
        elif kind is datetime and value.tzinfo is not None:
            values.append(value.isoformat().encode())
            formats.append(0)
        else:
            return None
    return values, formats


def _prepare_or_send(conn, statement: Statement, values, formats, prepare: bool) -> bool:
    """Send the statement; True when it must be prepared first (the caller waits for that)."""
    pgconn = conn.pgconn
    if not prepare:
        pgconn.send_query_params(statement.query, values, None, formats)
        return False
    prepared = conn.__dict__.get(_PREPARED)
    if prepared is not None and statement.name in prepared:
        pgconn.send_query_prepared(statement.name, values, formats)
        return False
    pgconn.send_prepare(statement.name, statement.query)
    return True


def _prepared(conn, statement: Statement) -> None:
    conn.__dict__.setdefault(_PREPARED, set()).add(statement.name)


def _check(conn, results: list) -> None:
    for result in results:
        if result.status in _FAILED:
            raise errors.error_from_result(result, encoding=conn.info.encoding)


def _first_row(conn, statement: Statement, results: list):
    _check(conn, results)
    if not statement.columns:
        return None
    result = results[-1]
    if not result.ntuples:
        return None
    return tuple(
        None if (raw := result.get_value(0, i)) is None else load(raw)
        for i, load in enumerate(statement.columns)
    )


def run(conn, statement: Statement, encoded: tuple[list, list], *, prepare: bool):
    """Run ``statement`` with `encode`'s values on ``conn``; its first row (or None)."""
    values, formats = encoded
    with conn.lock:
        if _prepare_or_send(conn, statement, values, formats, prepare):
            _check(conn, conn.wait(generators.execute(conn.pgconn)))
            _prepared(conn, statement)
            conn.pgconn.send_query_prepared(statement.name, values, formats)
        return _first_row(conn, statement, conn.wait(generators.execute(conn.pgconn)))


async def arun(conn, statement: Statement, encoded: tuple[list, list], *, prepare: bool):
    """`run` on an AsyncConnection."""
    values, formats = encoded
    async with conn.lock:
        if _prepare_or_send(conn, statement, values, formats, prepare):
            _check(conn, await conn.wait(generators.execute(conn.pgconn)))
            _prepared(conn, statement)
            conn.pgconn.send_query_prepared(statement.name, values, formats)
        return _first_row(conn, statement, await conn.wait(generators.execute(conn.pgconn)))


def forget_prepared(conn) -> None:
    """The server no longer holds (or never held) what this connection prepared here."""
    conn.__dict__.pop(_PREPARED, None)
