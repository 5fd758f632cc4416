"""LangGraph's reserved channel names, as stored: the one home of each.

LangGraph 1.x made its own constants private (importing them warns); the names are part of
the stored format, so they are stable.
"""

INTERRUPT = "__interrupt__"
RESUME = "__resume__"
ERROR = "__error__"
TASKS = "__pregel_tasks"
