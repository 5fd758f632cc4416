"""A GIN index on checkpoint metadata, on PostgreSQL only (SQLite has no GIN)."""

from django.db import migrations

CREATE = (
    "CREATE INDEX IF NOT EXISTS checkpoint_metadata_gin "
    "ON checkpoints_checkpoint USING gin (metadata jsonb_path_ops)"
)
DROP = "DROP INDEX IF EXISTS checkpoint_metadata_gin"


def _on_postgres(sql):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(sql)

    return run


class Migration(migrations.Migration):
    dependencies = [("checkpoints", "0001_initial")]
    operations = [migrations.RunPython(_on_postgres(CREATE), _on_postgres(DROP))]
