"""The system check that loads each registered graph, so a bad entry fails ``check``.

``checkpoints.checks`` checks the shape of ``CHECKPOINTS["GRAPHS"]`` without importing
anything (checkpoints.E020); this one imports each well-shaped entry, as the first call
needing the graph would, and names what went wrong: the file missing, the attribute missing,
a value that is no graph, the graph's code failing to load (bad syntax included).
"""

from __future__ import annotations

from django.core.checks import Error, Tags, register

from checkpoints.errors import CheckpointConfigError
from checkpoints.graphs import load_graph, registered

GRAPH_LOAD_ERROR = "checkpoints.E060"


@register(Tags.compatibility)
def check_graphs_load(app_configs=None, **kwargs) -> list[Error]:
    errors = []
    for name, spec in registered().items():
        if not _well_shaped(name, spec):
            continue  # checkpoints.E020 names it already
        try:
            load_graph(name)
        except CheckpointConfigError as exc:
            errors.append(
                Error(
                    exc.message,
                    hint=(
                        "Fix the entry in CHECKPOINTS_GRAPHS (or its langgraph.json): a "
                        "compiled graph, a StateGraph builder or a factory returning one."
                    ),
                    id=GRAPH_LOAD_ERROR,
                )
            )
    return errors


def _well_shaped(name, spec) -> bool:
    return (
        isinstance(name, str)
        and isinstance(spec, str)
        and spec.count(":") == 1
        and all(spec.split(":"))
    )
