"""The faithful JSON codec: same types back, refusals that name the path, hostile input."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import os
import zoneinfo
from collections import OrderedDict
from datetime import UTC, date, datetime, time, timedelta, timezone, tzinfo
from decimal import Decimal
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.prompts import ChatPromptTemplate
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, Interrupt, Overwrite, Send, TimeoutPolicy, interrupt
from pydantic import BaseModel, TypeAdapter

from checkpoints.codec import (
    CheckpointedException,
    FaithfulJSONCodec,
)

from . import codec_samples as samples
from .codec_helpers import (
    ALLOWED,
    assert_same,
    codec,
    fast,
    read_refusal,
    refusal,
    round_trip,
    store_settings,
)
from .codec_samples import Box, Color, Level, Loose, Pair, Perm, Point, Profile, StepFailed

pytestmark = pytest.mark.usefixtures("allow_samples")


# --- hypothesis strategies -----------------------------------------------------------------------

offsets = st.timedeltas(min_value=timedelta(hours=-23, minutes=-59), max_value=timedelta(hours=23))
fixed_zones = st.one_of(
    st.builds(timezone, offsets),
    st.builds(timezone, offsets, st.text(max_size=8)),
    st.just(UTC),
)
any_zone = st.one_of(st.none(), fixed_zones, st.timezones())


def _with_fold(value: datetime | time, fold: int) -> datetime | time:
    return value.replace(fold=fold)


aware_datetimes = st.builds(_with_fold, st.datetimes(timezones=any_zone), st.integers(0, 1))
clock_times = st.builds(_with_fold, st.times(timezones=any_zone), st.integers(0, 1))
decimals = st.one_of(
    st.decimals(allow_nan=False, allow_infinity=False),
    st.builds(
        lambda sign, digits, exponent: Decimal((sign, tuple(digits), exponent)),
        st.integers(0, 1),
        st.lists(st.integers(0, 9), min_size=1, max_size=40),
        st.integers(-(10**6), 10**6),
    ),
)
members = st.sampled_from([*Color, *Level, Perm.READ, Perm.READ | Perm.WRITE])
hashable_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(10**600), max_value=10**600),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(),
    st.binary(max_size=20),
    decimals,
    st.uuids(),
    st.dates(),
    aware_datetimes,
    clock_times,
    st.timedeltas(),
    members,
    st.builds(Point, st.integers(), st.integers(), st.text(max_size=5)),
)
hashables = st.recursive(
    hashable_leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(tuple), st.frozensets(inner, max_size=3)
    ),
    max_leaves=6,
)


def _collide(mapping: dict[str, Any], tag: str) -> dict[str, Any]:
    return {**mapping, "$type": tag}


values = st.recursive(
    st.one_of(hashables, st.binary(max_size=20).map(bytearray), fixed_zones, st.timezones()),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=4).map(tuple),
        st.sets(hashables, max_size=4),
        st.frozensets(hashables, max_size=4),
        st.dictionaries(st.text(max_size=6), inner, max_size=4),
        st.dictionaries(hashables, inner, max_size=3),
        st.builds(
            _collide,
            st.dictionaries(st.text(max_size=4), inner, max_size=2),
            st.sampled_from(["datetime", "dict", "exception", "lc", 3]),
        ),
        st.builds(Profile, name=st.text(max_size=5), when=aware_datetimes, payload=inner),
        st.builds(Box, inner, st.lists(inner, max_size=2)),
        st.builds(Pair, inner, inner),
        st.builds(Send, st.text(max_size=5), inner),
        st.builds(Interrupt, inner, st.text(max_size=8)),
        st.builds(Command, update=inner, resume=inner),
    ),
    max_leaves=25,
)


@fast
@given(values)
def test_every_supported_value_comes_back_as_the_same_type_and_value(value):
    assert_same(value, round_trip(value))


@fast
@given(hashables)
def test_hashable_values_come_back_in_sets_and_as_dict_keys(key):
    value = {key: [key], "members": {key}, "frozen": frozenset({key})}
    assert_same(value, round_trip(value))


def test_a_set_of_str_is_the_same_bytes_in_every_process():
    """str hashes are salted per process, so a set of str iterates in another order in
    another process: stored as iterated, one value was two different byte strings (a put
    through the store service against the same put in process, on Redis)."""
    import subprocess
    import sys

    script = (
        "import sys; from checkpoints.codec import FaithfulJSONCodec; "
        "sys.stdout.write(FaithfulJSONCodec().dumps_typed("
        "{'s': set('abcdefgh'), 'f': frozenset('abcdefgh'), 'mixed': {1, 2}})[1].decode())"
    )
    stored = {
        subprocess.run(
            [sys.executable, "-c", script],
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in range(3)
    }
    assert len(stored) == 1
    assert '"items":["a","b","c","d","e","f","g","h"]' in stored.pop()
    # Items that do not compare keep the set's own order, and still round-trip.
    assert_same({"odd": {1, "a", None}}, round_trip({"odd": {1, "a", None}}))


# --- plain JSON and the envelope -----------------------------------------------------------------


def test_plain_json_passes_through_as_itself():
    value = {"a": [1, "x", None, True, 2.5], "b": {"c": -(10**30)}}
    assert codec.dumps_typed(value) == (
        "json",
        b'{"a":[1,"x",null,true,2.5],"b":{"c":-1000000000000000000000000000000}}',
    )
    assert_same(value, round_trip(value))


def test_serializer_protocol_and_untyped_pair():
    assert isinstance(codec, SerializerProtocol)
    value = {"when": date(2024, 2, 29), "items": (1, 2)}
    assert_same(value, codec.loads(codec.dumps(value)))


def test_numbers_keep_their_types():
    value = [1, True, 1.0, Decimal("1"), Decimal("1.000"), -0.0, 0, False]
    assert_same(value, round_trip(value))
    assert_same(
        {1: "int", 2.5: "float", False: "bool", None: "none"},
        round_trip({1: "int", 2.5: "float", False: "bool", None: "none"}),
    )


def test_integers_of_any_size():
    for number in (10**4290, -(10**4400), 2**100_000, -(2**63)):
        assert_same(number, round_trip(number))


def test_top_level_bytes_and_lone_surrogates():
    assert_same(b"\x00\xff", round_trip(b"\x00\xff"))
    assert_same(bytearray(b"abc"), round_trip(bytearray(b"abc")))
    # No UTF-8 form: refused naming the path, as on every provider (never stored as "?").
    error = refusal({"notes": ["fine", "broken \ud800 half"]}, path="channel_values")
    assert error.field == "channel_values.notes[1]"
    assert "lone surrogate" in str(error)
    assert_same("fine \u00e9 \U0001f600", round_trip("fine \u00e9 \U0001f600"))


def test_decimal_specials_survive():
    assert round_trip(Decimal("-Infinity")) == Decimal("-Infinity")
    assert round_trip(Decimal("NaN")).is_nan()
    assert_same(Decimal("-0E-7"), round_trip(Decimal("-0E-7")))


@pytest.mark.parametrize(
    "value",
    [
        {"$type": "datetime", "v": "2024-01-01T00:00:00"},
        {"$type": "exception", "id": ["os", "system"], "message": "x"},
        {"$type": "dict", "items": [[1, 2]]},
        {"$type": "model", "class": "os:system", "fields": {}},
        [{"$type": None}],
        {"nested": {"$type": "bytes", "b64": "aGk="}},
    ],
)
def test_a_dict_shaped_like_an_envelope_stays_a_plain_dict(value):
    assert_same(value, round_trip(value))


# --- dates, times and zones ----------------------------------------------------------------------


def test_fold_keeps_the_second_wall_clock_hour_in_its_zone():
    paris = zoneinfo.ZoneInfo("Europe/Paris")
    first = datetime(2024, 10, 27, 2, 30, tzinfo=paris)
    second = first.replace(fold=1)
    back_first, back_second = round_trip([first, second])
    assert back_first.utcoffset() == timedelta(hours=2)
    assert back_second.utcoffset() == timedelta(hours=1)
    assert back_second.tzinfo is paris
    summer = round_trip(datetime(2024, 1, 1, tzinfo=paris)) + timedelta(days=200)
    assert summer.utcoffset() == timedelta(hours=2)  # the zone's rules still apply


def test_time_keeps_fold_and_fixed_offset_name():
    value = time(1, 30, 0, 5, tzinfo=timezone(timedelta(hours=-3, seconds=7), "Somewhere"), fold=1)
    back = round_trip(value)
    assert_same(value, back)
    assert back.tzname() == "Somewhere"


def test_timezone_name_is_kept_and_unnamed_stays_unnamed():
    named = timezone(timedelta(hours=5, minutes=30), "IST")
    unnamed = timezone(timedelta(hours=5, minutes=30))
    assert round_trip(named).tzname(None) == "IST"
    assert round_trip(unnamed).tzname(None) == "UTC+05:30"
    assert round_trip(UTC) is UTC


def test_pydantic_fixed_offsets_read_back_as_datetime_timezone():
    parsed = TypeAdapter(datetime).validate_python("2024-05-01T10:00:00+05:30")
    assert type(parsed.tzinfo).__name__ == "TzInfo"
    back = round_trip({"at": parsed, "zone": parsed.tzinfo})
    assert type(back["at"].tzinfo) is timezone and type(back["zone"]) is timezone
    assert back["at"] == parsed and back["at"].utcoffset() == timedelta(hours=5, minutes=30)
    assert back["at"].tzname() == parsed.tzname() == back["zone"].tzname(None)
    utc = TypeAdapter(datetime).validate_python("2024-05-01T10:00:00Z")
    assert round_trip(utc).tzname() == "UTC"


def test_a_zone_the_host_lacks_fails_the_read_naming_the_key():
    error = read_refusal(
        {
            "$type": "datetime",
            "v": "2024-01-01T00:00:00",
            "tz": {"$type": "zoneinfo", "key": "Mars/Olympus_Mons"},
        }
    )
    assert "Mars/Olympus_Mons" in str(error)


# --- models, dataclasses, enums ------------------------------------------------------------------


def test_models_keep_fields_set_extras_and_private_state():
    profile = Profile(name="ada")
    profile._note = "private"
    loose = Loose(count=2, colour="blue", seen=(1, 2))
    back_profile, back_loose = round_trip([profile, loose])
    assert_same(profile, back_profile)
    assert back_profile.model_dump(exclude_unset=True) == {"name": "ada"}
    assert back_profile._note == "private"
    assert_same(loose, back_loose)
    assert back_loose.model_extra == {"colour": "blue", "seen": (1, 2)}


def test_dataclass_named_tuple_and_enum_round_trip():
    value = [Point(1, 2), Box(Color.PAIR, tags=[Level.HIGH]), Pair(left=Perm.READ | Perm.WRITE)]
    assert_same(value, round_trip(value))


def test_a_field_added_since_the_write_takes_its_default():
    stored = {"$type": "dataclass", "class": f"{samples.__name__}:Box", "fields": {"content": 1}}
    assert round_trip_payload(stored) == Box(1, [])
    stored = {"$type": "namedtuple", "class": f"{samples.__name__}:Pair", "fields": {"left": 1}}
    assert round_trip_payload(stored) == Pair(1, None)


def round_trip_payload(payload: Any) -> Any:
    return codec.loads_typed(("json", json.dumps(payload).encode()))


# --- LangChain and LangGraph ---------------------------------------------------------------------


def test_langchain_messages_documents_and_prompts():
    value = {
        "messages": [
            SystemMessage("be brief"),
            HumanMessage("hi", id="h1"),
            AIMessage(
                content="calling",
                tool_calls=[{"name": "lookup", "args": {"q": "x", "n": 2}, "id": "call-1"}],
                additional_kwargs={
                    "when": datetime(2024, 1, 1, tzinfo=UTC),
                    "ids": (1, 2),
                },
            ),
            ToolMessage(content="found", tool_call_id="call-1", artifact={"raw": b"\x01"}),
        ],
        "doc": Document(page_content="text", metadata={"source": "a.txt", "page": 3}),
        "prompt": ChatPromptTemplate.from_messages(
            [("system", "You are {role}"), ("human", "{q}")]
        ),
    }
    back = round_trip(value)
    assert back == value
    for original, revived in zip(value["messages"], back["messages"], strict=True):
        assert type(revived) is type(original)
    assert_same(value["messages"][2].additional_kwargs, back["messages"][2].additional_kwargs)
    assert back["messages"][2].tool_calls == value["messages"][2].tool_calls
    assert back["prompt"].invoke({"role": "a pirate", "q": "why"}) == value["prompt"].invoke(
        {"role": "a pirate", "q": "why"}
    )


def test_langgraph_types():
    value = [
        Send("node", {"x": (1, 2)}),
        Send("slow", 3, timeout=TimeoutPolicy(run_timeout=5.0)),
        Interrupt(value={"question": "ok?"}, id="abc"),
        Command(goto=[Send("a", 1), "b"], update={"k": date(2024, 1, 1)}, resume={"abc": "yes"}),
        Command(graph=Command.PARENT, goto="x"),
        Overwrite(value=[1, 2]),
    ]
    assert_same(value, round_trip(value))


class AskState(TypedDict):
    messages: Annotated[list, add_messages]
    when: datetime
    answer: Any


def test_a_graph_checkpointed_through_the_codec_resumes_with_the_same_values():
    def ask(state: AskState) -> dict[str, Any]:
        answer = interrupt({"asked_at": state["when"]})
        return {"answer": answer, "messages": [AIMessage(f"got {answer}")]}

    graph = (
        StateGraph(AskState)
        .add_node("ask", ask)
        .add_edge(START, "ask")
        .compile(checkpointer=InMemorySaver(serde=FaithfulJSONCodec()))
    )
    config = {"configurable": {"thread_id": "t1"}}
    when = datetime(2024, 3, 31, 2, 30, tzinfo=zoneinfo.ZoneInfo("Europe/London"))
    first = graph.invoke({"messages": [HumanMessage("hi")], "when": when}, config)
    assert first["__interrupt__"][0].value == {"asked_at": when}
    final = graph.invoke(Command(resume=Decimal("1.50")), config)
    assert_same(final["answer"], Decimal("1.50"))
    assert_same(graph.get_state(config).values["when"], when)
    assert [type(m) for m in final["messages"]] == [HumanMessage, AIMessage]


# --- exceptions ----------------------------------------------------------------------------------


def _raise_chain() -> StepFailed:
    try:
        try:
            raise TimeoutError("upstream timed out")
        except TimeoutError as timeout:
            raise StepFailed("step fetch failed", step="fetch", attempts=3) from timeout
    except StepFailed as failed:
        return failed


def test_exception_is_stored_as_a_readable_record():
    _, payload = codec.dumps_typed(_raise_chain())
    stored = json.loads(payload)
    assert stored == {
        "$type": "exception",
        "id": [*samples.__name__.split("."), "StepFailed"],
        "message": "step fetch failed",
        "kwargs": {"step": "fetch", "attempts": 3},
        "repr_kwargs": [],
        "cause": {
            "$type": "exception",
            "id": ["builtins", "TimeoutError"],
            "message": "upstream timed out",
            "kwargs": {},
            "repr_kwargs": [],
            "cause": None,
        },
    }
    back = codec.loads_typed(("json", payload))
    assert isinstance(back, CheckpointedException) and isinstance(back, Exception)
    assert back.id[-1] == "StepFailed" and back.kwargs == {"step": "fetch", "attempts": 3}
    assert back.cause.record == {
        "id": ["builtins", "TimeoutError"],
        "message": "upstream timed out",
        "kwargs": {},
        "repr_kwargs": [],
        "cause": None,
    }
    assert back.cause.cause is None and back.__cause__ is back.cause
    assert str(back) == f"{samples.__name__}.StepFailed: step fetch failed"


def test_exception_attributes_json_cannot_hold_are_kept_as_repr():
    error = ValueError("bad")
    error.handle = object()
    error.when = date(2024, 1, 1)
    error.inner = KeyError("missing")
    error._private = "skipped"
    back = round_trip(error)
    assert back.repr_kwargs == ["handle"]
    assert back.kwargs["handle"].startswith("<object object at")
    assert_same(back.kwargs["when"], date(2024, 1, 1))
    assert isinstance(back.kwargs["inner"], CheckpointedException)
    assert back.record["kwargs"]["inner"]["id"] == ["builtins", "KeyError"]
    assert "_private" not in back.kwargs


def test_cause_falls_back_to_context_unless_suppressed():
    try:
        try:
            raise KeyError("first")
        except KeyError:
            raise RuntimeError("while handling") from None
    except RuntimeError as suppressed:
        assert round_trip(suppressed).cause is None
    try:
        try:
            raise KeyError("first")
        except KeyError:
            raise RuntimeError("while handling")  # noqa: B904 - the implicit context is the point
    except RuntimeError as implicit:
        assert round_trip(implicit).cause.id == ["builtins", "KeyError"]


def test_a_checkpointed_exception_written_again_keeps_its_record():
    back = round_trip(_raise_chain())
    again = round_trip(back)
    assert again.record == back.record and again == back
    assert round_trip({"errors": [again]})["errors"][0].record == back.record
    assert CheckpointedException.from_record(back.record).record == back.record
    assert copy.deepcopy(back) == back


def test_a_cyclic_cause_chain_is_cut_not_refused():
    first, second = ValueError("a"), ValueError("b")
    first.__cause__, second.__cause__ = second, first
    assert round_trip(first).cause.cause is None


# --- refusals at write ---------------------------------------------------------------------------


class NotAZone(tzinfo):
    def utcoffset(self, dt):
        return timedelta(hours=1)


class MyHuman(HumanMessage):
    """A subclass LangChain's loader does not know."""


