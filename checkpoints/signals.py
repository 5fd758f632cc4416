"""Signals the store sends: after each committed write, and after a fork."""

from django.dispatch import Signal

# Sent after a checkpoint write is committed. kwargs: saver, thread_id, checkpoint_ns,
# checkpoint_id, envelope (the stored config, checkpoint and metadata), durability (the
# {level, at} stamp the store committed it with).
checkpoint_created = Signal(use_caching=True)

# Sent after a fork lands. kwargs: saver, source_thread_id, checkpoint_id, new_thread_id,
# snapshot. A receiver that raises is logged; the fork stays.
thread_forked = Signal()
