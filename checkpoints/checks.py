"""System checks that refuse a wrong CHECKPOINTS configuration, naming the variable; from
the command line, checks that connect to what the settings name (checkpoints.reachability)."""

from __future__ import annotations

import contextlib
import contextvars
import os

from django.core.checks import Error, Tags, Warning, register

from checkpoints.codec.encryption import parse_key
from checkpoints.conf import PREPARE_MODES, store_settings
from checkpoints.errors import CheckpointConfigError
from checkpoints.reachability import all_findings
from checkpoints.store.registry import configured_provider, path_errors, providers, saver_class
from checkpoints.store.sqlite.connection import SQLITE_SYNCHRONOUS_LEVELS, synchronous_level

REMOVED_VARIABLES = {
    "LLM_PROVIDER_CHECKPOINT_TTL_MINUTES": (
        "replaced by LLM_PROVIDER_CHECKPOINT_RETENTION_WAITING_MINUTES and "
        "LLM_PROVIDER_CHECKPOINT_RETENTION_FINISHED_MINUTES"
    ),
    "FLOW_CHECKPOINT_RETENTION_DAYS": (
        "replaced by the two retention variables and the sweep_checkpoints operation"
    ),
}
# The environment variable behind each setting, so a refusal names what the operator set.
ENV_NAMES = {
    "PROVIDER": "LLM_PROVIDER_CHECKPOINT",
    "RETENTION_WAITING_MINUTES": "LLM_PROVIDER_CHECKPOINT_RETENTION_WAITING_MINUTES",
    "RETENTION_FINISHED_MINUTES": "LLM_PROVIDER_CHECKPOINT_RETENTION_FINISHED_MINUTES",
    "INLINE_COMPRESS_BYTES": "LLM_PROVIDER_CHECKPOINT_INLINE_COMPRESS_BYTES",
    "MAX_CHECKPOINTS": "CHECKPOINTS_MAX_CHECKPOINTS",
    "PG_PREPARED_STATEMENTS": "CHECKPOINTS_PG_PREPARED_STATEMENTS",
    "SWEEP_LEASE_SECONDS": "CHECKPOINTS_SWEEP_LEASE_SECONDS",
    "SWEEP_BATCH_SIZE": "CHECKPOINTS_SWEEP_BATCH_SIZE",
    "SWEEP_BATCH_RETRIES": "CHECKPOINTS_SWEEP_BATCH_RETRIES",
    "SWEEP_BATCH_RETRY_SECONDS": "CHECKPOINTS_SWEEP_BATCH_RETRY_SECONDS",
    "DURABILITY_RECHECK_SECONDS": "CHECKPOINTS_DURABILITY_RECHECK_SECONDS",
    "PG_STANDBY_WAIT_SECONDS": "CHECKPOINTS_PG_STANDBY_WAIT_SECONDS",
    "SQLITE_SYNCHRONOUS": "CHECKPOINTS_SQLITE_SYNCHRONOUS",
}


def _name(key: str) -> str:
    return (
        f"{ENV_NAMES[key]} (CHECKPOINTS['{key}'])" if key in ENV_NAMES else f"CHECKPOINTS['{key}']"
    )


