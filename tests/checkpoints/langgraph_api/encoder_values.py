"""Values of every kind LangGraph's server encodes, built alike in our venv and in the
`langgraph dev` venv (standard library, pydantic, LangChain and LangGraph only)."""

from __future__ import annotations

import re
from collections import deque, namedtuple
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from enum import Enum, IntEnum
from ipaddress import IPv4Address, IPv6Network
from pathlib import Path
from uuid import UUID
from zoneinfo import ZoneInfo

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.types import Send
from pydantic import BaseModel


class Colour(Enum):
    RED = "red"


class Level(IntEnum):
    HIGH = 3


Point = namedtuple("Point", "x y")


@dataclass
class Note:
    text: str
    tags: list


class Profile(BaseModel):
    name: str
    joined: datetime


def values() -> dict:
    """One channel per kind (each kind on its own, so a difference names its kind)."""
    call = {"name": "weather", "args": {"city": "Paris"}, "id": "call-1", "type": "tool_call"}
    return {
        "human": HumanMessage("hi", id="m1"),
        "ai": AIMessage("", id="m2", tool_calls=[call], usage_metadata=None),
        "tool": ToolMessage("sunny", tool_call_id="call-1", id="m3"),
        "messages": [HumanMessage("a", id="m4", name="ann"), AIMessage("b", id="m5")],
        "bytes": b"\x00\xffbytes",
        "decimals": [Decimal("1.50"), Decimal("2"), Decimal("-0.25")],
        "delta": timedelta(minutes=1, seconds=30),
        "set": {3},
        "frozenset": frozenset({"x"}),
        "deque": deque([1, 2]),
        "aware": datetime(2026, 1, 2, 3, 4, 5, 600000, tzinfo=UTC),
        "naive": datetime(2026, 1, 2, 3, 4, 5),
        "day": date(2026, 1, 2),
        "clock": time(3, 4, 5),
        "uuid": UUID("12345678-1234-5678-1234-567812345678"),
        "enum": Colour.RED,
        "intenum": Level.HIGH,
        "namedtuple": Point(1, 2),
        "tuple": (1, "two", None),
        "dataclass": Note("n", ["a"]),
        "model": Profile(name="p", joined=datetime(2026, 1, 1, tzinfo=UTC)),
        "address": IPv4Address("10.0.0.1"),
        "network": IPv6Network("2001:db8::/32"),
        "path": Path("/tmp/x"),
        "pattern": re.compile("a+b"),
        "utc": UTC,
        "zone": ZoneInfo("Europe/Paris"),
        "floats": [1.5, float("nan"), float("inf")],
        "nul": "a\x00b",
        "int_keys": {1: "one", 2: {"nested": True}},
        "value_error": ValueError("bad input"),
        "os_error": OSError("a secret path"),
        "send": Send("node", {"x": 1}),
        "plain": {"a": [1, {"b": None}], "c": "d"},
    }
