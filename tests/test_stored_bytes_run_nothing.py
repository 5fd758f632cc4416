"""A stored row never runs code: crafted payloads through every reader, with canaries.

Each payload, if its reader obeyed it, would create a canary file (``os.system``,
``subprocess.Popen``, ``eval``, ``exec``, a loaded class whose constructor writes a file,
a method call) or import a module that nothing loaded (whose import writes a canary). The
rows are planted through the real write path with a serializer that emits the crafted
bytes, so they sit in the store exactly as a rewritten row would; then every reader reads
them: the saver's get/list and a graph's state and history, the admin's list, thread,
checkpoint and changes pages, the API's state, history and fork for the owner, and the
sweep's dry run. Nothing may run, nothing may be imported, and no page may fail.
"""

from __future__ import annotations

import json
import sys
import textwrap
import uuid
from datetime import timedelta
from pathlib import Path

import ormsgpack
import pytest
from django.test import Client
from django.utils import timezone
from langgraph.checkpoint.base import empty_checkpoint

from checkpoints.codec.serde import StoreSerializer
from checkpoints.errors import UnreadableValue
from checkpoints.models import Checkpoint, Thread
from tests.api_fixtures import token_client
from tests.standalone import plain_env, run_python

BAIT_MODULE = "zz_canary_bait_module"


class Bait:
    """A value the planting serializer writes as the crafted bytes it carries."""

    def __init__(self, data: bytes) -> None:
        self.data = data


class Planting(StoreSerializer):
    def dumps_typed(self, obj):
        if isinstance(obj, Bait):
            return "msgpack", obj.data
        return super().dumps_typed(obj)


def ext(code: int, *parts) -> ormsgpack.Ext:
    return ormsgpack.Ext(code, ormsgpack.packb(parts))


@pytest.fixture
def canaries(tmp_path, monkeypatch):
    """(payloads by name, the canary folder); a module on sys.path that must never load."""
    folder = tmp_path / "canaries"
    folder.mkdir()
    bait_dir = tmp_path / "bait"
    bait_dir.mkdir()
    (bait_dir / f"{BAIT_MODULE}.py").write_text(
        textwrap.dedent(
            f"""
            import pathlib
            pathlib.Path({str(folder / "imported")!r}).write_text("imported")

            class Thing:
                def __init__(self, *args, **kwargs):
                    pass
            """
        )
    )
    monkeypatch.syspath_prepend(str(bait_dir))
    sys.modules.pop(BAIT_MODULE, None)

    def at(name: str) -> str:
        return str(folder / name)

    payloads = {
        "os.system": ext(0, "os", "system", f"touch {at('system')}"),
        "subprocess.Popen": ext(1, "subprocess", "Popen", [["touch", at("popen")]]),
        "eval": ext(0, "builtins", "eval", f"open({at('eval')!r}, 'w')"),
        "exec": ext(1, "builtins", "exec", [f"open({at('exec')!r}, 'w')"]),
        "loaded class": ext(0, "logging", "FileHandler", at("filehandler")),
        "keyword call": ext(2, "logging", "FileHandler", {"filename": at("filehandler-kw")}),
        "method call": ext(3, "os", "system", f"touch {at('method')}", "__call__"),
        "unloaded module": ext(0, BAIT_MODULE, "Thing", "x"),
        "unloaded model": ext(5, BAIT_MODULE, "Thing", {"a": 1}, "model_validate_json"),
        "pydantic v1 call": ext(4, "subprocess", "Popen", {"args": ["touch", at("v1")]}),
        "nested": ext(7, {"deep": [ext(0, "os", "system", f"touch {at('nested')}")]}),
    }
    yield payloads, folder
    sys.modules.pop(BAIT_MODULE, None)


def assert_nothing_ran(folder: Path) -> None:
    assert sorted(p.name for p in folder.iterdir()) == []
    assert BAIT_MODULE not in sys.modules


def plant(saver_factory, thread_id: str, payloads: dict, owner=None) -> dict:
    """A checkpoint whose channels and pending writes hold the crafted bytes; its config."""
    writer = saver_factory(serde=Planting())
    checkpoint = empty_checkpoint()
    values = {name: Bait(ormsgpack.packb({"value": p})) for name, p in payloads.items()}
    checkpoint["channel_values"] = values
    checkpoint["channel_versions"] = dict.fromkeys(values, 1)
    configurable = {"thread_id": thread_id, "checkpoint_ns": ""}
    if owner is not None:
        configurable["user_id"] = owner.pk
    config = writer.put(
        {"configurable": configurable},
        checkpoint,
        {"source": "input", "step": 0, "parents": {}},
        checkpoint["channel_versions"],
    )
    # One write a channel: LangGraph gives each special channel one fixed index.
    channels = ["__interrupt__", *(f"w{i}" for i in range(len(payloads) - 1))]
    writes = [
        (c, Bait(ormsgpack.packb([p]))) for c, p in zip(channels, payloads.values(), strict=True)
    ]
    writer.put_writes(config, writes, "task-1")
    return config


