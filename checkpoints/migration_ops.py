"""Operations the store's migrations share."""

from __future__ import annotations


def on_postgres(sql: str):
    """A RunPython function running ``sql`` on PostgreSQL and nothing elsewhere."""

    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(sql)

    return run
