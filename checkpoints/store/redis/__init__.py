"""The Redis saver: checkpoints in plain Redis, one Lua script per write."""
