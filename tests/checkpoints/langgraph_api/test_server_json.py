"""Values on the LangGraph API are the JSON LangGraph's server writes for them: each kind
stored, read back by the store's reader, and written by `server_json`, compared with what
langgraph-api's own encoder (in the `langgraph dev` venv) writes for the same values."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from checkpoints.codec.exception import CheckpointedException
from checkpoints.codec.serde import store_serializer
from checkpoints.langgraph_api.shapes import safe_json, server_json, server_values
from tests.checkpoints.langgraph_api import encoder_values
from tests.langgraph_dev import VENV, dev_venv

# As the dev server answers for a stored value: its checkpointer's serializer writes and
# reads it back, then its encoder writes the JSON.
HERE = Path(__file__).parent
THEIR_DUMP = (
    "import sys, encoder_values\n"
    "from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer\n"
    "from langgraph_api.serde import json_dumpb\n"
    "serde = JsonPlusSerializer()\n"
    "read = {k: serde.loads_typed(serde.dumps_typed(v))\n"
    "        for k, v in encoder_values.values().items()}\n"
    "sys.stdout.write(json_dumpb(read).decode())\n"
)


@pytest.fixture(scope="module")
def theirs() -> dict:
    # As the differential tests: no venv, no comparison, a failure (never a skip).
    dev_venv()
    done = subprocess.run(
        [str(VENV / "bin" / "python"), "-c", THEIR_DUMP],
        cwd=HERE,
        env={"PYTHONPATH": str(HERE), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def stored_and_read(value):
    """``value`` written and read back by the store's serializer (its strict reader)."""
    serde = store_serializer()
    return serde.loads_typed(serde.dumps_typed(value))


@pytest.mark.parametrize("kind", sorted(encoder_values.values()))
def test_each_kind_as_langgraph_server_writes_it(theirs, kind):
    value = stored_and_read(encoder_values.values()[kind])
    assert server_json(value) == theirs[kind], kind


def test_messages_are_plain_dicts_not_constructors():
    read = stored_and_read(encoder_values.values())
    body = server_values({"messages": read["messages"], "ai": read["ai"]})
    assert body["messages"][0] == {
        "content": "a",
        "additional_kwargs": {},
        "response_metadata": {},
        "type": "human",
        "name": "ann",
        "id": "m4",
    }
    assert body["ai"]["tool_calls"][0]["args"] == {"city": "Paris"}
    assert "lc" not in json.dumps(body)


def test_exceptions_in_memory_as_langgraph_server_writes_them():
    # Its encoder shows the message of the kinds it lists, by class, and hides the rest.
    assert server_json(ValueError("bad input")) == {"error": "ValueError", "message": "bad input"}
    hidden = {"error": "OSError", "message": "An internal error occurred"}
    assert server_json(OSError("/secret/path")) == hidden
    record = CheckpointedException(["builtins", "KeyError"], "'k'")
    assert server_json(record) == {"error": "KeyError", "message": "'k'"}
    record = CheckpointedException(["acme", "DatabaseError"], "password=hunter2")
    assert server_json(record) == {
        "error": "DatabaseError",
        "message": "An internal error occurred",
    }


def test_an_entry_whose_model_dump_fails_is_written_alone(monkeypatch):
    # One bad entry spoils only itself: the others are still LangGraph's JSON.
    def broken(self, *args, **kwargs):
        raise RuntimeError("model_dump failed")

    monkeypatch.setattr(encoder_values.Profile, "model_dump", broken)
    read = encoder_values.values()
    body = server_values({"model": read["model"], "human": read["human"]})
    assert body["human"]["content"] == "hi"
    assert body["model"] == {"name": "p", "joined": "2026-01-01T00:00:00+00:00"}
    # An interrupt's value alike.
    assert safe_json(read["model"], "interrupts") == body["model"]