@dataclasses.dataclass
class OutsideAllowlist:
    x: int


def _zone_from_file() -> zoneinfo.ZoneInfo:
    for root in zoneinfo.TZPATH:
        candidate = Path(root, "Europe", "Paris")
        if candidate.is_file():
            with candidate.open("rb") as handle:
                return zoneinfo.ZoneInfo.from_file(handle)
    raise AssertionError(f"no Europe/Paris zone file under {zoneinfo.TZPATH}: install tzdata")


def test_refusal_names_the_path_the_saver_gives():
    messages = [HumanMessage("a"), AIMessage("b"), HumanMessage("c")]
    messages.append(AIMessage("d", additional_kwargs={"when": object()}))
    error = refusal(messages, path="channel_values.messages")
    assert error.field == "channel_values.messages[3].additional_kwargs.when"
    assert str(error).startswith("cannot store channel_values.messages[3].additional_kwargs.when:")
    assert "builtins.object is not one the checkpoint codec can store" in str(error)


@pytest.mark.parametrize(
    ("make", "path", "reason"),
    [
        (lambda: {"x": object()}, "value.x", "builtins.object is not one"),
        (lambda: [1, {"k": float("nan")}], "value[1].k", "NaN or infinity"),
        (lambda: {"a b": (1, float("inf"))}, "value['a b'][1]", "NaN or infinity"),
        (lambda: {3: -math.inf}, "value[3]", "NaN or infinity"),
        (lambda: {"t": datetime(2024, 1, 1, tzinfo=NotAZone())}, "value.t", "neither a fixed"),
        (lambda: {"t": time(1, tzinfo=NotAZone())}, "value.t", "neither a fixed"),
        (lambda: {"m": [MyHuman("hi")]}, "value.m[0]", "LangChain's loader"),
        (lambda: OutsideAllowlist(1), "value", "not on CHECKPOINTS['CODEC_ALLOWED_MODULES']"),
        (lambda: {"f": print}, "value.f", "is not one the checkpoint codec"),
        (lambda: {"c": Point}, "value.c", "is not one the checkpoint codec"),
        (lambda: {"o": OrderedDict(a=object())}, "value.o.a", "builtins.object is not one"),
        (lambda: {frozenset({object()}): 1}, "value[frozenset", "dict key cannot be stored"),
        (lambda: Profile(name="x", payload={"bad": {1, math.nan}}), "value.payload.bad[", "NaN"),
        (lambda: Send("n", {"arg": object()}), "value.arg.arg", "builtins.object"),
    ],
)
def test_write_refusals_name_path_and_reason(make, path, reason):
    error = refusal(make())
    assert error.field.startswith(path), (error.field, path)
    assert reason in str(error)
    assert error.code == "codec_error"


def test_a_zone_read_from_a_file_is_refused():
    error = refusal({"at": datetime(2024, 1, 1, tzinfo=_zone_from_file())})
    assert error.field == "value.at" and "no key" in str(error)


def test_classes_defined_in_a_function_are_refused():
    @dataclasses.dataclass
    class Local:
        x: int

    class LocalModel(BaseModel):
        x: int

    class LocalColor(Enum):
        RED = 1

    with store_settings(CODEC_ALLOWED_MODULES=[*ALLOWED, __name__]):
        for value in (Local(1), LocalModel(x=1), LocalColor.RED):
            error = refusal({"v": value})
            assert error.field == "value.v" and "defined inside a function" in str(error)


def test_allowing_a_module_lets_its_classes_through():
    assert_same(OutsideAllowlist(1), _with_allowed(__name__, OutsideAllowlist(1)))
    with store_settings(CODEC_ALLOWED_MODULES=["langchain_core"]):
        assert "not on CHECKPOINTS" in str(refusal(Color.RED))


def _with_allowed(module: str, value: Any) -> Any:
    with store_settings(CODEC_ALLOWED_MODULES=[*ALLOWED, module]):
        return round_trip(value)
