"""A new PostgreSQL store's schema steps beyond its models' tables (`checkpoints.connect`).

What the migrations do on PostgreSQL besides the tables, the lock that serializes the
processes making one new store, and the schema editor's statements sent as one batch.
"""

from __future__ import annotations

# What the migrations do beyond their models' tables: (app, migration, attribute holding
# the statement) run after the tables (tests/checkpoints/store/test_new_store_schema.py
# holds the schema equal to the migrated one, and lists every migration that runs code).
EXTRA_SQL = (
    ("checkpoints", "0002_metadata_gin", "CREATE"),
    ("checkpoints", "0009_thread_children_cascade", "CASCADE"),
    ("checkpoints", "0009_thread_children_cascade", "VALIDATE"),
    ("checkpoints", "0010_values_lz4", "LZ4"),
)
# Serializes the processes making one new store (pg_advisory_xact_lock's key).
LOCK_KEY = 0x636B70745F6E6577  # "ckpt_new"


def lock_new_store(editor) -> None:
    """Wait for any other process making a new store on this database, in its transaction."""
    editor.execute("SELECT pg_advisory_xact_lock(%s)", [LOCK_KEY])


class Batch:
    """The schema editor's statements sent together, not one round trip each: ~90 of them
    make a new store (tables, then the indexes and foreign keys Django defers to the
    editor's end, sent here at the block's end). Each statement is the one Django made,
    composed as its PostgreSQL editor composes it; ``send`` sends what is held (before
    anything that reads the catalog)."""

    def __init__(self, editor) -> None:
        self.editor = editor
        self.held: list[str] = []

    def __enter__(self) -> Batch:
        self.editor.execute = self.hold
        return self

    def hold(self, sql, params=()) -> None:
        if params is not None:
            sql = self.editor.connection.ops.compose_sql(str(sql), params)
        self.held.append(str(sql))

    def send(self) -> None:
        if self.held:
            sql, self.held[:] = ";\n".join(self.held), []
            with self.editor.connection.cursor() as cursor:
                # Never prepared: a prepared statement holds one command.
                cursor.cursor.execute(sql, prepare=False)

    def __exit__(self, exc_type, *exc) -> None:
        try:
            if exc_type is None:
                for sql in self.editor.deferred_sql:
                    self.hold(sql)  # as the editor's own end runs them
                self.editor.deferred_sql.clear()
                self.send()
        finally:
            del self.editor.execute  # the editor's own again
