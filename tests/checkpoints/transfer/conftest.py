"""LangGraph's own savers as the source of an import: PostgresSaver in a database of its
own on the shared server (created and dropped here), SqliteSaver in a temp file."""

from __future__ import annotations

import os
import sqlite3

import pytest

from tests.services import throwaway_postgres_database


@pytest.fixture(scope="session")
def lg_postgres_url():
    with throwaway_postgres_database(f"lg_transfer_{os.getpid()}") as url:
        yield url


@pytest.fixture
def lg_postgres(lg_postgres_url):
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(lg_postgres_url) as saver:
        saver.setup()
        saver.conn.execute("TRUNCATE checkpoints, checkpoint_blobs, checkpoint_writes")
        yield saver


@pytest.fixture
def lg_sqlite(tmp_path):
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(tmp_path / "langgraph.sqlite3", check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.path = str(tmp_path / "langgraph.sqlite3")
    yield saver
    conn.close()


@pytest.fixture(params=["PostgresSaver", "SqliteSaver"])
def peer(request):
    """LangGraph's own saver, holding nothing yet."""
    return request.getfixturevalue(
        "lg_postgres" if request.param == "PostgresSaver" else "lg_sqlite"
    )


@pytest.fixture
def peer_url(peer, request) -> str:
    """The peer's database as an import SOURCE."""
    if type(peer).__name__ == "SqliteSaver":
        return f"langgraph+sqlite:///{peer.path}"
    return f"langgraph+{request.getfixturevalue('lg_postgres_url')}"


@pytest.fixture
def target(store, monkeypatch):
    """The store the import command writes into: each provider in turn."""
    monkeypatch.setattr(
        "checkpoints.management.commands.import_checkpoints.get_saver", lambda: store
    )
    return store
