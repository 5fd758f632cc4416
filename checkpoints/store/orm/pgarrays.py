"""One-dimensional arrays for the PostgreSQL hot paths, sent in binary without psycopg's
generic list adapter.

psycopg adapts a plain list by looking at its elements to choose a dumper, then dumps
each element through it; for the four arrays a put or put_writes sends, that was a quarter
of the saver's CPU in a graph turn (`python -m bench.e2e_split postgres`). The statements
cast each array (``%(blobs)s::bytea[]``), so the element type is known here: these lists
say which it is and are packed straight into PostgreSQL's binary array format. The
parameter goes out untyped (oid 0) and the server takes the cast's type, so the
registration below changes nothing for any other list or connection.
"""

from __future__ import annotations

import struct

import psycopg
from psycopg._encodings import conn_encoding
from psycopg.adapt import Dumper
from psycopg.pq import Format

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
