"""Disk space of a PostgreSQL store: a report only.

Plain VACUUM (autovacuum's) makes dead rows' space reusable; VACUUM FULL would give it back
but locks every table for as long as it rewrites it, so only a report is offered.
"""

from __future__ import annotations

from django.apps import apps
from django.db import connections


def store_tables() -> list[str]:
    """The store's own tables (the checkpoints app's models)."""
    return sorted(model._meta.db_table for model in apps.get_app_config("checkpoints").get_models())


def compact(using: str) -> dict:
    """A report of the tables' sizes and what VACUUM would make reusable (the contract's
    ``compact``; ``reclaim_space`` keeps its None: autovacuum makes dead rows reusable)."""
    tables = []
    with connections[using].cursor() as cur:
        cur.execute(
            """
            SELECT c.relname, pg_relation_size(c.oid), pg_indexes_size(c.oid),
                   coalesce(s.n_live_tup, 0), coalesce(s.n_dead_tup, 0)
            FROM pg_class c LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
            WHERE c.relkind = 'r' AND c.relname = ANY(%s) AND pg_table_is_visible(c.oid)
            ORDER BY c.relname
            """,
            [store_tables()],
        )
        for name, table_bytes, index_bytes, live, dead in cur.fetchall():
            # Dead rows' share of the heap: what VACUUM would make reusable (an estimate
            # from the statistics collector; rows are not all the same size).
            reusable = table_bytes * dead // (live + dead) if live + dead else 0
            tables.append(
                {
                    "table": name,
                    "table_bytes": table_bytes,
                    "index_bytes": index_bytes,
                    "live_rows": live,
                    "dead_rows": dead,
                    "vacuum_reclaims_bytes": reusable,
                }
            )
    return {
        "provider": "postgres",
        "tables": tables,
        "table_bytes": sum(t["table_bytes"] for t in tables),
        "index_bytes": sum(t["index_bytes"] for t in tables),
        "vacuum_reclaims_bytes": sum(t["vacuum_reclaims_bytes"] for t in tables),
    }
