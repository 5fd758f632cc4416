"""On PostgreSQL, stored values are compressed with LZ4 where the server has it, not pglz.

PostgreSQL compresses a value past ~2 KB before it stores it (TOAST) and expands it on
every read, by default with pglz. A chat thread's message list changes at every step, so
each put had the server compress it and each get expand it again. With LZ4 the heavy
workload's puts ran at 1.3-1.45x the rate, and reading the live workload's latest checkpoint
took 0.12 ms of execution instead of 0.18-0.21 (bench/README, "Values compressed with LZ4").
Stored bytes grow a little (the value tables +13%; the bench's 0.52x PostgresSaver's ->
0.58-0.59x). Values already stored keep pglz until rewritten; PostgreSQL reads either. A
server without LZ4 (before 14, or built without it) keeps pglz: nothing changes there.
"""

from django.db import migrations

from checkpoints.migration_ops import on_postgres

# (table, column): the bytes of checkpoints, channel values and pending writes.
VALUE_COLUMNS = (
    ("checkpoints_checkpoint", "checkpoint"),
    ("checkpoints_channelblob", "blob"),
    ("checkpoints_pendingwrite", "blob"),
)


def _compression(method: str) -> str:
    alters = " ".join(
        f"EXECUTE 'ALTER TABLE {table} ALTER COLUMN {column} SET COMPRESSION {method}';"
        for table, column in VALUE_COLUMNS
    )
    # EXECUTE: a server before 14 would not parse SET COMPRESSION.
    return f"""
DO $$
BEGIN
  IF current_setting('server_version_num')::int >= 140000 AND EXISTS (
    SELECT 1 FROM pg_settings
    WHERE name = 'default_toast_compression' AND 'lz4' = ANY(enumvals)
  ) THEN
    {alters}
  END IF;
END $$
"""


LZ4 = _compression("lz4")
DEFAULT = _compression("default")


class Migration(migrations.Migration):
    dependencies = [("checkpoints", "0009_thread_children_cascade")]
    operations = [migrations.RunPython(on_postgres(LZ4), on_postgres(DEFAULT))]
