"""What LangGraph's suite needs of our codecs (issue 14), checked without the suite.

The faithful JSON codec (Redis) and the msgpack serializer (ORM, memory) under LangGraph's
own allowlist rules: permissive by default, strict with LANGGRAPH_STRICT_MSGPACK or a
deployment list; str subclasses and ordered/default dicts; task errors read as LangGraph
reads them; lone surrogates refused naming the path.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections import OrderedDict, defaultdict
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import pytest
from django.conf import settings
from django.test import override_settings
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.serde import _msgpack
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from pydantic import BaseModel

from checkpoints.codec import CheckpointedException, FaithfulJSONCodec
from checkpoints.codec.serde import BlockedTypeError, StoreSerializer, store_serializer
from checkpoints.errors import CheckpointCodecError, CheckpointConfigError

from . import codec_samples as samples

codec = FaithfulJSONCodec()


@dataclasses.dataclass
class Crate:
    """Module-level, in a module on no allowlist (this test module)."""

    items: list[str]


def checkpoints(**overrides: Any) -> override_settings:
    return override_settings(CHECKPOINTS={**settings.CHECKPOINTS, **overrides})


@pytest.fixture
def strict_env(monkeypatch):
    """LANGGRAPH_STRICT_MSGPACK=true, as LangGraph reads it at import."""
    monkeypatch.setenv("LANGGRAPH_STRICT_MSGPACK", "true")
    monkeypatch.setattr(_msgpack, "STRICT_MSGPACK_ENABLED", True)


@pytest.fixture
def permissive_env(monkeypatch):
    monkeypatch.delenv("LANGGRAPH_STRICT_MSGPACK", raising=False)
    monkeypatch.setattr(_msgpack, "STRICT_MSGPACK_ENABLED", False)


def json_round_trip(value: Any, c: FaithfulJSONCodec = codec) -> Any:
    return c.loads_typed(c.dumps_typed(value))


# -- the faithful JSON codec: which classes ---------------------------------------------------
def test_json_codec_default_stores_any_loaded_module_level_class(permissive_env):
    back = json_round_trip({"crate": Crate(["a"]), "box": samples.Box(samples.Point(1, 2))})
    assert back["crate"] == Crate(["a"]) and type(back["crate"]) is Crate
    assert type(back["box"]) is samples.Box


def test_json_codec_default_never_imports_a_module_stored_data_names(permissive_env):
    payload = json.dumps({"$type": "dataclass", "class": "zz_not_loaded_mod:Thing", "fields": {}})
    with pytest.raises(CheckpointCodecError, match="zz_not_loaded_mod") as caught:
        codec.loads_typed(("json", payload.encode()))
    assert "not on CHECKPOINTS['CODEC_ALLOWED_MODULES'] (nor loaded" in str(caught.value)
    assert "zz_not_loaded_mod" not in sys.modules


def test_json_codec_strict_mode_uses_the_allowlist_and_the_deployment_list(strict_env):
    with pytest.raises(CheckpointCodecError, match=f"{__name__}.Crate") as caught:
        codec.dumps_typed({"c": Crate([])}, path="channel_values")
    assert caught.value.field == "channel_values.c"
    with checkpoints(ALLOWED_MSGPACK_MODULES=[f"{__name__}.Crate"]):
        assert json_round_trip(Crate(["x"])) == Crate(["x"])
    # The graph's schema types, as LangGraph hands them to with_allowlist.
    widened = codec.with_msgpack_allowlist([Crate])
    assert json_round_trip(Crate(["y"]), widened) == Crate(["y"])
    with pytest.raises(CheckpointCodecError):
        codec.dumps_typed(Crate([]))  # the original codec is unchanged


def test_json_codec_refuses_a_class_defined_in_a_function_naming_it_and_the_path(permissive_env):
    @dataclasses.dataclass
    class Local:
        x: int

    with pytest.raises(CheckpointCodecError) as caught:
        codec.dumps_typed({"rows": [Local(1)]}, path="channel_values")
    assert caught.value.field == "channel_values.rows[0]"
    assert "Local" in str(caught.value) and "defined inside a function" in str(caught.value)


def test_json_codec_stores_a_function_local_pydantic_model_as_its_fields(permissive_env, caplog):
    """What LangGraph's serializer reads back for such a model, said in the log."""
    from pydantic import BaseModel

    class LocalState(BaseModel):
        topic: str
        tags: list[str] = []

    back = json_round_trip({"state": LocalState(topic="t", tags=["a"])})
    assert back == {"state": {"topic": "t", "tags": ["a"]}}
    assert "LocalState is defined inside a function" in caplog.text


