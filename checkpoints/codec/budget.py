"""A bound on the objects decoding one value may build, checked before any is built.

Byte limits (``CODEC_MAX_BYTES``, ``MAX_CHECKPOINT_BYTES``) bound what a value's bytes may
be, not what they build: msgpack's ``0x80`` is one byte and an empty dict of 64, so an
array of n empty maps makes ~72 bytes of objects per byte read (a 4 KiB zstd file line
grows a process by gigabytes). Before a value is unpacked, its msgpack headers are walked
(string, binary and foreign ext payloads skipped by their stated lengths, LangGraph's ext
payloads walked, since the reader unpacks them) to estimate the memory its objects take,
and the value is refused once the estimate passes:

* ``OBJECT_BUDGET_FACTOR`` x ``CODEC_MAX_BYTES`` for one value, and
* ``OBJECT_BUDGET_FACTOR`` x ``MAX_CHECKPOINT_BYTES`` for the values read inside one
  :class:`ObjectBudget`: one checkpoint of an import (an export file's record, a LangGraph
  table's rows). The store's own reads apply the per-value bound only (a row of many
  values, each under it, is bounded by 72 x its decompressed bytes alone), and its
  serializer refuses to store a value its read would refuse.

No byte builds more than `MAX_COST_PER_BYTE` in the estimate, so a value no longer than
``limit / MAX_COST_PER_BYTE`` (3.7 MB at the defaults) is never walked: the store's reads
of ordinary values pay one comparison. JSON text gets the same bound from a count of its
structural characters (``{ [ , :``), made at C speed.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any

from checkpoints.codec.failures import limit_text
from checkpoints.errors import UnreadableValue

# A value may build this many times the bytes a value (or a checkpoint) may hold. The
# estimate of real LangGraph values runs at 2-8x their msgpack size (message lists,
# documents, number lists); a value of nothing but empty containers runs at 72x.
OBJECT_BUDGET_FACTOR = 4

# What the estimate charges, near CPython's sizes on 64-bit builds.
CONTAINER = 64  # an empty dict (64) or list (56)
ARRAY_SLOT = 8  # a list's pointer per item
MAP_PAIR = 40  # a dict's entry and index per key
OBJECT_HEAD = 48  # a str or bytes object, before its payload
NUMBER = 32  # an int outside the small-int cache (28-32), a float (24)
EXT = 128  # the object an ext payload is rebuilt into, beyond its payload
# The most any byte adds: ``0x80`` (an empty map) as an array item, 64 + 8.
MAX_COST_PER_BYTE = CONTAINER + ARRAY_SLOT

# LangGraph's ext codes whose payload the reader unpacks (msgpack_read.SafeExtHook).
_WALKED_EXT = frozenset(range(8))


class ObjectBudgetExceeded(UnreadableValue):
    """A value whose decoding would build more than the object budget allows."""

    code = "object_budget"


Limits = Mapping[str, Any] | None
"""``CODEC_MAX_BYTES`` and ``MAX_CHECKPOINT_BYTES`` as given (the remote saver holds the
service's), or None: this process's CHECKPOINTS settings, read at each call."""


def setting(key: str) -> Any:
    """``key`` of this process's CHECKPOINTS settings, imported at the first call: the codec
    given its limits (the remote saver's reader) needs no Django, and a worker has none."""
    return _reader()(key)


@functools.cache
def _reader() -> Callable[[str], Any]:
    # Once: an import statement run at each call cost 2.1 us of a setting's 2.3 (seven a
    # read of a checkpoint on PostgreSQL, bench/README "Issue 56: the floor pipelined").
    from checkpoints.conf import setting as read

    return read


def _setting(key: str, limits: Limits) -> Any:
    return limits[key] if limits is not None else setting(key)


def value_limit(limits: Limits = None) -> int | None:
    """Estimated bytes of objects one value may build (None: unbounded)."""
    limit = _setting("CODEC_MAX_BYTES", limits)
    return None if limit is None else OBJECT_BUDGET_FACTOR * limit


def checkpoint_limit(limits: Limits = None) -> int | None:
    """Estimated bytes of objects the values of one checkpoint may build together."""
    limit = _setting("MAX_CHECKPOINT_BYTES", limits)
    return None if limit is None else OBJECT_BUDGET_FACTOR * limit


# -- the msgpack walk ---------------------------------------------------------------------
# Per header byte: (cost of the item, bytes after the header byte) for fixed-size scalars.
_FIXED: dict[int, tuple[int, int]] = {
    0xC0: (0, 0),  # nil
    0xC2: (0, 0),  # false
    0xC3: (0, 0),  # true
    0xCA: (NUMBER, 4),  # float32
    0xCB: (NUMBER, 8),  # float64
    0xCC: (0, 1),  # uint8 (<= 255: cached ints, mostly)
    0xCD: (NUMBER, 2),
    0xCE: (NUMBER, 4),
    0xCF: (NUMBER, 8),
    0xD0: (NUMBER, 1),
    0xD1: (NUMBER, 2),
    0xD2: (NUMBER, 4),
    0xD3: (NUMBER, 8),
}
for _b in range(0x00, 0x80):  # positive fixint: the small-int cache
    _FIXED[_b] = (0, 0)
for _b in range(0xE0, 0x100):  # negative fixint
    _FIXED[_b] = (NUMBER, 0)
_FIXED[0x80] = (CONTAINER, 0)  # empty map
_FIXED[0x90] = (CONTAINER, 0)  # empty array
_FIXED[0xA0] = (0, 0)  # empty str: a singleton

# A run of items with the same header is measured at C speed, not in a Python loop per
# item (number lists, bombs of repeated empty containers): one-byte items of one cost by a
# regex, fixed-size scalars by stepping over the data in strides of the item's size.
_ONE_BYTE_RUNS: dict[int, re.Pattern[bytes]] = {}
for _cost in {cost for cost, width in _FIXED.values() if width == 0}:
    _same = bytes(b for b, (c, w) in _FIXED.items() if w == 0 and c == _cost)
    _pattern = re.compile(b"[" + b"".join(b"\\x%02x" % c for c in _same) + b"]+")
    _ONE_BYTE_RUNS.update(dict.fromkeys(_same, _pattern))
_STRIDE = 512  # items looked at per slice of a fixed-size run


def _run_length(view: bytes, pos: int, end: int, head: int, size: int, most: int) -> int:
    """How many items of ``size`` bytes with header byte ``head`` start at ``pos`` (at most
    ``most``)."""
    if size == 1:
        return min(_ONE_BYTE_RUNS[head].match(view, pos, end).end() - pos, most)
    mark = bytes((head,))
    count = 0
    while count < most:
        at = pos + count * size
        seg = view[at : min(end, at + size * min(_STRIDE, most - count)) : size]
        same = len(seg) - len(seg.lstrip(mark))
        count += same
        if same < len(seg) or not seg:
            break
    return min(count, most)


def msgpack_cost(data: bytes, limit: int) -> int:
    """Estimated bytes of objects unpacking ``data`` builds; stops as soon as it passes
    ``limit`` (the result is then over ``limit``, not the whole estimate).

    Malformed or truncated data ends the walk with what was counted: unpacking refuses it.
    """
    cost = 0
    pos = 0
    end = len(data)
    items = 1  # still to read in the current document
    # Enclosing documents while an ext payload is walked: (their end, their items left).
    outer: list[tuple[int, int]] = []
    fixed = _FIXED
    view = data
    while True:
        if items == 0 or pos >= end:
            if not outer:
                return cost
            pos = end
            end, items = outer.pop()
            continue
        if cost > limit:
            return cost
        b = view[pos]
        scalar = fixed.get(b)
        if scalar is not None:
            each, size = scalar[0], scalar[1] + 1
            nxt = pos + size
            if nxt < end and view[nxt] == b:
                most = items if not each else min(items, (limit - cost) // each + 1)
                count = _run_length(view, pos, end, b, size, most)
            else:
                count = 1
            pos += count * size
            items -= count
            cost += count * each
            continue
        items -= 1
        if b <= 0x8F:  # fixmap
            n, pos = b & 0x0F, pos + 1
        elif b <= 0x9F:  # fixarray
            n, pos = -(b & 0x0F), pos + 1
        elif b <= 0xBF:  # fixstr
            pos += 1 + (b & 0x1F)
            cost += OBJECT_HEAD + (b & 0x1F)
            continue
        elif b in (0xC4, 0xC5, 0xC6, 0xD9, 0xDA, 0xDB):  # bin / str 8, 16, 32
            width = 1 << ((b - 0xC4) if b < 0xD9 else (b - 0xD9))
            length = int.from_bytes(view[pos + 1 : pos + 1 + width], "big")
            pos += 1 + width + length
            cost += OBJECT_HEAD + length
            continue
        elif b in (0xDC, 0xDD):  # array 16, 32
            width = 2 if b == 0xDC else 4
            n, pos = -int.from_bytes(view[pos + 1 : pos + 1 + width], "big"), pos + 1 + width
        elif b in (0xDE, 0xDF):  # map 16, 32
            width = 2 if b == 0xDE else 4
            n, pos = int.from_bytes(view[pos + 1 : pos + 1 + width], "big"), pos + 1 + width
        else:  # ext: fixext 1-16 (0xD4-0xD8), ext 8, 16, 32 (0xC7-0xC9)
            if 0xD4 <= b <= 0xD8:
                length, head = 1 << (b - 0xD4), 1
            elif 0xC7 <= b <= 0xC9:
                width = 1 << (b - 0xC7)
                length = int.from_bytes(view[pos + 1 : pos + 1 + width], "big")
                head = 1 + width
            else:  # 0xC1, never used: unpacking refuses it
                return cost
            code = view[pos + head] if pos + head < end else -1
            start = pos + head + 1
            pos = start + length
            if code in _WALKED_EXT and pos <= end:
                cost += EXT
                outer.append((end, items))
                end, items, pos = pos, 1, start
            else:
                cost += OBJECT_HEAD + length
            continue
        # A container of |n| items (n < 0: an array); each item takes a byte at least, so
        # a count past the data's end is a truncated value, which unpacking refuses.
        if n < 0:
            n = -n
            if n > end - pos:
                return cost
            cost += CONTAINER + ARRAY_SLOT * n
            items += n
        else:
            if 2 * n > end - pos:
                return cost
            cost += CONTAINER + MAP_PAIR * n
            items += 2 * n


# -- the JSON estimate -------------------------------------------------------------------
def json_cost(data: bytes | str) -> int:
    """Estimated bytes of objects ``json.loads`` builds from ``data``: every ``{``/``[`` a
    container, every ``,``/``:`` an item (the text's own bytes for its strings). Characters
    inside strings count too: an over-estimate, by at most 72x the text's length."""
    if isinstance(data, str):
        opens = data.count("{") + data.count("[")
        items = data.count(",") + data.count(":")
    else:
        opens = data.count(b"{") + data.count(b"[")
        items = data.count(b",") + data.count(b":")
    return len(data) + CONTAINER * opens + (ARRAY_SLOT + NUMBER) * items


# -- charging ----------------------------------------------------------------------------
class ObjectBudget:
    """The estimated bytes of objects the values read inside ``with`` may build together.

    ``raw_bytes``: the values' encoded bytes together, when known before the first is read;
    if even 72 times that fits the budget no value is walked for it (values past the
    per-value bound still are).
    """

    __slots__ = ("limit", "left", "exact", "_token")

    def __init__(self, raw_bytes: int | None = None) -> None:
        self.limit = checkpoint_limit()
        self.left = self.limit
        self.exact = self.limit is not None and (
            raw_bytes is None or raw_bytes * MAX_COST_PER_BYTE > self.limit
        )

    def __enter__(self) -> ObjectBudget:
        self._token = _CURRENT.set(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _CURRENT.reset(self._token)


_CURRENT: ContextVar[ObjectBudget | None] = ContextVar("object_budget", default=None)


def charge_msgpack(data: bytes, limits: Limits = None) -> None:
    """Refuse msgpack ``data`` whose objects would pass the per-value bound or what is left
    of the enclosing :class:`ObjectBudget`; else charge it there."""
    _charge(data, msgpack_cost, limits)


def charge_json(data: bytes | str, limits: Limits = None) -> None:
    """As :func:`charge_msgpack`, for JSON text."""
    _charge(data, lambda text, _limit: json_cost(text), limits)


def _charge(data, measure, limits: Limits) -> None:
    budget = _CURRENT.get()
    per_value = value_limit(limits)
    bound = len(data) * MAX_COST_PER_BYTE
    if (budget is None or not budget.exact) and (per_value is None or bound <= per_value):
        return  # nothing this long can pass either bound
    limit = per_value if per_value is not None else bound
    if budget is not None and budget.exact:
        limit = min(limit, budget.left)
    cost = measure(data, limit)
    if per_value is not None and cost > per_value:
        raise _refusal(cost, "CODEC_MAX_BYTES", per_value, "one value", limits)
    if budget is not None and budget.exact:
        if cost > budget.left:
            raise _refusal(
                budget.limit - budget.left + cost,
                "MAX_CHECKPOINT_BYTES",
                budget.limit,
                "one checkpoint's values together",
                limits,
            )
        budget.left -= cost


class UnreadableWhenStored(ValueError):
    """A value to store whose read would be refused by the object budget (the saver names
    where the value was)."""


def refuse_unreadable(data: bytes, *, as_json: bool = False, limits: Limits = None) -> None:
    """Refuse to store msgpack (or, ``as_json``, JSON) ``data`` that one value's read would
    refuse: a stored value never trips its own read's bound."""
    per_value = value_limit(limits)
    if per_value is None or len(data) * MAX_COST_PER_BYTE <= per_value:
        return
    cost = json_cost(data) if as_json else msgpack_cost(data, per_value)
    if cost > per_value:
        raise UnreadableWhenStored(
            f"reading it back would build more than {per_value} bytes of objects (estimated "
            f"{cost} so far), the most one value may build: {_limit_of('CODEC_MAX_BYTES', limits)}"
        )


def _limit_of(key: str, limits: Limits) -> str:
    return f"{OBJECT_BUDGET_FACTOR} x {limit_text(key, _setting(key, limits))}"


def _refusal(cost: int, key: str, limit: int, scope: str, limits: Limits) -> ObjectBudgetExceeded:
    return ObjectBudgetExceeded(
        f"decoding it would build more than {limit} bytes of objects (estimated {cost} so "
        f"far), the most {scope} may build: {_limit_of(key, limits)}",
        field=key,
    )
