"""Time travel over any saver: read state at a checkpoint, walk history, roll back, fork,
and write synthetic supersteps.

``snapshot`` builds what is shown, ``planning`` decides what is written (pure), ``service``
holds :class:`TimeTravel`, whose operations are each written once and driven sync or async,
and ``diff`` compares the values of two checkpoints. Only the root namespace ("") is
addressed: subgraph checkpoints ride along with their parents' and are not navigated on
their own.
"""

from checkpoints.timetravel.planning import NOT_INHERITED
from checkpoints.timetravel.service import ChannelFactory, TimeTravel
from checkpoints.timetravel.snapshot import (
    PULL,
    ROOT_NS,
    SNAPSHOT_BUMPS_KEY,
    TASKS_CHANNEL,
    StateSnapshot,
)

__all__ = [
    "NOT_INHERITED",
    "PULL",
    "ROOT_NS",
    "SNAPSHOT_BUMPS_KEY",
    "TASKS_CHANNEL",
    "ChannelFactory",
    "StateSnapshot",
    "TimeTravel",
]
