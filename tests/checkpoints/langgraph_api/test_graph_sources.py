"""CHECKPOINTS_GRAPHS: a langgraph.json or name=module:attr pairs, loaded as LangGraph's CLI
loads them, and every bad entry a clear error naming it (at startup or in `check`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from langgraph.pregel import Pregel

from checkpoints.graph_checks import GRAPH_LOAD_ERROR, check_graphs_load
from checkpoints.graph_sources import graphs_from_env, graphs_from_langgraph_json
from checkpoints.graphs import load_graph

HERE = Path(__file__).parent
ROOT = HERE.parents[2]
GRAPHS_MODULE = "tests.checkpoints.langgraph_api.graphs"

GRAPH_FILE = """
import operator
from typing import Annotated

from langgraph.graph import START, StateGraph
from typing_extensions import TypedDict


class State(TypedDict, total=False):
    steps: Annotated[list[str], operator.add]


def step(state: State) -> dict:
    return {"steps": ["one"]}


builder = StateGraph(State)
builder.add_node("step", step)
builder.add_edge(START, "step")
graph = builder.compile()
seen = []


def factory(config=None):
    seen.append(config)
    return builder


def bare_factory():
    return builder.compile()


async def async_factory(config):
    return builder.compile()


def not_a_factory_result():
    return 42


not_a_graph = {"steps": []}
"""


@pytest.fixture
def project(tmp_path) -> Path:
    """A LangGraph project folder: src/agent.py and a langgraph.json naming its graphs."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "agent.py").write_text(GRAPH_FILE)
    return tmp_path


def write_config(folder: Path, graphs: dict) -> Path:
    path = folder / "langgraph.json"
    path.write_text(json.dumps({"dependencies": ["."], "graphs": graphs}))
    return path


def registered(settings, graphs: dict) -> None:
    settings.CHECKPOINTS = {**settings.CHECKPOINTS, "GRAPHS": graphs}


def test_a_langgraph_json_registers_graphs_builders_and_factories(project, settings):
    config = write_config(
        project,
        {
            "compiled": "./src/agent.py:graph",
            "builder": "./src/agent.py:builder",
            "factory": {"path": "./src/agent.py:factory", "description": "made per call"},
            "bare": "./src/agent.py:bare_factory",
            "async": "./src/agent.py:async_factory",
            "module": f"{GRAPHS_MODULE}:chat",
        },
    )
    graphs = graphs_from_env(str(config))
    agent = str((project / "src" / "agent.py").resolve())
    # File paths are relative to the langgraph.json, made absolute; a module path stays.
    assert graphs == {
        "compiled": f"{agent}:graph",
        "builder": f"{agent}:builder",
        "factory": f"{agent}:factory",
        "bare": f"{agent}:bare_factory",
        "async": f"{agent}:async_factory",
        "module": f"{GRAPHS_MODULE}:chat",
    }
    # The variable as a path relative to the working directory, as the CLI is run.
    assert graphs_from_env("langgraph.json", cwd=project) == graphs
    registered(settings, graphs)
    assert check_graphs_load() == []
    for name in graphs:
        graph = load_graph(name)
        assert isinstance(graph, Pregel), name
    assert set(load_graph("builder").channels) >= {"steps"}
    assert "messages" in load_graph("module").channels
    # A factory taking a config is called with one, once (the graph is kept).
    module = sys.modules[_module_name(agent)]
    assert module.seen == [{"configurable": {}}]
    load_graph("factory")
    assert module.seen == [{"configurable": {}}]


def _module_name(path: str) -> str:
    # LangGraph's server names a graph file's module so: its path with "/" as "__".
    return path.replace("/", "__").replace(".py", "").lstrip(".")


