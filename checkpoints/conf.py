"""Read the CHECKPOINTS settings dict, with defaults, reloaded when settings change."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.signals import setting_changed

from checkpoints.errors import CheckpointConfigError

DEFAULTS: dict[str, Any] = {
    "PROVIDER": "sqlite",
    # provider -> dotted path of a saver class, added to or replacing the shipped ones
    "SAVERS": {},
    "CONN_STRING": None,
    "RETENTION_WAITING_MINUTES": 10080,
    "RETENTION_FINISHED_MINUTES": 1440,
    "INLINE_COMPRESS_BYTES": 65536,
    "MAX_CHECKPOINTS": 0,
    # "auto": named prepared statements unless a pooler sits in front; True or False forces.
    "PG_PREPARED_STATEMENTS": "auto",
    "PG_POOL": True,
    # How long a store's durability level is trusted before it is read again (seconds).
    "DURABILITY_RECHECK_SECONDS": 30,
    # PRAGMA synchronous for the store's SQLite connections, unless the database's own
    # init_command sets it: FULL syncs every commit (the stamp says "disk"); NORMAL in WAL
    # mode does not (a power loss can take the last commits: the stamp says "os").
    "SQLITE_SYNCHRONOUS": "FULL",
    # How long a write waits for a synchronous standby's confirmation before it fails with
    # StandbyWaitTimeout (None: as long as PostgreSQL waits, which is forever).
    "PG_STANDBY_WAIT_SECONDS": None,
    "CODEC_ALLOWED_MODULES": [
        "langchain",
        "langchain_core",
        "langgraph",
        "checkpoints",
        "retention",
    ],
    "CODEC_MAX_DEPTH": 200,
    # None: LangGraph's default (permissive unless LANGGRAPH_STRICT_MSGPACK is set); True:
    # permissive; a list of "module.Class" names: strict, those types (and the graph's) allowed.
    "ALLOWED_MSGPACK_MODULES": None,
    # A stored type the reader does not rebuild (checkpoints.codec.msgpack_read): "warn"
    # reads its stored data and logs a warning, as LangGraph does; "raise" refuses it.
    "BLOCKED_TYPES": "warn",
    "CODEC_MAX_BYTES": 64 * 1024 * 1024,
    # Decompressed bytes one checkpoint read (its values and pending writes together) and one
    # response (an API call, an admin page: a history page reads 100) may produce; None: no
    # bound. Two values at CODEC_MAX_BYTES per checkpoint; the largest benchmarked checkpoint
    # (a 256 KB document, a 10,000-message list) is ~5 MB, so a 101-row page is ~500 MB.
    "MAX_CHECKPOINT_BYTES": 128 * 1024 * 1024,
    "MAX_RESPONSE_BYTES": 512 * 1024 * 1024,
    "LIVE_THREAD_FILTERS": {
        "interrupts": "retention.filters.interrupts",
        "parks": "retention.filters.parks",
    },
    "SWEEP_BATCH_SIZE": 1000,
    # How long a sweep's lease on an ORM store lasts unless renewed (it is, every batch):
    # how long a crashed sweep on another host keeps the next one out.
    "SWEEP_LEASE_SECONDS": 60,
    "SWEEP_SCHEDULE": None,
    # A fanned-out sweep's batch that fails is retried this many times, this long apart.
    "SWEEP_BATCH_RETRIES": 3,
    "SWEEP_BATCH_RETRY_SECONDS": 10,
    "ENCRYPTION_KEYS": [],
    # A label per store, part of every sealed value's associated data (see codec.encryption).
    "ENCRYPTION_STORE_ID": "",
    # True once every row is in the bound format: unbound (format 1) sealed rows are refused.
    "ENCRYPTION_REQUIRE_BOUND": False,
    # name -> "pkg.module:attribute" of a compiled graph or StateGraph builder.
    "GRAPHS": {},
    # The URL of the LangGraph deployment that runs the registered graphs (this server only
    # keeps their checkpoints): the console's ready-to-copy resume calls aim there; None
    # shows a placeholder.
    "GRAPH_SERVER_URL": None,
    # How many of a message list's messages the admin and the API show at once (the last
    # ones; `messages_before` pages back): a 10,000-message list rendered whole takes seconds.
    "MESSAGES_PAGE_SIZE": 50,
    # Characters of a value's indented JSON the admin shows before cutting it (with a link to
    # download it whole): a few MiB rendered as a tree makes a page of tens of MB.
    "ADMIN_VALUE_PREVIEW_BYTES": 256 * 1024,
    # Calls one token may make to the store service (/store/v1/, the remote saver's), in
    # DRF's rate form ("5000/s"); None: no limit. Generous: a worker makes a few per step.
    "STORE_SERVICE_RATE": "5000/s",
}

_cache: dict[str, Any] | None = None


def store_settings() -> dict[str, Any]:
    """The effective CHECKPOINTS dict: the project's values over DEFAULTS."""
    global _cache
    if _cache is None:
        merged = dict(DEFAULTS)
        merged.update(getattr(settings, "CHECKPOINTS", {}) or {})
        _cache = merged
    return _cache


def setting(key: str) -> Any:
    return store_settings()[key]


def _reload(*, setting: str, **kwargs: Any) -> None:
    global _cache
    if setting == "CHECKPOINTS":
        _cache = None


setting_changed.connect(_reload)


# CHECKPOINTS["PG_PREPARED_STATEMENTS"] -> "on", "off" or "auto". Here, not beside the
# PostgreSQL pool, so reading the setting (a SQLite saver, the boot checks) loads no psycopg.
PREPARE_MODES = {True: "on", False: "off", "on": "on", "off": "off", "auto": "auto"}
PREPARE_MODES.update({"1": "on", "0": "off", "true": "on", "false": "off"})


def prepare_mode(value) -> str:
    """``CHECKPOINTS["PG_PREPARED_STATEMENTS"]`` as "on", "off" or "auto"."""
    mode = PREPARE_MODES.get(value.strip().lower() if isinstance(value, str) else value)
    if mode is None:
        raise CheckpointConfigError(
            f"CHECKPOINTS['PG_PREPARED_STATEMENTS'] is {value!r}: use 'auto', True or False",
            field="PG_PREPARED_STATEMENTS",
        )
    return mode


def has_database() -> bool:
    """Whether Django has a real default database (a standalone Redis or memory script
    configures none: the audit trail and parks, which live there, are then off)."""
    from django.db import connections

    engine = connections.settings.get("default", {}).get("ENGINE", "")
    return bool(engine) and not engine.endswith(".dummy")
