"""Re-exports of the memory saver under its old path (`checkpoints.store.memory`)."""

from checkpoints.store.memory import STORE, MemorySaver, MemoryStore

__all__ = ["STORE", "MemorySaver", "MemoryStore"]
