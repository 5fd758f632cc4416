"""The store's channel versions, free of Django so the remote saver computes them too."""

from __future__ import annotations

import random


def next_version(current: str | int | float | None) -> str:
    """Zero-padded counter plus a random tail: strings that sort in write order."""
    if current is None:
        number = 0
    elif isinstance(current, (int, float)):
        number = int(current)
    else:
        number = int(str(current).split(".", 1)[0])
    return f"{number + 1:032}.{random.random():016}"