def configuration_errors() -> list[Error]:
    """Every refusal for the current settings and environment; empty when all is well."""
    conf = store_settings()
    errors: list[Error] = []
    for variable, replacement in REMOVED_VARIABLES.items():
        if variable in os.environ:
            errors.append(
                Error(
                    f"{variable} is set to {os.environ[variable]!r} but was removed.",
                    hint=f"Unset it; it is {replacement}.",
                    id="checkpoints.E001",
                )
            )
    provider = conf["PROVIDER"]
    known = providers()
    if provider not in known:
        errors.append(
            Error(
                f"{_name('PROVIDER')} is {provider!r}, not a known provider.",
                hint="Use one of: " + ", ".join(known) + ".",
                id="checkpoints.E002",
            )
        )
    errors.extend(_saver_path_errors())
    numbers_ok = True
    for key, nullable in (
        ("RETENTION_WAITING_MINUTES", False),
        ("RETENTION_FINISHED_MINUTES", False),
        ("INLINE_COMPRESS_BYTES", True),
        ("MAX_CHECKPOINTS", False),
    ):
        value = conf[key]
        if value is None and nullable:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            numbers_ok = False
            errors.append(
                Error(
                    f"{_name(key)} is {value!r}, not a whole number.",
                    hint="Set a whole number of "
                    + ("bytes, or null to turn compression off." if nullable else "minutes/items."),
                    id="checkpoints.E003",
                )
            )
        elif value < 0:
            numbers_ok = False
            errors.append(
                Error(
                    f"{_name(key)} is {value}, which is negative.",
                    hint="Set zero or a positive number.",
                    id="checkpoints.E004",
                )
            )
    errors.extend(_engine_errors(conf))
    errors.extend(_encryption_errors(conf.get("ENCRYPTION_KEYS") or []))
    errors.extend(_binding_errors(conf))
    errors.extend(_graph_errors(conf.get("GRAPHS")))
    errors.extend(_read_bound_errors(conf))
    synchronous = conf.get("SQLITE_SYNCHRONOUS")
    if str(synchronous).upper() not in SQLITE_SYNCHRONOUS_LEVELS:
        errors.append(
            Error(
                f"{_name('SQLITE_SYNCHRONOUS')} is {synchronous!r}, not a SQLite synchronous "
                "level.",
                hint="Use FULL (each commit synced), EXTRA, NORMAL or OFF.",
                id="checkpoints.E010",
            )
        )
    if numbers_ok:
        waiting = conf["RETENTION_WAITING_MINUTES"]
        finished = conf["RETENTION_FINISHED_MINUTES"]
        if finished > waiting:
            errors.append(
                Error(
                    f"{_name('RETENTION_FINISHED_MINUTES')} is {finished}, greater than "
                    f"{_name('RETENTION_WAITING_MINUTES')} {waiting}.",
                    hint="The finished retention must not exceed the waiting retention.",
                    id="checkpoints.E005",
                )
            )
    return errors


def _read_bound_errors(conf) -> list[Error | Warning]:
    """The bytes one value, a checkpoint and a response may hold, written and read alike
    (codec.compression)."""
    found: list[Error | Warning] = []
    bounds = {}
    for key in (
        "CODEC_MAX_BYTES",
        "MAX_CHECKPOINT_BYTES",
        "MAX_RESPONSE_BYTES",
        "ADMIN_VALUE_PREVIEW_BYTES",
    ):
        value = conf.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            found.append(
                Error(
                    f"{_name(key)} is {value!r}, not a positive whole number of bytes.",
                    hint="Set the most (decompressed) bytes it may hold, or null for none.",
                    id="checkpoints.E030",
                )
            )
        else:
            bounds[key] = value
    per_value = bounds.get("CODEC_MAX_BYTES")
    per_checkpoint = bounds.get("MAX_CHECKPOINT_BYTES")
    smaller = [
        (key, value, floor, name)
        for key, value, floor, name in (
            ("MAX_CHECKPOINT_BYTES", per_checkpoint, per_value, "CODEC_MAX_BYTES"),
            ("MAX_RESPONSE_BYTES", bounds.get("MAX_RESPONSE_BYTES"), per_checkpoint, None),
        )
        if isinstance(value, int) and isinstance(floor, int) and value < floor
    ]
    for key, value, floor, name in smaller:
        name = name or "MAX_CHECKPOINT_BYTES"
        found.append(
            Warning(
                f"{_name(key)} is {value}, less than CHECKPOINTS[{name!r}] ({floor}): a "
                "value (or checkpoint) within its own limit could not be written or read back.",
                hint=f"Raise {key} to at least {name}, or lower {name}.",
                id="checkpoints.W030",
            )
        )
    return found


def _engine_errors(conf) -> list[Error]:
    """The prepared-statement mode, the sweep's lease and the durability re-read interval."""
    errors = []
    mode = conf.get("PG_PREPARED_STATEMENTS")
    if (mode.strip().lower() if isinstance(mode, str) else mode) not in PREPARE_MODES:
        errors.append(
            Error(
                f"{_name('PG_PREPARED_STATEMENTS')} is {mode!r}.",
                hint="Use auto (prepare unless a pooler such as PgBouncer is in front), 1 or 0.",
                id="checkpoints.E021",
            )
        )
    for key, least in (
        ("SWEEP_LEASE_SECONDS", 1),
        ("SWEEP_BATCH_RETRY_SECONDS", 0),
        ("DURABILITY_RECHECK_SECONDS", 0),
        ("PG_STANDBY_WAIT_SECONDS", 1),
    ):
        value = conf.get(key)
        if key == "PG_STANDBY_WAIT_SECONDS" and value is None:
            continue  # unset: no bound of ours
        if isinstance(value, bool) or not isinstance(value, int | float) or value < least:
            errors.append(
                Error(
                    f"{_name(key)} is {value!r}, not a number of seconds of at least {least}.",
                    hint="Set a whole number of seconds.",
                    id="checkpoints.E022",
                )
            )
    for key, least in (("SWEEP_BATCH_SIZE", 1), ("SWEEP_BATCH_RETRIES", 0)):
        value = conf.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            errors.append(
                Error(
                    f"{_name(key)} is {value!r}, not a whole number of at least {least}.",
                    hint="Set a whole number.",
                    id="checkpoints.E022",
                )
            )
    return errors


