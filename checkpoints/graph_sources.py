"""Where ``CHECKPOINTS["GRAPHS"]`` comes from without code: the ``CHECKPOINTS_GRAPHS`` variable.

Two forms, as a LangGraph user already writes them:

- a path to a ``langgraph.json``: its ``graphs`` map, each value ``"./agent.py:graph"`` (a
  file, relative to the langgraph.json as the LangGraph CLI reads it), ``"pkg.module:graph"``,
  or ``{"path": ..., "description": ...}``;
- ``name=pkg.module:attr`` pairs separated by commas (a ``./file.py:attr`` there is relative
  to the working directory).

The result is the ``{name: "module-or-absolute-file.py:attribute"}`` dict the store reads.
Only the variable's own form is checked here (settings load before any app, so nothing is
imported): a variable that cannot be read at all is an ImproperlyConfigured naming it; a
graph that cannot be loaded is a system check error (:mod:`checkpoints.graph_checks`).
Standard library only: ``project.settings`` imports this.
"""

from __future__ import annotations

import json
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

GRAPHS_ENV = "CHECKPOINTS_GRAPHS"


def graphs_from_env(raw: str | None, *, cwd: str | Path | None = None) -> dict[str, str]:
    """``CHECKPOINTS_GRAPHS`` as ``{name: spec}``; {} when unset or blank."""
    text = (raw or "").strip()
    if not text:
        return {}
    base = Path(cwd) if cwd is not None else Path.cwd()
    if "=" in text:
        return _pairs(text, base)
    return graphs_from_langgraph_json(base / text)


def _pairs(text: str, base: Path) -> dict[str, str]:
    graphs: dict[str, str] = {}
    for i, item in enumerate(text.split(",")):
        item = item.strip()
        if not item:
            continue
        name, eq, spec = (part.strip() for part in item.partition("="))
        if not eq or not name or not spec:
            raise ImproperlyConfigured(
                f"{GRAPHS_ENV} entry {i + 1} ({item!r}) is not name=pkg.module:attribute; "
                "write name=pkg.module:graph pairs separated by commas, or a path to a "
                "langgraph.json"
            )
        if name in graphs:
            raise ImproperlyConfigured(f"{GRAPHS_ENV} names graph {name!r} twice")
        graphs[name] = resolved_spec(spec, base)
    return graphs


def graphs_from_langgraph_json(path: Path) -> dict[str, str]:
    """The ``graphs`` map of the langgraph.json at ``path``, file paths made absolute."""
    where = f"{GRAPHS_ENV}={str(path)!r}"
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ImproperlyConfigured(
            f"{where}: no such file (a langgraph.json, or name=pkg.module:attribute pairs)"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ImproperlyConfigured(f"{where} cannot be read: {exc}") from None
    except ValueError as exc:
        raise ImproperlyConfigured(f"{where} is not valid JSON: {exc}") from None
    graphs = config.get("graphs") if isinstance(config, dict) else None
    if not isinstance(graphs, dict):
        raise ImproperlyConfigured(f'{where} has no "graphs" object mapping names to graphs')
    base = path.resolve().parent
    found: dict[str, str] = {}
    for name, value in graphs.items():
        spec = value.get("path") if isinstance(value, dict) else value
        if not isinstance(spec, str) or not spec.strip():
            raise ImproperlyConfigured(
                f'{where}: graph {name!r} is {value!r}; expected "./file.py:graph", '
                '"pkg.module:graph" or {"path": ...}'
            )
        found[name] = resolved_spec(spec.strip(), base)
    return found


def resolved_spec(spec: str, base: Path) -> str:
    """``spec`` with a file path (`is_file_spec`) made absolute against ``base``; a module
    path as it is. A spec without an attribute is kept as written: the check names it."""
    location, colon, attribute = spec.rpartition(":")
    if not colon or not is_file_spec(location):
        return spec
    return f"{(base / location).resolve()}:{attribute}"


def is_file_spec(location: str) -> bool:
    """Whether a spec's module part names a Python file rather than a module: LangGraph's
    rule (a "/" in it), and a bare ``agent.py`` too, which no module path can be."""
    return "/" in location or location.endswith(".py")
