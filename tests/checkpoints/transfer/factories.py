"""A saver factory for ``import_checkpoints --saver module:callable`` (test_commands)."""

from __future__ import annotations

import os
import sqlite3
from contextlib import contextmanager


@contextmanager
def sqlite_saver():
    """LangGraph's SqliteSaver on the file ``TRANSFER_TEST_SQLITE`` names, closed after."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(os.environ["TRANSFER_TEST_SQLITE"], check_same_thread=False)
    try:
        yield SqliteSaver(conn)
    finally:
        conn.close()
