"""The store behind the service under test: its SQLite (the test database) or Redis.

A Redis store keeps values in a form of its own (the faithful JSON codec), so the service
converts what it is sent; the remote tests run on both to show the client cannot tell.
"""

from __future__ import annotations

from typing import Any

BACKINGS = ["sqlite", "redis"]


def service_on(request, backing: str, **options) -> tuple[Any, Any]:
    """The remote saver on a service whose store is ``backing``, and the in-process saver
    on that same store."""
    from checkpoints.store.registry import get_saver
    from tests.store_helpers import remote_saver

    if backing == "redis":
        url = request.getfixturevalue("redis_url")
        settings = request.getfixturevalue("settings")
        settings.CHECKPOINTS = {**settings.CHECKPOINTS, "PROVIDER": "redis", "CONN_STRING": url}
        remote, local = remote_saver(request, **options), get_saver("redis", conn_string=url)
    else:
        remote, local = remote_saver(request, **options), get_saver("sqlite", using="default")
    assert remote.provider == local.provider == backing
    return remote, local


def stored_blobs(local: Any, thread_id: str) -> dict[str, tuple[str, bytes]]:
    """The thread's stored channel values as the store holds them, by channel."""
    if local.provider == "redis":
        from checkpoints.store.redis.keys import dec, ns_hex, thread_prefix, unpack

        held = local.client.hgetall(f"{thread_prefix(thread_id)}b:{ns_hex('')}")
        out = {}
        for field, value in held.items():
            type_, data = unpack(value)
            out[dec(unpack(field)[0])] = (dec(type_), bytes(data))
        return out
    from checkpoints.models import ChannelBlob

    rows = ChannelBlob.objects.filter(thread__thread_id=thread_id)
    return {row.channel: (row.type, bytes(row.blob)) for row in rows}
