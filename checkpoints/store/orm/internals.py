"""Django private APIs the ORM store relies on, each where measured necessary.

`tests/checkpoints/store/test_dialects.py` fails if a Django upgrade moves one.
(SQLite's connection lending patches two more, see `checkpoints.store.sqlite.connection`.)
"""

from __future__ import annotations


def raw_delete(queryset) -> None:
    """Delete the rows in one DELETE statement, without collecting them first.

    ``QuerySet._raw_delete``: the public ``delete()`` first SELECTs every row to send
    signals and follow cascades, which the store's tables have none of; a sweep deletes
    thousands of rows, and the SELECT doubled its time.
    """
    queryset._raw_delete(queryset.db)
