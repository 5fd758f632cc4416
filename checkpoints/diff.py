"""Moved to :mod:`checkpoints.timetravel.diff`; this name stays importable meanwhile."""

from checkpoints.timetravel.diff import (  # noqa: F401
    MISSING,
    ChannelChange,
    baseline,
    channel_changes,
    value_change,
)