# -- the faithful JSON codec: str subclasses and dict subclasses ---------------------------------
def test_json_codec_stores_a_str_subclass_as_its_text():
    text = AIMessage("hello").text
    assert type(text) is not str  # langchain-core's TextAccessor: the reason for this rule
    back = json_round_trip({"reply": text, "keyed": {text: 1}})
    assert type(back["reply"]) is str and back["reply"] == "hello"
    assert back["keyed"] == {"hello": 1} and type(next(iter(back["keyed"]))) is str


def test_json_codec_stores_ordered_and_default_dicts_as_plain_dicts():
    ordered = OrderedDict([("z", 1), ("a", 2)])
    counts = defaultdict(list, {"k": [1]})
    back = json_round_trip({"o": ordered, "d": counts})
    assert type(back["o"]) is dict and list(back["o"].items()) == [("z", 1), ("a", 2)]
    assert type(back["d"]) is dict and back["d"] == {"k": [1]}


# -- task errors ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "error",
    [
        ValueError("Input is too large"),
        ConnectionError("I'm not good"),
        ValueError(),
        KeyError(1, 2),
    ],
)
def test_a_stored_task_error_reads_as_langgraphs_string(error):
    back = json_round_trip(error)
    assert isinstance(back, CheckpointedException)
    # What LangGraph's own serializer stores for an error is its repr().
    assert back == repr(error) and repr(error) == back and back.text == repr(error)
    assert hash(back) == hash(repr(error))
    assert str(error) in back if str(error) else True
    assert type(error).__name__ in back
    assert back.record["id"] == ["builtins", type(error).__name__]


def test_the_repr_is_stored_only_when_it_cannot_be_derived():
    plain = json.loads(codec.dumps(ValueError("bad")))
    assert "repr" not in plain
    odd = json.loads(codec.dumps(KeyError("a", 2)))
    assert odd["repr"] == "KeyError('a', 2)"
    back = json_round_trip(KeyError("a", 2))
    assert CheckpointedException.from_record(back.record) == back
    assert json_round_trip(back).text == "KeyError('a', 2)"


# -- lone surrogates --------------------------------------------------------------------------
def test_json_codec_refuses_a_lone_surrogate_naming_the_path():
    with pytest.raises(CheckpointCodecError) as caught:
        codec.dumps_typed({"m": [{"content": "a\udc00"}]}, path="channel_values")
    assert caught.value.field == "channel_values.m[0].content"


def test_msgpack_serializer_refuses_a_lone_surrogate_naming_the_path():
    serde = store_serializer()
    with pytest.raises(ValueError, match=r"value\.m\[0\]\.content: a string holds a lone"):
        serde.dumps_typed({"m": [AIMessage("a\ud800b")]})
    with pytest.raises(ValueError, match="the key"):
        serde.dumps_typed({"k\ud800": 1})
    assert serde.loads_typed(serde.dumps_typed({"q": "why?"})) == {"q": "why?"}


@dataclasses.dataclass
class Note:
    text: str


def test_the_probe_clears_text_with_question_marks_and_finds_every_surrogate():
    from datetime import UTC, datetime
    from uuid import UUID

    from langchain_core.messages import HumanMessage

    from checkpoints.codec.envelope import may_hold_lone_surrogate

    chat = [HumanMessage(f"why {i}?") if i % 2 else AIMessage(f"because {i}") for i in range(40)]
    plain = {
        "chat": chat,
        "note": Note("what?"),
        "when": datetime(2026, 1, 1, tzinfo=UTC),
        "id": UUID(int=7),
        "tags": {"a?", "b"},
        1: ("x?", 2.5, None, b"?"),
    }
    assert not may_hold_lone_surrogate(plain)
    bad = "a\ud800b"
    for holding in (
        bad,
        {bad: 1},
        {"k": [1, {"deep": bad}]},
        [*chat, AIMessage(bad)],
        [*chat, AIMessage("ok", additional_kwargs={"x": [bad]})],
        Note(bad),
        {"tags": {bad}},
        (1, bad),
    ):
        assert may_hold_lone_surrogate(holding), holding


