"""The remote saver: LangGraph's checkpoint saver over the store service's `/store/v1/`.

A worker holds no database connection and needs LangGraph and httpx only::

    from checkpoints import from_conn_string

    with from_conn_string("checkpoints+https://store.example.com", api_key=TOKEN) as saver:
        graph = builder.compile(checkpointer=saver)

Nothing here imports Django, psycopg or redis (`tests/remote/` checks it).
"""

from __future__ import annotations

from checkpoints.errors import StoreUnavailable
from checkpoints.remote.client import RemoteSaver, RemoteStoreError, is_remote_url, service_url

__all__ = ["RemoteSaver", "RemoteStoreError", "StoreUnavailable", "is_remote_url", "service_url"]
