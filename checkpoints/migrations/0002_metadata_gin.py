"""A GIN index on checkpoint metadata, on PostgreSQL only (SQLite has no GIN)."""

from django.db import migrations

from checkpoints.migration_ops import on_postgres

CREATE = (
    "CREATE INDEX IF NOT EXISTS checkpoint_metadata_gin "
    "ON checkpoints_checkpoint USING gin (metadata jsonb_path_ops)"
)
DROP = "DROP INDEX IF EXISTS checkpoint_metadata_gin"


class Migration(migrations.Migration):
    dependencies = [("checkpoints", "0001_initial")]
    operations = [migrations.RunPython(on_postgres(CREATE), on_postgres(DROP))]