def test_a_surrogate_among_questions_is_refused_naming_its_message():
    from langchain_core.messages import HumanMessage

    serde = store_serializer()
    chat = [HumanMessage(f"why {i}?") for i in range(30)]
    assert serde.loads_typed(serde.dumps_typed({"m": chat})) == {"m": chat}
    with pytest.raises(ValueError, match=r"value\.m\[30\]\.content: a string holds a lone"):
        serde.dumps_typed({"m": [*chat, HumanMessage("a\ud800?")]})


# -- the msgpack serializer: LangGraph's allowlist, never a silent dict ---------------------------
def test_msgpack_default_is_langgraphs_permissive_default(permissive_env):
    serde = store_serializer()
    assert isinstance(serde, StoreSerializer) and serde.pickle_fallback is False
    back = serde.loads_typed(serde.dumps_typed({"c": Crate(["a"])}))
    assert back == {"c": Crate(["a"])} and type(back["c"]) is Crate


def test_msgpack_strict_mode_reads_a_blocked_type_as_its_data_with_a_warning(strict_env, caplog):
    serde = store_serializer()
    stored = serde.dumps_typed({"c": Crate(["a"])})
    with caplog.at_level("WARNING", logger="checkpoints.codec"):
        assert serde.loads_typed(stored) == {"c": {"items": ["a"]}}
    assert f"{__name__}.Crate" in caplog.text and "not on the msgpack allowlist" in caplog.text
    # The graph's schema types (LangGraph's with_allowlist) and the deployment list open it.
    assert serde.with_msgpack_allowlist([Crate]).loads_typed(stored)["c"] == Crate(["a"])
    with checkpoints(ALLOWED_MSGPACK_MODULES=[[__name__, "Crate"]]):
        assert store_serializer().loads_typed(stored)["c"] == Crate(["a"])


def test_blocked_types_raise_refuses_naming_the_type(strict_env):
    stored = store_serializer().dumps_typed({"c": Crate(["a"])})
    with checkpoints(BLOCKED_TYPES="raise"):
        serde = store_serializer()
        with pytest.raises(BlockedTypeError, match=f"{__name__}.Crate") as caught:
            serde.loads_typed(stored)
        assert caught.value.field == f"{__name__}.Crate"
        assert serde.with_msgpack_allowlist([Crate]).loads_typed(stored)["c"] == Crate(["a"])
    with checkpoints(BLOCKED_TYPES="loud"), pytest.raises(CheckpointConfigError, match="'loud'"):
        store_serializer()


def test_the_deployment_list_makes_the_serializer_strict_whatever_the_environment(
    permissive_env,
):
    with checkpoints(ALLOWED_MSGPACK_MODULES=[], BLOCKED_TYPES="raise"):
        serde = store_serializer()
        with pytest.raises(BlockedTypeError):
            serde.loads_typed(serde.dumps_typed(Crate([])))
    with checkpoints(ALLOWED_MSGPACK_MODULES=True):
        serde = store_serializer()
        assert serde.loads_typed(serde.dumps_typed(Crate([]))) == Crate([])


@pytest.mark.parametrize("bad", ["justaname", 3, [["only"]], [5]])
def test_a_malformed_deployment_list_is_a_configuration_error(bad):
    with checkpoints(ALLOWED_MSGPACK_MODULES=bad), pytest.raises(CheckpointConfigError):
        store_serializer()


def test_the_environment_variable_fills_the_deployment_list():
    import os
    import subprocess

    code = "from project import settings; print(settings.CHECKPOINTS['ALLOWED_MSGPACK_MODULES'])"
    env = {**os.environ, "CHECKPOINTS_ALLOWED_MSGPACK_MODULES": "app.state.Order, app.state.Line"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.stdout.strip() == "['app.state.Order', 'app.state.Line']", done.stderr
    env.pop("CHECKPOINTS_ALLOWED_MSGPACK_MODULES")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.stdout.strip() == "None", done.stderr


@pytest.mark.redis
def test_strict_redis_saver_takes_the_graphs_schema_types_through_with_allowlist(
    strict_env, redis_url
):
    """LangGraph compiles a graph with ``checkpointer.with_allowlist(schema types)``; our
    Redis codec is not LangGraph's serializer, so the saver widens it itself."""
    from checkpoints.store.registry import get_saver

    saver = get_saver("redis", conn_string=redis_url)
    widened = saver.with_allowlist([(Crate.__module__, "Crate")])
    assert widened is not saver and widened.serde is not saver.serde
    config = {"configurable": {"thread_id": "allow", "checkpoint_ns": ""}}
    from langgraph.checkpoint.base import empty_checkpoint

    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"crate": Crate(["kept"])}
    checkpoint["channel_versions"] = {"crate": widened.get_next_version(None, None)}
    with pytest.raises(CheckpointCodecError, match="Crate"):
        saver.put(config, checkpoint, {}, checkpoint["channel_versions"])
    stored = widened.put(config, checkpoint, {}, checkpoint["channel_versions"])
    back = widened.get_tuple(stored).checkpoint["channel_values"]["crate"]
    assert back == Crate(["kept"]) and type(back) is Crate
    widened.delete_thread("allow")


