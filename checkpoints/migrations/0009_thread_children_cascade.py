"""On PostgreSQL, a thread's checkpoints, blobs and pending writes go with its row.

Django's foreign keys are NO ACTION: deleting threads deleted each child table in the
same statement, and at commit PostgreSQL checked every child table again for each deleted
thread (one probe per table per thread, for rows already gone). ON DELETE CASCADE keeps
the same guarantee (no child row outlives its thread) with the children deleted by the
keys themselves: one delete_thread's execution 0.167 -> 0.090 ms, a sweep batch of 1,000
threads 52 -> 28 ms (bench/README, "delete_thread: what the foreign keys cost it").

Django's own deletes (the admin's) still delete the children first, as the model says.
The keys stay deferrable, initially deferred. Each is re-made NOT VALID (a moment's lock,
no scan), then validated in a transaction of its own, which scans the child table without
blocking its writes: this migration is not atomic, so a large store keeps taking puts.
SQLite keeps its keys: changing one there rebuilds the table, and its delete runs apart.
"""

from django.db import migrations

from checkpoints.migration_ops import on_postgres

CHILDREN = ("checkpoints_checkpoint", "checkpoints_channelblob", "checkpoints_pendingwrite")

# The child tables' foreign keys to checkpoints_thread: (name, table, column).
_KEYS = f"""
    SELECT c.conname, c.conrelid::regclass AS child, a.attname AS col, c.convalidated
    FROM pg_constraint c
    JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
    WHERE c.contype = 'f' AND c.confrelid = 'checkpoints_thread'::regclass
      AND c.conrelid IN ({", ".join(f"'{table}'::regclass" for table in CHILDREN)})
"""


def _rebuild(action: str) -> str:
    """Each key re-made with ``action``, NOT VALID (see VALIDATE)."""
    return f"""
DO $$
DECLARE r record;
BEGIN
  FOR r IN {_KEYS}
  LOOP
    -- No percent signs: Django composes a statement's parameters into its text.
    EXECUTE 'ALTER TABLE ' || r.child::text || ' DROP CONSTRAINT ' || quote_ident(r.conname)
      || ', ADD CONSTRAINT ' || quote_ident(r.conname) || ' FOREIGN KEY ('
      || quote_ident(r.col) || ') REFERENCES checkpoints_thread (id) {action}'
      || ' DEFERRABLE INITIALLY DEFERRED NOT VALID';
  END LOOP;
END $$
"""


CASCADE = _rebuild("ON DELETE CASCADE")
NO_ACTION = _rebuild("")
VALIDATE = f"""
DO $$
DECLARE r record;
BEGIN
  FOR r IN {_KEYS}
  LOOP
    IF NOT r.convalidated THEN
      EXECUTE 'ALTER TABLE ' || r.child::text || ' VALIDATE CONSTRAINT '
        || quote_ident(r.conname);
    END IF;
  END LOOP;
END $$
"""


class Migration(migrations.Migration):
    # Each statement its own transaction: the validation's scan must not run under the
    # lock that re-making a key takes.
    atomic = False
    dependencies = [("checkpoints", "0008_thread_declared_waiting")]
    # Backwards: NO_ACTION, then VALIDATE (the operations' reverses run last to first).
    operations = [
        migrations.RunPython(on_postgres(CASCADE), on_postgres(VALIDATE)),
        migrations.RunPython(on_postgres(VALIDATE), on_postgres(NO_ACTION)),
    ]
