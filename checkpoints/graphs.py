"""Graphs registered in ``CHECKPOINTS["GRAPHS"]``: name -> ``"pkg.module:attribute"`` or
``"/path/to/file.py:attribute"``; the attribute a compiled graph, a StateGraph builder or a
factory returning one (called once, with a config when it takes one).

The idea of langgraph.json's ``graphs`` (the stock service reads one from the environment:
:mod:`checkpoints.graph_sources`). When the graph that wrote a thread is registered
(the thread's metadata names it as ``graph_id``, as LangGraph's server records it, or the
caller names it), time travel uses the graph's real channels and nodes: bulk updates run
through LangGraph's ``update_state`` (:mod:`checkpoints.timetravel.updates`) and snapshots
list the tasks ``graph.get_state`` lists. Without one, updates fall back to last-value
channels and refuse channels that have a reducer.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import inspect
import sys
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from django.core.signals import setting_changed
from langgraph.graph.state import StateGraph
from langgraph.pregel import Pregel

from checkpoints.conf import setting
from checkpoints.errors import CheckpointConfigError, InvalidCheckpointInput
from checkpoints.graph_sources import is_file_spec
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
    if not isinstance(spec, str) or ":" not in spec or not all(spec.rpartition(":")[::2]):
        raise CheckpointConfigError(
            f'{where}: expected "pkg.module:attribute" or "/path/to/file.py:attribute"'
        )
    location, _, attribute = spec.rpartition(":")
    module = _module_at(where, location)
    # The module's own namespace, as LangGraph's server reads it (never a module __getattr__).
    if attribute not in vars(module):
        raise CheckpointConfigError(f"{where}: {location} has no attribute {attribute!r}")
    return as_graph(where, vars(module)[attribute])


def _module_at(where: str, location: str) -> ModuleType:
    if not is_file_spec(location):
        try:
            return importlib.import_module(location)
        except ImportError as exc:
            raise CheckpointConfigError(f"{where} cannot be loaded: {exc}") from exc
        except SyntaxError as exc:
            raise CheckpointConfigError(_syntax_words(where, exc)) from exc
        except Exception as exc:  # the graph module's own code failed: named, never a traceback
            raise CheckpointConfigError(
                f"{where}: {location} failed to load: {type(exc).__name__}: {exc}"
            ) from exc
    path = Path(location)
    if not path.is_file():
        raise CheckpointConfigError(f"{where}: no such file {location}")
    # LangGraph's server names a graph file's module so (its path with "/" as "__"): the
    # same name in every process, so the types it defines read back from stored values.
    module_name = location.replace("/", "__").replace(".py", "").replace(" ", "_").lstrip(".")
    known = sys.modules.get(module_name)
    if known is not None and getattr(known, "__file__", None) == str(path):
        return known
    found = importlib.util.spec_from_file_location(module_name, path)
    if found is None or found.loader is None:
        raise CheckpointConfigError(f"{where}: {location} is not a Python file")
    module = importlib.util.module_from_spec(found)
    sys.modules[module_name] = module
    try:
        found.loader.exec_module(module)
    except SyntaxError as exc:
        del sys.modules[module_name]
        raise CheckpointConfigError(_syntax_words(where, exc)) from exc
    except Exception as exc:  # the graph file's own code failed: named, never a traceback
        del sys.modules[module_name]
        raise CheckpointConfigError(
            f"{where}: {location} failed to load: {type(exc).__name__}: {exc}"
        ) from exc
    return module


def _syntax_words(where: str, exc: SyntaxError) -> str:
    return f"{where}: {exc.filename} line {exc.lineno}: invalid syntax: {exc.msg}"


def as_graph(where: str, found: Any) -> Any:
    """``found`` as a compiled graph: a builder compiled, a factory called (with a config
    when it takes one, as LangGraph's server calls it) and its result taken the same way."""
    if isinstance(found, StateGraph):
        return found.compile()
    if isinstance(found, Pregel):
        return found
    if callable(found) and not isinstance(found, type):
        try:
            made = found({"configurable": {}}) if _takes_config(found) else found()
            if inspect.isawaitable(made):
                made = asyncio.run(_awaited(made))
        except Exception as exc:  # the factory's own code failed: named, never a traceback
            raise CheckpointConfigError(
                f"{where}: the graph factory failed: {type(exc).__name__}: {exc}"
            ) from exc
        if isinstance(made, StateGraph):
            return made.compile()
        if isinstance(made, Pregel):
            return made
        raise CheckpointConfigError(
            f"{where}: the factory returned a {type(made).__name__}, not a LangGraph graph"
        )
    raise CheckpointConfigError(
        f"{where} is a {type(found).__name__}, not a LangGraph graph, builder or graph factory"
    )


async def _awaited(made: Any) -> Any:
    return await made


def _takes_config(factory: Any) -> bool:
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(
        p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL) for p in params
    )


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
