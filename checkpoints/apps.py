"""App config: refuse to boot on a wrong CHECKPOINTS configuration; tune SQLite connections."""

import time

from django.apps import AppConfig
from django.core.exceptions import ImproperlyConfigured
from django.db import OperationalError

from checkpoints.conf import setting


class CheckpointsConfig(AppConfig):
    name = "checkpoints"
    verbose_name = "Checkpoints"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.backends.signals import connection_created

        from checkpoints import checks, signals  # noqa: F401  (registers checks and signals)

        connection_created.connect(tune_sqlite, dispatch_uid="checkpoints.tune_sqlite")

        errors = checks.configuration_errors()
        if errors:
            # A WSGI/ASGI boot never runs `manage.py check`, so refuse here too.
            raise ImproperlyConfigured(
                "Checkpoint store settings are wrong:\n"
                + "\n".join(f"- {e.msg} {e.hint or ''}".rstrip() for e in errors)
            )


# How long a SQLite writer waits for another's lock before "database is locked" (ms);
# Python's own default is 5 s, short for several graphs writing at once.
SQLITE_BUSY_TIMEOUT_MS = 20000


def tune_sqlite(sender, connection, **kwargs) -> None:
    """What concurrent graph runs need from a SQLite connection, where the project left it unset.

    A graph writes from several threads at once. WAL lets readers and a writer run side by
    side; the busy timeout makes a writer wait for the lock instead of failing; and IMMEDIATE
    transactions take the write lock when they begin: a deferred transaction that read first
    cannot upgrade to a write once another writer committed, and fails at once with
    "database is locked" whatever the timeout. A mode or timeout the project set in OPTIONS
    is kept (``checkpoints.checks`` warns about a DEFERRED mode).
    """
    if connection.vendor != "sqlite" or connection.is_in_memory_db():
        return
    options = connection.settings_dict.get("OPTIONS") or {}
    if connection.transaction_mode is None and "transaction_mode" not in options:
        # Read by Django's BEGIN for every atomic block on this connection.
        connection.transaction_mode = "IMMEDIATE"
    with connection.cursor() as cursor:
        if "timeout" not in options:
            cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        _incremental_if_new(cursor)
        _switch_to_wal(cursor)
        # The project's own init_command, if it names synchronous, has the last word.
        if "synchronous" not in str(options.get("init_command") or "").lower():
            level = str(setting("SQLITE_SYNCHRONOUS")).upper()
            if level in SQLITE_SYNCHRONOUS_LEVELS:  # anything else is refused at boot
                cursor.execute(f"PRAGMA synchronous = {level}")


# PRAGMA synchronous's values, weakest first.
SQLITE_SYNCHRONOUS_LEVELS = ("OFF", "NORMAL", "FULL", "EXTRA")


def _incremental_if_new(cursor) -> None:
    """A database without tables gets ``auto_vacuum = INCREMENTAL``, so a sweep can give
    freed pages back to the file system (`incremental_vacuum`).

    The mode only takes without a VACUUM before the first page is written; an init_command
    switching to WAL writes one, so an empty file that has it is vacuumed (at no cost).
    """
    cursor.execute("PRAGMA auto_vacuum")
    if cursor.fetchone()[0] != 0:
        return
    cursor.execute("SELECT 1 FROM sqlite_master LIMIT 1")
    if cursor.fetchone() is not None:
        return  # an existing store: `compact_checkpoint_store` converts it
    cursor.execute("PRAGMA auto_vacuum = INCREMENTAL")
    cursor.execute("PRAGMA page_count")
    if cursor.fetchone()[0] > 0:
        cursor.execute("VACUUM")


def _switch_to_wal(cursor) -> None:
    """``PRAGMA journal_mode = WAL``, waiting out another process's write.

    On a file not yet in WAL mode (a new one), SQLite refuses the switch at once with
    "database is locked" while another connection holds a write lock, without calling the
    busy handler (waiting could deadlock inside SQLite): four scripts opening one new file
    together failed that way. The switch is tried again until the busy timeout would have
    run out.
    """
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.01)