def _graph_errors(graphs) -> list[Error]:
    # The shape only: importing a graph at check time would run the project's graph code.
    if not isinstance(graphs, dict):
        return [
            Error(
                f"CHECKPOINTS['GRAPHS'] is {graphs!r}, not a dict of name to graph path.",
                hint='Use {"name": "pkg.module:graph"}.',
                id="checkpoints.E020",
            )
        ]
    return [
        Error(
            f"CHECKPOINTS['GRAPHS'][{name!r}] is {path!r}, not \"pkg.module:attribute\".",
            hint="Name the module and the compiled graph (or StateGraph builder) in it.",
            id="checkpoints.E020",
        )
        for name, path in graphs.items()
        if not isinstance(name, str)
        or not isinstance(path, str)
        or path.count(":") != 1
        or not all(path.split(":"))
    ]


def _saver_path_errors() -> list[Error]:
    return [
        Error(
            f"CHECKPOINTS['SAVERS'][{provider!r}] is {path!r}, which cannot be imported: {why}",
            hint="Name a saver class by its dotted path, such as 'myproject.savers.MySaver'.",
            id="checkpoints.E007",
        )
        for provider, path, why in path_errors()
    ]


def _binding_errors(conf) -> list[Error]:
    # Both are part of how every sealed value is opened: a wrong type would fail every read.
    found = []
    store_id = conf.get("ENCRYPTION_STORE_ID", "")
    if not isinstance(store_id, str):
        found.append(
            Error(
                f"CHECKPOINTS_ENCRYPTION_STORE_ID (CHECKPOINTS['ENCRYPTION_STORE_ID']) is "
                f"{store_id!r}, not a string.",
                hint="Pick a label once per store and never change it.",
                id="checkpoints.E008",
            )
        )
    require = conf.get("ENCRYPTION_REQUIRE_BOUND", False)
    if not isinstance(require, bool):
        found.append(
            Error(
                f"CHECKPOINTS_ENCRYPTION_REQUIRE_BOUND (CHECKPOINTS['ENCRYPTION_REQUIRE_BOUND'])"
                f" is {require!r}, not True or False.",
                id="checkpoints.E009",
            )
        )
    return found


def _encryption_errors(keys) -> list[Error]:
    if isinstance(keys, str):
        keys = [k for k in keys.split(",") if k.strip()]
    found = []
    for position, key in enumerate(keys, start=1):
        try:
            parse_key(key, position)
        except CheckpointConfigError as exc:
            found.append(Error(exc.message, id="checkpoints.E006"))
    return found


@register(Tags.compatibility)
def check_checkpoint_settings(app_configs=None, **kwargs):
    return configuration_errors()


@register(Tags.compatibility, deploy=True)
def check_memory_in_production(app_configs=None, **kwargs):
    provider = configured_provider()
    try:
        process_local = provider in providers() and saver_class(provider).process_local
    except CheckpointConfigError:
        return []  # checkpoints.E007 names the path that does not import
    if process_local:
        return [
            Warning(
                f"LLM_PROVIDER_CHECKPOINT is {provider!r}: every checkpoint is lost when the "
                "process ends and other processes cannot see it.",
                hint="Use postgres or redis in production.",
                id="checkpoints.W001",
            )
        ]
    return []


@register(Tags.compatibility)
def check_sqlite_transaction_mode(app_configs=None, **kwargs):
    from django.conf import settings

    return sqlite_mode_warnings(settings.DATABASES)


