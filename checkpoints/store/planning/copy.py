"""Copying a thread onto another id: what each outcome means for the caller."""

from __future__ import annotations

import enum

from checkpoints.errors import (
    ThreadExists,
)


class CopyOutcome(enum.Enum):
    COPIED = "copied"
    NO_SOURCE = "no source"
    TARGET_HOLDS = "target holds checkpoints"


def copy_outcome(source: str, target: str, outcome: CopyOutcome) -> None:
    """Raise what a copy that ended so means to the caller (nothing to copy is no error)."""
    if outcome is CopyOutcome.TARGET_HOLDS:
        raise ThreadExists(
            f"cannot copy thread {source!r} onto {target!r}: the target already holds checkpoints"
        )
