"""The store's format generation, and the verdict on a store's recorded one."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from checkpoints.errors import (
    CheckpointStoreFormatError,
)

# Bumped whenever stored bytes change shape; a store written by another generation is refused.
FORMAT_GENERATION = 4


FORMAT_ERROR_HINT = (
    "reset the checkpoint store before starting this version; to keep its threads, export "
    "them with the version that wrote them (manage.py export_checkpoints --output FILE), "
    "reset (manage.py reset_checkpoint_store), then import FILE with this version "
    "(manage.py import_checkpoints FILE)"
)


def format_verdict(recorded: Iterable[Any], *, holds_checkpoints: bool, where: str) -> bool:
    """True when the store must record FORMAT_GENERATION now; raise when it is refused.

    ``recorded`` are the generations the store records, ``where`` names the store in the
    refusal ("the redis checkpoint store at 127.0.0.1:6379").
    """
    found = {str(g) for g in recorded}
    if not found:
        if holds_checkpoints:
            raise CheckpointStoreFormatError(
                f"{where} holds checkpoints but records no format generation: {FORMAT_ERROR_HINT}"
            )
        return True
    if found != {str(FORMAT_GENERATION)}:
        shown = max(found, key=lambda g: (len(g), g))
        raise CheckpointStoreFormatError(
            f"{where} is in format generation {shown}, this version writes "
            f"{FORMAT_GENERATION}: {FORMAT_ERROR_HINT}"
        )
    return False