def read_everything_through_the_saver(saver, config) -> None:
    head = saver.get_tuple({"configurable": {"thread_id": config["configurable"]["thread_id"]}})
    assert head is not None and set(head.checkpoint["channel_values"]) >= {"os.system"}
    # A blocked call reads back as the data it was given, never as what it returns.
    assert head.checkpoint["channel_values"]["os.system"]["value"].startswith("touch ")
    assert len(head.pending_writes) >= 1
    assert list(saver.list(config))
    assert saver.get_tuple(config) is not None


@pytest.mark.parametrize("provider", ["sqlite", "postgres", "memory"])
def test_no_saver_read_runs_or_imports_what_a_row_names(saver_factory, canaries):
    payloads, folder = canaries
    saver = saver_factory()
    config = plant(saver_factory, f"bait-{uuid.uuid4().hex[:8]}", payloads)
    read_everything_through_the_saver(saver, config)
    list(saver.list(None))
    assert_nothing_ran(folder)


@pytest.mark.parametrize("provider", ["sqlite", "postgres", "memory"])
def test_an_unknown_ext_code_is_unreadable_not_none(saver_factory, canaries):
    saver = saver_factory()
    config = plant(saver_factory, "bait-code", {"odd": ormsgpack.Ext(42, b"\x01")})
    with pytest.raises(UnreadableValue, match="ext code 42"):
        saver.get_tuple(config)


# Not memory: the sweep leaves a memory store's idle threads alone (they go with the process).
@pytest.mark.parametrize("provider", ["sqlite", "postgres"])
def test_the_sweep_dry_run_reads_the_planted_rows_and_runs_nothing(saver_factory, canaries):
    from retention.sweep import sweep_checkpoints

    payloads, folder = canaries
    saver = saver_factory()
    plant(saver_factory, "bait-sweep", payloads)
    result = sweep_checkpoints(dry_run=True, saver=saver, now=timezone.now() + timedelta(days=3650))
    assert result.dry_run
    # The planted thread was judged: past its horizon, and spared by the interrupts filter
    # for its planted __interrupt__ write (the sweep asks whether one exists, decoding none).
    spared = {(s["thread_id"], s["owner"]) for s in result.spared}
    assert ("bait-sweep", "interrupts") in spared, result
    assert_nothing_ran(folder)


@pytest.mark.redis
@pytest.mark.parametrize("provider", ["redis"])
def test_the_redis_codec_refuses_envelopes_that_name_code(store, canaries):
    """The Redis store's JSON codec: an envelope naming a callable or an unloaded module."""
    from checkpoints.codec import FaithfulJSONCodec
    from checkpoints.errors import CheckpointCodecError

    _, folder = canaries
    codec = FaithfulJSONCodec()
    for envelope in (
        {"$type": "dataclass", "class": "subprocess:Popen", "fields": {"args": ["true"]}},
        {"$type": "model", "class": f"{BAIT_MODULE}:Thing", "fields": {}},
        {"$type": "enum", "class": "os:system", "value": f"touch {folder / 'x'}"},
        {"$type": "namedtuple", "class": "logging:FileHandler", "fields": {}},
        {"$type": "lc", "id": ["subprocess", "Popen"], "kwargs": {}},
    ):
        with pytest.raises(CheckpointCodecError):
            codec.loads_typed(("json", json.dumps(envelope).encode()))
    assert_nothing_ran(folder)


def test_json_envelopes_of_langgraphs_old_format_run_nothing(canaries):
    payloads, folder = canaries
    serde = StoreSerializer()
    documents = [
        {"lc": 2, "type": "constructor", "id": ["subprocess", "Popen"], "args": [["true"]]},
        {"lc": 2, "type": "constructor", "id": ["builtins", "eval"], "args": ["1/0"]},
        {"lc": 2, "type": "constructor", "id": [BAIT_MODULE, "Thing"], "kwargs": {"a": 1}},
        {"lc": 1, "type": "constructor", "id": ["subprocess", "Popen"], "kwargs": {}},
        {"lc": 1, "type": "secret", "id": ["PATH"]},
    ]
    for document in documents:
        back = serde.loads_typed(("json", json.dumps({"v": document}).encode()))
        assert isinstance(back["v"], (dict, list)), back
    # LangGraph's safe types still come back as themselves.
    stamp = {"lc": 2, "type": "constructor", "id": ["uuid", "UUID"], "args": ["0" * 32]}
    assert serde.loads_typed(("json", json.dumps(stamp).encode())) == uuid.UUID(int=0)
    assert_nothing_ran(folder)


