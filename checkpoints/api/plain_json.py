"""Moved to :mod:`checkpoints.codec.render`; this name stays importable meanwhile."""

from checkpoints.codec.render import plain_mapping, to_plain  # noqa: F401
