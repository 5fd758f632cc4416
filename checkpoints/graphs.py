"""Graphs registered in ``CHECKPOINTS["GRAPHS"]``: name -> ``"pkg.module:attribute"``.

The idea of langgraph.json's ``graphs``. When the graph that wrote a thread is registered
(the thread's metadata names it as ``graph_id``, as LangGraph's server records it, or the
caller names it), time travel uses the graph's real channels and nodes: bulk updates run
through LangGraph's ``update_state`` (:mod:`checkpoints.timetravel.updates`) and snapshots
list the tasks ``graph.get_state`` lists. Without one, updates fall back to last-value
channels and refuse channels that have a reducer.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from django.core.signals import setting_changed
from langgraph.graph.state import StateGraph
from langgraph.pregel import Pregel

from checkpoints.conf import setting
from checkpoints.errors import CheckpointConfigError, InvalidCheckpointInput
from checkpoints.timetravel import TimeTravel
from checkpoints.timetravel.snapshot import thread_config

_loaded: dict[tuple[str, str], Any] = {}


def registered() -> dict[str, str]:
    return dict(setting("GRAPHS") or {})


def load_graph(name: str) -> Any:
    """The compiled graph registered as ``name`` (a StateGraph builder is compiled)."""
    spec = registered().get(name)
    if spec is None:
        known = ", ".join(sorted(registered())) or "none"
        raise InvalidCheckpointInput(
            f'graph {name!r} is not registered in CHECKPOINTS["GRAPHS"] (registered: {known})',
            field="graph",
        )
    key = (name, spec)
    if key not in _loaded:
        _loaded[key] = _import(name, spec)
    return _loaded[key]


def _import(name: str, spec: Any) -> Any:
    where = f'CHECKPOINTS["GRAPHS"][{name!r}] = {spec!r}'
    if not isinstance(spec, str) or spec.count(":") != 1:
        raise CheckpointConfigError(f'{where}: expected "pkg.module:attribute"')
    module_name, attribute = spec.split(":")
    try:
        found = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise CheckpointConfigError(f"{where} cannot be loaded: {exc}") from exc
    if isinstance(found, StateGraph):
        found = found.compile()
    if not isinstance(found, Pregel):
        raise CheckpointConfigError(
            f"{where} is a {type(found).__name__}, not a LangGraph graph or builder"
        )
    return found


def graph_name_of(metadata: Mapping[str, Any] | None) -> str | None:
    name = (metadata or {}).get("graph_id")
    return name if isinstance(name, str) and name else None


def thread_graph(saver, thread_id: str) -> str | None:
    """The registered graph the thread's head metadata names (``graph_id``), or None."""
    if not registered():
        return None
    head = saver.get_tuple(thread_config(thread_id))
    name = graph_name_of(head.metadata if head else None)
    return name if name in registered() else None


def time_travel_for(saver, thread_id: str | None = None, graph: str | None = None) -> TimeTravel:
    """TimeTravel over ``saver`` knowing the thread's registered graph, when there is one.

    ``graph`` names it explicitly (an unknown name is refused); otherwise the thread's
    head metadata ``graph_id`` picks it, and a thread written by an unregistered graph
    gets the graph-less fallback.
    """
    if graph is None and thread_id:
        graph = thread_graph(saver, thread_id)
    if graph is not None:
        return TimeTravel.for_graph(saver, load_graph(graph))
    return TimeTravel(saver, last_value_fallback=True)


def _forget(*, setting: str, **kwargs: Any) -> None:
    if setting == "CHECKPOINTS":
        _loaded.clear()


setting_changed.connect(_forget)
