"""Whether what the settings name answers: each database, the store, the cache, migrations.

One implementation behind `manage.py check` (checkpoints.checks) and ``/health/``
(checkpoints.health): each function returns `Finding`s, one line each, naming the setting,
its value (password masked) and the fix (checkpoints.store.diagnosis). Nothing here runs at
import or in ``AppConfig.ready()``: a service must boot while its database is briefly away.
"""

from __future__ import annotations

import dataclasses
import uuid

from django.conf import settings
from django.db import DatabaseError, connections

from checkpoints.conf import setting
from checkpoints.errors import CheckpointConfigError, CheckpointStoreError
from checkpoints.store.diagnosis import (
    Diagnosis,
    database_setting,
    database_value,
    diagnose_database,
    diagnose_redis,
    mask_url,
    one_line,
)
from checkpoints.store.registry import configured_provider, get_saver


@dataclasses.dataclass(frozen=True)
class Finding:
    """One fact that is wrong: ``serious`` ones stop the service (a check Error, a 503),
    the others degrade it (a Warning)."""

    id: str
    serious: bool
    text: str
    cause: str = "other"


def database_findings(aliases=None, *, close: bool = False) -> list[Finding]:
    """Each database alias (all of DATABASES by default) accepts a connection."""
    found = []
    for alias in settings.DATABASES if aliases is None else aliases:
        connection = connections[alias]
        try:
            connection.ensure_connection()
        except Exception as exc:  # noqa: BLE001 - every driver's failure is read and named
            found.append(_database_failure(alias, exc, "checkpoints.E040"))
        finally:
            if close:
                connection.close()
    return found


def _database_failure(alias: str, exc: BaseException, check_id: str) -> Finding:
    entry = connections.settings[alias] if alias in connections.settings else {}
    diagnosis = diagnose_database(exc, entry)
    line = one_line(database_setting(alias), database_value(entry), diagnosis)
    if diagnosis.needs_migrate:
        return Finding("checkpoints.W041", False, line, diagnosis.cause)
    return Finding(check_id, True, line, diagnosis.cause)


def store_alias_error(alias: str, exc: BaseException) -> str:
    """The one line for a store whose database ``alias`` failed: what the store's own
    refusals (a missing table, a wrong role) say, with the advice that fits the cause."""
    return _database_failure(alias, exc, "checkpoints.E041").text


def store_findings(*, saver=None, close: bool = False) -> list[Finding]:
    """The configured provider matches its database and its tables (or its Redis) answer;
    ``saver`` the configured one when the caller keeps one (a probe builds none per call)."""
    provider = configured_provider()
    try:
        if saver is None:
            saver = get_saver(provider, check_format=False)
    except CheckpointConfigError as exc:
        return [
            Finding(
                "checkpoints.E042",
                True,
                f"LLM_PROVIDER_CHECKPOINT (CHECKPOINTS['PROVIDER']) is {provider!r}: "
                f"{exc.message}.",
                "provider",
            )
        ]
    # The Redis driver loads here, not at import: a SQLite saver's cold start (a plain
    # script) must not pay for it (redis-py 8 loads cryptography).
    from redis.exceptions import RedisError

    alias = saver.db_alias
    try:
        saver.recorded_format()
    except CheckpointStoreError as exc:
        return [Finding("checkpoints.E043", True, exc.message, "format")]
    except DatabaseError as exc:
        return [_database_failure(alias, exc, "checkpoints.E041")]
    except (RedisError, OSError) as exc:
        url = setting("CONN_STRING") or _cache_location() or ""
        diagnosis = diagnose_redis(exc, url)
        name = (
            "LLM_PROVIDER_CHECKPOINT_CONN_STRING (CHECKPOINTS['CONN_STRING'])"
            if setting("CONN_STRING")
            else "REDIS_URL (CACHES['default']['LOCATION'])"
        )
        return [Finding("checkpoints.E044", True, one_line(name, mask_url(url), diagnosis))]
    finally:
        if close and alias is not None:
            connections[alias].close()  # a probe runs on an executor thread of its own
    return []


def migration_findings(aliases=None) -> list[Finding]:
    """Every migration is applied on each reachable database: a Warning, so `migrate`
    itself (which runs the checks first) is never held up by it."""
    from django.db.migrations.executor import MigrationExecutor

    found = []
    for alias in ["default"] if aliases is None else aliases:
        try:
            executor = MigrationExecutor(connections[alias])
            plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
        except DatabaseError:
            continue  # database_findings names why it does not answer
        if plan:
            names = ", ".join(f"{m.app_label}.{m.name}" for m, _ in plan[:3])
            more = f" and {len(plan) - 3} more" if len(plan) > 3 else ""
            found.append(
                Finding(
                    "checkpoints.W041",
                    False,
                    f"{database_setting(alias)} is {database_value(connections.settings[alias])}"
                    f": {len(plan)} migration(s) not applied ({names}{more}); fix: run "
                    f"`manage.py migrate{'' if alias == 'default' else ' --database ' + alias}`.",
                    "tables",
                )
            )
    return found


def _cache_location() -> str | None:
    location = settings.CACHES.get("default", {}).get("LOCATION")
    if isinstance(location, (list, tuple)):
        location = location[0] if location else None
    return location if isinstance(location, str) else None


def cache_setting() -> str:
    """The setting that names the cache: the service fills it from REDIS_URL."""
    location = _cache_location()
    if location is not None and location == getattr(settings, "REDIS_URL", None):
        return "REDIS_URL (CACHES['default']['LOCATION'])"
    return "CACHES['default']['LOCATION']"


def cache_findings() -> list[Finding]:
    """The cache's server answers a write and a read.

    Down, the service degrades (throttles and lockouts count per process, project.cache), so
    it is a Warning; a server that answers but is not what the URL says (another protocol, a
    wrong password or database number) is an Error: waiting will not mend it.
    """
    from django.core.cache import caches

    cache = caches["default"]
    location = _cache_location() or ""
    probe = getattr(cache, "probe", None)
    try:
        if probe is not None:
            probe()  # the server itself, past a fallback that would hide it
        else:
            key = f"checkpoints:probe:{uuid.uuid4().hex}"
            cache.set(key, 1, timeout=5)
            cache.get(key)
            cache.delete(key)
    except Exception as exc:  # noqa: BLE001 - every cache backend's failure is named
        diagnosis = diagnose_redis(exc, location)
        return [cache_finding(diagnosis, location)]
    return []


def cache_finding(diagnosis: Diagnosis, location: str) -> Finding:
    down = diagnosis.cause == "unreachable"
    fix = dataclasses.replace(
        diagnosis,
        problem=diagnosis.problem
        + (" (throttles and sign-in lockouts count per process meanwhile)" if down else ""),
    )
    return Finding(
        "checkpoints.W040" if down else "checkpoints.E045",
        not down,
        one_line(cache_setting(), mask_url(location), fix),
        diagnosis.cause,
    )


def all_findings() -> list[Finding]:
    """Everything above, without repeating one cause: a database that does not answer is
    not also reported as unreadable tables or unknown migrations."""
    databases = database_findings()
    down = {f.text.split(" is ", 1)[0] for f in databases}
    reachable = [a for a in settings.DATABASES if database_setting(a) not in down]
    migrations = migration_findings([a for a in ("default",) if a in reachable])
    store = store_findings()
    if migrations:
        store = [f for f in store if f.cause != "tables"]
    store = [f for f in store if f.text not in {d.text for d in databases}]
    return databases + migrations + store + cache_findings()
