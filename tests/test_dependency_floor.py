"""The LangGraph names the store imports exist, and the pins admit no version without them.

langgraph-checkpoint 4.2.0 lacks ``writes_sort_key`` and langgraph 1.1 lacks DeltaChannel
(checked against the released wheels when the floors were set); the installed versions must
sit inside the pins and offer every name below.
"""

from __future__ import annotations

import importlib
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest

from tests.pins import CEILINGS, FLOORS

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
NEEDED = [
    ("langgraph.checkpoint.base", "writes_sort_key"),
    ("langgraph.checkpoint.base", "WRITES_IDX_MAP"),
    ("langgraph.checkpoint.base", "BaseCheckpointSaver"),
    ("langgraph.checkpoint.serde.types", "_DeltaSnapshot"),
    ("langgraph.checkpoint.serde._msgpack", "STRICT_MSGPACK_ENABLED"),
    ("langgraph.checkpoint.serde._msgpack", "_SENTINEL"),
    ("langgraph.checkpoint.serde.event_hooks", "register_serde_event_listener"),
    ("langgraph.checkpoint.serde.jsonplus", "JsonPlusSerializer"),
    ("langgraph.channels.delta", "DeltaChannel"),
    ("langgraph._internal._typing", "MISSING"),
]


def _numbers(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".") if part.isdigit())


def test_pins_state_the_verified_floors_and_ceilings():
    deps = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    for name, floor in FLOORS.items():
        spec = next(d for d in deps if d.split(">")[0].split("<")[0].strip() == name)
        lower = spec.split(">=")[1].split(",")[0]
        upper = spec.split("<")[1]
        assert _numbers(lower) == floor, spec
        assert _numbers(upper) == CEILINGS[name], spec


@pytest.mark.parametrize("name", sorted(FLOORS))
def test_installed_versions_sit_inside_the_pins(name):
    installed = _numbers(version(name))
    assert FLOORS[name] <= installed < CEILINGS[name] + (0,) * 2, (name, installed)


@pytest.mark.parametrize(("module", "attribute"), NEEDED)
def test_every_langgraph_name_the_store_uses_exists(module, attribute):
    assert hasattr(importlib.import_module(module), attribute), f"{module}.{attribute}"
    assert hasattr(
        importlib.import_module("langgraph.checkpoint.base").BaseCheckpointSaver, "with_allowlist"
    )