def sqlite_mode_warnings(databases: dict) -> list[Warning]:
    """A SQLite database set to DEFERRED transactions fails concurrent graph runs."""
    found = []
    for alias, entry in databases.items():
        if not entry.get("ENGINE", "").endswith("sqlite3"):
            continue
        mode = (entry.get("OPTIONS") or {}).get("transaction_mode")
        # Unset, the app makes the store's connections IMMEDIATE itself (checkpoints.apps).
        if mode is None or str(mode).upper() in ("IMMEDIATE", "EXCLUSIVE"):
            continue
        found.append(
            Warning(
                f"DATABASES[{alias!r}]['OPTIONS']['transaction_mode'] is {mode!r}: graph runs "
                "writing at once fail with 'database is locked' when a transaction that read "
                "first tries to write.",
                hint=f"Set DATABASES[{alias!r}]['OPTIONS']['transaction_mode'] = 'IMMEDIATE'.",
                id="checkpoints.W002",
            )
        )
    return found


@register(Tags.compatibility)
def check_sqlite_synchronous(app_configs=None, **kwargs):
    from django.conf import settings

    return sqlite_synchronous_warnings(settings.DATABASES)


def sqlite_synchronous_warnings(databases: dict) -> list[Warning]:
    """A SQLite database whose commits are not synced: a power loss can take the last ones."""
    found = []
    for alias, entry in databases.items():
        if not entry.get("ENGINE", "").endswith("sqlite3"):
            continue
        level = synchronous_level(entry)
        if level not in ("NORMAL", "OFF"):
            continue
        found.append(
            Warning(
                f"DATABASES[{alias!r}] runs SQLite at synchronous={level}: commits are not "
                "synced to disk, so a power loss or an OS crash can take the last ones (the "
                "durability stamp says 'os', not 'disk').",
                hint="Set CHECKPOINTS_SQLITE_SYNCHRONOUS (CHECKPOINTS['SQLITE_SYNCHRONOUS']) to "
                f"FULL, or drop synchronous from DATABASES[{alias!r}]['OPTIONS']['init_command'].",
                id="checkpoints.W003",
            )
        )
    return found


# Set by the `check` command (checkpoints/management/commands/check.py): whether this run may
# connect, and whether it is a --deploy run (the static manifest is then an Error instead).
_run = contextvars.ContextVar("checkpoints_check_run", default=(False, False))


@contextlib.contextmanager
def connecting(*, enabled: bool, deploy: bool):
    token = _run.set((enabled, deploy))
    try:
        yield
    finally:
        _run.reset(token)


@register("connections")
def check_connections(app_configs=None, **kwargs):
    """Each database, the store and the cache answer; only from `manage.py check`."""
    if not _run.get()[0]:
        return []
    return [
        (Error if finding.serious else Warning)(finding.text, id=finding.id)
        for finding in all_findings()
    ]


def static_manifest_missing() -> str | None:
    """The manifest's path when the static storage hashes names from a manifest that
    collectstatic has not written yet; None otherwise."""
    from django.contrib.staticfiles.storage import ManifestFilesMixin
    from django.core.files.storage import storages

    storage = storages["staticfiles"]
    if not isinstance(storage, ManifestFilesMixin):
        return None
    if storage.manifest_storage.exists(storage.manifest_name):
        return None
    return storage.manifest_storage.path(storage.manifest_name)


def static_manifest_message() -> str | None:
    """The one line for a missing static manifest (checks and a server's start say it)."""
    path = static_manifest_missing()
    if path is None:
        return None
    return (
        f"STORAGES['staticfiles'] hashes file names from {path}, which does not exist "
        "(DJANGO_DEBUG=0 before collectstatic): pages link unhashed names and the admin "
        "is unstyled; fix: run `manage.py collectstatic --no-input` (scripts/serve.sh "
        "does), or DJANGO_DEBUG=1 for development."
    )


def _static_manifest_issue(kind, check_id: str):
    message = static_manifest_message()
    return [] if message is None else [kind(message, id=check_id)]


@register(Tags.staticfiles, deploy=True)
def check_static_manifest_deployed(app_configs=None, **kwargs):
    return _static_manifest_issue(Error, "checkpoints.E050")


@register(Tags.staticfiles)
def check_static_manifest(app_configs=None, **kwargs):
    # A warning at every start (runserver prints it); --deploy reports it as E050 instead.
    if _run.get()[1]:
        return []
    return _static_manifest_issue(Warning, "checkpoints.W050")
