"""LangGraph's reserved channel names, as stored: the one home of each.

LangGraph 1.x made its own constants private (importing them warns); the names are part of
the stored format, so they are stable.
"""

INTERRUPT = "__interrupt__"
RESUME = "__resume__"
ERROR = "__error__"
TASKS = "__pregel_tasks"

# LangGraph's bookkeeping channels: __start__, __pregel_tasks, branch:to:x, join:a+b:c.
_OWN_PREFIXES = ("__", "branch:", "join:")


def is_langgraph_channel(name: str) -> bool:
    """One of LangGraph's own bookkeeping channels, not a key of the graph's state."""
    return name.startswith(_OWN_PREFIXES)