def test_name_module_pairs(settings):
    graphs = graphs_from_env(f" agent = {GRAPHS_MODULE}:builder , chat={GRAPHS_MODULE}:make_chat,")
    assert graphs == {"agent": f"{GRAPHS_MODULE}:builder", "chat": f"{GRAPHS_MODULE}:make_chat"}
    registered(settings, graphs)
    assert check_graphs_load() == []
    assert "messages" in load_graph("chat").channels
    assert graphs_from_env(None) == graphs_from_env("  ") == {}


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        ("agent", "no such file"),
        ("agent=", "entry 1 ('agent=') is not name=pkg.module:attribute"),
        (f"a={GRAPHS_MODULE}:graph,chat", "entry 2 ('chat') is not name=pkg.module:attribute"),
        (f"a={GRAPHS_MODULE}:graph,a={GRAPHS_MODULE}:chat", "names graph 'a' twice"),
    ],
)
def test_a_variable_that_cannot_be_read_is_a_startup_error(tmp_path, raw, words):
    with pytest.raises(ImproperlyConfigured) as caught:
        graphs_from_env(raw, cwd=tmp_path)
    assert "CHECKPOINTS_GRAPHS" in str(caught.value)
    assert words in str(caught.value)


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("{not json", "is not valid JSON"),
        ('{"dependencies": ["."]}', 'has no "graphs" object'),
        ('{"graphs": {"agent": 3}}', "graph 'agent' is 3"),
    ],
)
def test_a_langgraph_json_that_cannot_be_read_is_a_startup_error(tmp_path, content, words):
    path = tmp_path / "langgraph.json"
    path.write_text(content)
    with pytest.raises(ImproperlyConfigured) as caught:
        graphs_from_langgraph_json(path)
    assert str(path) in str(caught.value) and words in str(caught.value)


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("./src/gone.py:graph", "no such file"),
        ("./src/agent.py:nope", "has no attribute 'nope'"),
        ("./src/agent.py:not_a_graph", "is a dict, not a LangGraph graph, builder or graph"),
        ("./src/agent.py:not_a_factory_result", "the factory returned a int"),
        ("./src/broken.py:graph", "invalid syntax"),
        ("./src/failing.py:graph", "failed to load: RuntimeError: no API key"),
        ("no_such_module_here:graph", "cannot be loaded: No module named"),
        ("src.broken:graph", "broken.py line 1: invalid syntax"),
        ("src.failing:graph", "failed to load: RuntimeError: no API key"),
    ],
)
def test_each_bad_entry_is_a_check_error_naming_it(project, settings, monkeypatch, spec, words):
    # The folder on sys.path, as the CLI puts a langgraph.json's dependencies: module paths
    # (this test's src package, not one an earlier test imported).
    monkeypatch.syspath_prepend(str(project))
    for name in ("src", "src.broken", "src.failing"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    (project / "src" / "broken.py").write_text("graph = (\n")
    (project / "src" / "failing.py").write_text("raise RuntimeError('no API key')\n")
    graphs = graphs_from_langgraph_json(
        write_config(project, {"good": "./src/agent.py:graph", "bad": spec})
    )
    registered(settings, graphs)
    errors = check_graphs_load()
    assert [e.id for e in errors] == [GRAPH_LOAD_ERROR]
    assert "'bad'" in errors[0].msg and words in errors[0].msg, errors[0].msg
    assert "CHECKPOINTS_GRAPHS" in errors[0].hint


def run_check(graphs: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "project.settings",
        "CHECKPOINTS_GRAPHS": graphs,
        "CHECKPOINTS_DATA_DIR": str(tmp_path / "data"),
    }
    return subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_manage_py_check_names_a_bad_graph(project, tmp_path):
    config = write_config(project, {"agent": "./src/agent.py:graph", "typo": "./src/agent.py:grph"})
    bad = run_check(str(config), tmp_path)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert GRAPH_LOAD_ERROR in bad.stderr and "'typo'" in bad.stderr
    assert "has no attribute 'grph'" in bad.stderr
    # A pair with no name is refused as the settings load, naming the variable.
    unreadable = run_check("oops,agent=x:y", tmp_path)
    assert unreadable.returncode == 1
    assert "CHECKPOINTS_GRAPHS entry 1 ('oops') is not name=pkg.module:attribute" in (
        unreadable.stderr
    )
    good = run_check(str(write_config(project, {"agent": "./src/agent.py:graph"})), tmp_path)
    assert GRAPH_LOAD_ERROR not in good.stderr + good.stdout