@pytest.mark.parametrize("provider", ["sqlite"])
def test_no_admin_page_or_api_call_runs_what_a_row_names(saver_factory, canaries, superuser):
    from django.contrib.auth.models import User

    payloads, folder = canaries
    owner = User.objects.create_user("owner-bait", password="pw")
    config = plant(saver_factory, "bait-admin", payloads, owner=owner)
    Thread.objects.filter(thread_id="bait-admin").update(owner=owner)
    head = Checkpoint.objects.filter(thread__thread_id="bait-admin").get()
    thread_pk = Thread.objects.get(thread_id="bait-admin").pk

    staff = Client()
    staff.force_login(superuser)
    for url in (
        "/admin/checkpoints/thread/",
        f"/admin/checkpoints/thread/{thread_pk}/change/",
        "/admin/checkpoints/checkpoint/",
        f"/admin/checkpoints/checkpoint/{head.pk}/change/",
        f"/admin/checkpoints/checkpoint/{head.pk}/changes/",
    ):
        assert staff.get(url).status_code == 200, url

    api = token_client(owner)
    assert api.get("/api/threads/bait-admin/state/").status_code == 200
    assert api.get("/api/threads/bait-admin/history/").status_code == 200
    fork = api.post(
        "/api/threads/bait-admin/fork/",
        {"checkpoint_id": config["configurable"]["checkpoint_id"]},
        format="json",
    )
    assert fork.status_code in (200, 201), fork.content
    assert_nothing_ran(folder)


@pytest.mark.redis
@pytest.mark.parametrize("provider", ["redis"])
def test_no_redis_saver_read_runs_or_imports_what_a_row_names(saver_factory, canaries):
    """The same crafted envelopes planted in the Redis store's records, read by the saver."""
    from checkpoints.codec import FaithfulJSONCodec

    _, folder = canaries

    class PlantingJSON(FaithfulJSONCodec):
        def dumps_typed(self, obj, *, path="value"):
            if isinstance(obj, Bait):
                return "json", obj.data
            return super().dumps_typed(obj, path=path)

    envelopes = {
        "popen": {"$type": "dataclass", "class": "subprocess:Popen", "fields": {}},
        "unloaded": {"$type": "model", "class": f"{BAIT_MODULE}:Thing", "fields": {}},
        "handler": {"$type": "namedtuple", "class": "logging:FileHandler", "fields": {}},
    }
    saver = saver_factory()
    writer = saver_factory(serde=PlantingJSON())
    for name, envelope in envelopes.items():
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {name: Bait(json.dumps(envelope).encode())}
        checkpoint["channel_versions"] = {name: 1}
        config = writer.put(
            {"configurable": {"thread_id": f"bait-{name}", "checkpoint_ns": ""}},
            checkpoint,
            {"source": "input", "step": 0, "parents": {}},
            {name: 1},
        )
        with pytest.raises(UnreadableValue):
            saver.get_tuple(config)
        with pytest.raises(UnreadableValue):
            list(saver.list(config))
    assert_nothing_ran(folder)


LC_UNLOADED = """
import json, sys
import django
from django.conf import settings
settings.configure(INSTALLED_APPS=["checkpoints.apps.CheckpointsConfig"], USE_TZ=True)
django.setup()
from checkpoints.codec import FaithfulJSONCodec
from checkpoints.errors import CheckpointCodecError

module = "langchain_core.prompt_values"
assert module not in sys.modules
envelope = {"$type": "lc", "id": ["langchain", "prompts", "chat", "ChatPromptValue"],
            "kwargs": {"messages": []}}
try:
    FaithfulJSONCodec().loads_typed(("json", json.dumps(envelope).encode()))
    print(json.dumps(["read", module in sys.modules]))
except CheckpointCodecError as exc:
    print(json.dumps([str(exc), module in sys.modules]))
"""


def test_the_redis_codec_never_imports_a_langchain_module(tmp_path):
    """A LangChain class on LangChain's own allowlist, in a module this process never loaded:
    its module is not imported to revive it (its import-time code would run)."""
    done = run_python(["-c", LC_UNLOADED], cwd=tmp_path, env=plain_env())
    refusal, imported = json.loads(done.stdout.splitlines()[-1])
    assert not imported
    assert "reading never imports" in refusal and "langchain_core.prompt_values" in refusal
