"""Small helpers to write checkpoints directly through a saver in tests."""

from __future__ import annotations

from langgraph.checkpoint.base import empty_checkpoint


def put_chain(saver, thread_id: str, values: dict, *, steps: int = 1, ns: str = ""):
    """Put ``steps`` checkpoints on a thread, each holding ``values``; return the last config."""
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns}}
    versions: dict = {}
    for step in range(1, steps + 1):
        checkpoint = empty_checkpoint()
        new_versions = {}
        for channel in values:
            versions[channel] = saver.get_next_version(versions.get(channel), None)
            new_versions[channel] = versions[channel]
        checkpoint["channel_values"] = dict(values)
        checkpoint["channel_versions"] = dict(versions)
        config = saver.put(config, checkpoint, {"source": "loop", "step": step}, new_versions)
    return config
