"""Time travel over any saver: read state at a checkpoint, walk history, roll back, fork,
and write synthetic supersteps.

``snapshot`` builds what is shown, ``planning`` decides what is written (pure), ``service``
holds :class:`TimeTravel`, whose operations are each written once and driven sync or async,
``io`` fulfils the requests they yield, ``updates`` is the one engine entrances apply state
updates through (``update_state``), and ``diff`` compares the values of two checkpoints.
Every operation addresses the root namespace ("") unless given a subgraph's
``checkpoint_ns`` (``TimeTravel.namespaces`` lists them). Rollback and fork behave as
LangGraph's own ``update_state(target, None)``:
tests/checkpoints/timetravel/test_timetravel_parity.py proves it against InMemorySaver.
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
