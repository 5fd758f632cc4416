"""Re-exports of the Redis saver under its old path (`checkpoints.store.redis`)."""

from checkpoints.store.redis.keys import FORMAT_KEY, REGISTRY_KEY, thread_prefix, thread_tag
from checkpoints.store.redis.saver import RedisSaver

__all__ = ["FORMAT_KEY", "REGISTRY_KEY", "RedisSaver", "thread_prefix", "thread_tag"]
