"""PostgreSQL's writing statements are written whole: the parts they share stay equal copies."""

from __future__ import annotations

from checkpoints.store.postgres.sql import LEVEL, PUT, PUT_BATCH, READ_LEVEL

THREAD_UPSERT = """WITH t AS (
    INSERT INTO checkpoints_thread (thread_id, owner_id, created_at, last_write_at, version)
    VALUES (%(thread_id)s, %(owner_id)s, %(now)s, %(now)s, 1)
    ON CONFLICT (thread_id) DO UPDATE SET last_write_at = EXCLUDED.last_write_at,
        owner_id = COALESCE(checkpoints_thread.owner_id, EXCLUDED.owner_id)
    RETURNING id
)"""
CHECKPOINT_COLUMNS = """INSERT INTO checkpoints_checkpoint (
    thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint,
    channel_versions, metadata, source, step, run_id, durability, created_at
)"""
REPLACE_WHOLE = """ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET
    parent_checkpoint_id = EXCLUDED.parent_checkpoint_id, type = EXCLUDED.type,
    checkpoint = EXCLUDED.checkpoint, channel_versions = EXCLUDED.channel_versions,
    metadata = EXCLUDED.metadata, source = EXCLUDED.source, step = EXCLUDED.step,
    run_id = EXCLUDED.run_id, durability = EXCLUDED.durability,
    created_at = EXCLUDED.created_at"""


def test_put_and_the_batch_stamp_and_store_a_checkpoint_alike():
    for statement in (PUT, PUT_BATCH):
        for part in (LEVEL, THREAD_UPSERT, CHECKPOINT_COLUMNS, REPLACE_WHOLE):
            assert statement.count(part) == 1, part.splitlines()[0]
    assert READ_LEVEL == "SELECT " + LEVEL