_TEXT = st.text(alphabet=st.sampled_from(["a", "?", "é", "\ud800", "\udfff"]), max_size=4)
_PROBED = st.recursive(
    st.one_of(_TEXT, st.integers(), st.none(), st.builds(Note, _TEXT)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.tuples(inner, inner),
        st.dictionaries(_TEXT, inner, max_size=3),
        st.builds(lambda text, more: AIMessage(text, additional_kwargs={"x": more}), _TEXT, inner),
    ),
    max_leaves=10,
)


@hypothesis_settings(max_examples=300, deadline=None)
@given(_PROBED)
def test_the_probe_never_clears_what_the_walk_would_refuse(value):
    from checkpoints.codec.envelope import lone_surrogate_path, may_hold_lone_surrogate

    if lone_surrogate_path(value) is not None:
        assert may_hold_lone_surrogate(value)


_TOOL_CALL = {"name": "look", "args": {"q": "?"}, "id": "c1", "type": "tool_call"}


class _Inner(BaseModel):
    name: str
    score: float = 0.5


class _Outer(BaseModel):
    inner: _Inner
    items: list[_Inner] = []
    when: datetime | None = None


class _Holder:
    class Nested(BaseModel):  # its qualname is not its name
        x: int


def _same_as_langgraph(value):
    lg = JsonPlusSerializer(pickle_fallback=False)

    def outcome(serde):
        try:
            return serde.dumps_typed(value)
        except Exception as exc:  # noqa: BLE001 - the same refusal counts as the same
            return type(exc)

    assert outcome(store_serializer()) == outcome(lg)


@pytest.mark.parametrize(
    "value",
    [
        {"m": [HumanMessage("why?"), AIMessage("so.", tool_calls=[_TOOL_CALL])]},
        [AIMessage("x", additional_kwargs={"k": [1, {2: "y"}]}, response_metadata={"r": 1})],
        _Outer(inner=_Inner(name="a?"), items=[_Inner(name="b", score=2.0)]),
        _Outer(inner=_Inner(name="t"), when=datetime(2026, 1, 2, tzinfo=UTC)),
        {"set": {1, 2}, "note": Note("n"), "id": UUID(int=3), "t": (1, "?", None)},
        datetime(2026, 1, 2, tzinfo=UTC),
        {1: 2**70},
        [_Holder.Nested(x=1)],
        "plain?",
        b"raw",
        None,
    ],
    ids=[
        "chat",
        "kwargs",
        "nested-model",
        "model-datetime",
        "mixed",
        "datetime",
        "big-int",
        "nested-class",
        "str",
        "bytes",
        "none",
    ],
)
def test_the_serializer_writes_langgraphs_bytes(value):
    _same_as_langgraph(value)


@hypothesis_settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.one_of(
            st.text(max_size=4),
            st.integers(),
            st.floats(allow_nan=False),
            st.booleans(),
            st.none(),
            st.binary(max_size=3),
        ),
        lambda inner: st.one_of(
            st.lists(inner, max_size=3),
            st.tuples(inner),
            st.dictionaries(st.one_of(st.text(max_size=3), st.integers()), inner, max_size=3),
            st.builds(
                lambda text, more: AIMessage(text, additional_kwargs={"x": more}),
                st.text(max_size=3),
                inner,
            ),
            st.builds(lambda name: _Inner(name=name), st.text(max_size=3)),
        ),
        max_leaves=10,
    )
)
def test_the_serializer_writes_langgraphs_bytes_for_any_value(value):
    _same_as_langgraph(value)
