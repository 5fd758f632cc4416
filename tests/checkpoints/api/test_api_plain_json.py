"""Channel values shown by the API: the codec's envelopes made plain."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from enum import Enum

from langchain_core.messages import AIMessage

from checkpoints.codec.render import plain_mapping, readable, render, to_plain


class Colour(Enum):
    RED = "red"


@dataclass
class Point:
    x: int
    y: tuple


class Opaque:
    pass


def test_plain_forms():
    value = {
        "tuple": (1, "a"),
        "set": {3},
        "when": datetime(2024, 3, 1, 12, 0, tzinfo=UTC),
        "day": date(2024, 3, 1),
        "id": uuid.UUID(int=1),
        "money": Decimal("1.10"),
        "big": 2**80,
        "colour": Colour.RED,
        "point": Point(1, (2, 3)),
        "int_keys": {1: "one"},
    }
    plain = to_plain(value)
    assert plain["tuple"] == [1, "a"]
    assert plain["set"] == [3]
    assert plain["when"] == "2024-03-01T12:00:00+00:00"
    assert plain["day"] == "2024-03-01"
    assert plain["id"] == str(uuid.UUID(int=1))
    assert plain["money"] == "1.10"
    assert plain["big"] == 2**80
    assert plain["colour"] == "red"
    assert plain["point"] == {"x": 1, "y": [2, 3]}
    assert plain["int_keys"] == {"$type": "dict", "items": [[1, "one"]]}
    json.dumps(plain)


def test_envelopes_without_plain_form_are_kept():
    assert to_plain(b"\x00\x01") == {"$type": "bytes", "b64": "AAE="}
    assert to_plain(timedelta(seconds=5))["$type"] == "timedelta"


def test_langchain_message_is_langchain_json():
    plain = to_plain(AIMessage(content="hi", id="m1"))
    assert plain["lc"] == 1 and plain["type"] == "constructor"
    assert plain["id"][-1] == "AIMessage"
    assert plain["kwargs"]["content"] == "hi"


def test_unencodable_value_is_named_not_raised():
    values = plain_mapping({"ok": 1, "bad": Opaque(), "nan": float("nan")}, path="values")
    assert values["ok"] == 1
    assert values["bad"]["$type"] == "unrenderable"
    assert values["bad"]["type"].endswith("Opaque")
    assert "values.bad" in values["bad"]["reason"]
    assert values["nan"]["$type"] == "unrenderable"
    # Only the part at fault is marked; its neighbours stay plain.
    nested = to_plain({"items": [1, Opaque(), (2, 3)], "when": date(2024, 1, 2)})
    assert nested["items"][0] == 1 and nested["items"][2] == [2, 3]
    assert nested["items"][1]["$type"] == "unrenderable"
    assert nested["when"] == "2024-01-02"


def test_admin_and_api_share_one_renderer_in_two_forms():
    value = {"when": date(2024, 1, 2), "pair": (1, 2), "odd": Opaque()}
    plain, stored = render(value, plain=True), render(value, plain=False)
    assert to_plain(value) == plain and readable(value) == stored
    assert plain["when"] == "2024-01-02"
    assert stored["when"] == {"$type": "date", "v": "2024-01-02"}
    assert plain["pair"] == [1, 2]
    assert stored["pair"] == {"$type": "tuple", "items": [1, 2]}
    assert plain["odd"]["$type"] == "unrenderable"
    assert stored["odd"].startswith("<tests.checkpoints.api.test_api_plain_json.Opaque object")
    # Keys a JSON object cannot hold keep the codec's pairs form in both.
    assert render({1: Opaque()}, plain=False)["$type"] == "dict"
    assert to_plain({1: Opaque()})["$type"] == "dict"
