"""Disk space of the ORM stores: giving a sweep's freed pages back, compacting, reporting.

SQLite keeps deleted pages in the file unless the file is in ``auto_vacuum=INCREMENTAL``
mode (new stores are, see ``checkpoints.apps``) and something asks for them back; a store
made before that is converted by one VACUUM (``compact_checkpoint_store``). PostgreSQL's
plain VACUUM (autovacuum's) makes dead rows' space reusable; VACUUM FULL would give it back
but locks every table for as long as it rewrites it, so only a report is offered.
"""

from __future__ import annotations

import os

from django.apps import apps
from django.db import connections

# Pages one sweep batch gives back at most (64 MB at SQLite's default 4 KB page): bounds
# how long the write lock is held. A batch deletes at most SWEEP_BATCH_SIZE threads.
SQLITE_VACUUM_PAGES = 16384


def store_tables() -> list[str]:
    """The store's own tables (the checkpoints app's models)."""
    return sorted(model._meta.db_table for model in apps.get_app_config("checkpoints").get_models())


class SqliteSpace:
    """The disk-space hooks of the store contract on SQLite (a mixin of `SqliteStore`)."""

    using: str

    def reclaim_space(self, *, final: bool = False) -> int | None:
        with self._warm(write=True):  # type: ignore[attr-defined]
            wrapper = connections[self.using]
            if wrapper.in_atomic_block:
                return None  # executescript would commit the caller's transaction
            with wrapper.cursor() as cur:
                before = _sqlite_bytes(cur)
                # Through execute() sqlite3 steps the pragma once: one page. executescript
                # runs it to the end (and commits first, which autocommit has nothing for).
                with wrapper.wrap_database_errors:
                    wrapper.connection.executescript(
                        f"PRAGMA incremental_vacuum({SQLITE_VACUUM_PAGES})"
                    )
                freed = before - _sqlite_bytes(cur)
                if final:
                    # The file itself shrinks when the WAL is checkpointed into it.
                    cur.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                    cur.fetchall()
        return freed

    def compact(self) -> dict:
        conn = connections[self.using]
        path = str(conn.settings_dict["NAME"])
        with self._warm(write=True):  # type: ignore[attr-defined]
            with conn.cursor() as cur:
                cur.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                cur.fetchall()
                before = _file_bytes(path)
                cur.execute("PRAGMA auto_vacuum")
                was = cur.fetchone()[0]
                # Takes effect with the VACUUM: the file is rebuilt in incremental mode.
                cur.execute("PRAGMA auto_vacuum = INCREMENTAL")
                cur.execute("VACUUM")
                cur.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                cur.fetchall()
                cur.execute("PRAGMA auto_vacuum")
                now = cur.fetchone()[0]
        return {
            "provider": "sqlite",
            "path": path,
            "bytes_before": before,
            "bytes_after": _file_bytes(path),
            "auto_vacuum_before": _AUTO_VACUUM.get(was, str(was)),
            "auto_vacuum": _AUTO_VACUUM.get(now, str(now)),
        }


class PostgresSpace:
    """The disk-space hooks on PostgreSQL (a mixin of `PostgresStore`): a report only.

    ``reclaim_space`` keeps the contract's None: autovacuum makes dead rows reusable.
    """

    using: str

    def compact(self) -> dict:
        tables = []
        with connections[self.using].cursor() as cur:
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


_AUTO_VACUUM = {0: "none", 1: "full", 2: "incremental"}


def _sqlite_bytes(cur) -> int:
    cur.execute("PRAGMA page_count")
    pages = cur.fetchone()[0]
    cur.execute("PRAGMA page_size")
    return pages * cur.fetchone()[0]


def _file_bytes(path: str) -> int:
    """The database file and its WAL, as the file system counts them."""
    return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))
