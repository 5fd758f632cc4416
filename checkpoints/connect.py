"""``from_conn_string``: a saver from one URL, in a plain script or inside a Django project.

Shaped like LangGraph's ``PostgresSaver.from_conn_string``::

    with from_conn_string("sqlite:///checkpoints.sqlite3") as saver:
        graph = builder.compile(checkpointer=saver)

Where Django is not configured (a plain LangGraph script), the first call configures a
minimal standalone Django for the store (its apps and the URL's database) and creates the
store's tables: on an empty database straight from the models (`_create_new_store`), else
by its migrations. Inside a configured Django project the URL's database is the project's own
when it names one of its DATABASES (its tables come from ``manage.py migrate``), else it is
added as a database of its own and its tables are created on first use.

Django is imported only when a saver is asked for, so ``import checkpoints`` stays light;
a store service URL (``checkpoints+https://``) is recognised before, and never loads it.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import pkgutil
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from checkpoints.dburl import DATABASE_SCHEMES, SCHEMES, parse_database_url
from checkpoints.errors import CheckpointConfigError, CheckpointStoreFormatError
from checkpoints.remote.client import RemoteSaver, is_remote_url

# The apps a standalone process needs: the store, retention (finish marks, parks, the
# sweep) and what their models point at: the thread owner and the audit trail's user are
# auth's user (the store's first migration depends on auth's), and auth needs contenttypes.
# No admin, no API, no DRF: a script's saver never serves a page.
STANDALONE_APPS = [
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "checkpoints.apps.CheckpointsConfig",
    "retention.apps.RetentionConfig",
]
# The apps whose tables make the store: an open checks that their migrations are applied.
STORE_APPS = ("checkpoints", "retention")

_lock = threading.RLock()
_standalone = False  # True once this module configured Django itself
_ready_aliases: set[str] = set()


def provider_for(conn_string: str) -> str:
    """The store provider a connection string names; refuses what the store cannot open."""
    if not isinstance(conn_string, str) or "://" not in conn_string:
        raise CheckpointConfigError(
            f"connection string {conn_string!r} has no scheme; use memory://, "
            "sqlite:///path, postgresql://... or redis://...",
            field="conn_string",
        )
    scheme = conn_string.split("://", 1)[0].lower()
    provider = SCHEMES.get(scheme)
    if provider is None:
        raise CheckpointConfigError(
            f"connection string scheme {scheme!r} is not one the store opens; use memory://, "
            "sqlite:///path, postgresql://... or redis://...",
            field="conn_string",
        )
    if provider == "sqlite" and _sqlite_path(conn_string) in ("", ":memory:"):
        raise CheckpointConfigError(
            f"{conn_string!r} names no SQLite file; an in-memory SQLite database is not shared "
            "between the threads a graph runs on. Use memory:// for a store that lives with "
            "the process, or sqlite:///path/to/file.sqlite3",
            field="conn_string",
        )
    return provider


def _sqlite_path(conn_string: str) -> str:
    return parse_database_url(conn_string)["NAME"]


def _database_entry(conn_string: str) -> dict[str, Any]:
    entry = parse_database_url(conn_string)
    if entry["ENGINE"].endswith("sqlite3"):
        # Imported here as Django is (the module's docstring): the store loads Django's db.
        from checkpoints.store.sqlite.connection import SQLITE_OPTIONS

        entry["NAME"] = os.path.abspath(entry["NAME"])
        entry["OPTIONS"] = {**SQLITE_OPTIONS, **(entry.get("OPTIONS") or {})}
    return entry


def _configure_standalone(provider: str, conn_string: str) -> None:
    """Configure Django for this process: the store's apps, the URL's database as default."""
    global _standalone
    import django
    from django.conf import settings

    databases = {}
    if is_database_url(conn_string):
        databases["default"] = _database_entry(conn_string)
    settings.configure(
        INSTALLED_APPS=STANDALONE_APPS,
        DATABASES=databases,
        USE_TZ=True,
        TIME_ZONE="UTC",
        DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
        CHECKPOINTS={"PROVIDER": provider},
        # The script's logging stays the script's: Django's default configuration (a
        # console handler shown only with DEBUG, mail to ADMINS) does nothing here anyway.
        LOGGING_CONFIG=None,
    )
    # No URLs to reverse in a script, so no script prefix to set.
    django.setup(set_prefix=False)
    _standalone = True


def _same_database(entry: dict[str, Any], other: dict[str, Any]) -> bool:
    if entry["ENGINE"] != other.get("ENGINE"):
        return False
    if entry["ENGINE"].endswith("sqlite3"):
        return os.path.abspath(str(other.get("NAME") or "")) == entry["NAME"]
    return all(
        str(entry.get(key) or "") == str(other.get(key) or "")
        for key in ("NAME", "HOST", "PORT", "USER")
    )


def database_alias(conn_string: str) -> tuple[str, bool]:
    """(alias, added): the configured database the URL names, else one added for it.

    The one rule from a URL to a database alias: `from_conn_string` and a saver built with
    ``conn_string`` (`alias_for_conn_string`) both ask it, under one
    lock, so the first to register a URL's database registers it as both would.
    """
    from django.db import connections

    entry = _database_entry(conn_string)
    with _lock:
        for alias in connections.settings:
            if _same_database(entry, connections.settings[alias]):
                return alias, False
        alias = "checkpoints_" + hashlib.sha1(conn_string.encode()).hexdigest()[:12]
        if alias not in connections.settings:
            default = connections.settings.get("default")
            merged = connections.configure_settings(
                {"default": dict(default) if default else {}, alias: entry}
            )
            connections.settings[alias] = merged[alias]
        return alias, True


def alias_for_conn_string(conn_string: str) -> str:
    """The Django database alias for a saver's ``conn_string`` setting (`database_alias`)."""
    try:
        return database_alias(conn_string)[0]
    except ValueError as exc:
        raise CheckpointConfigError(
            f"LLM_PROVIDER_CHECKPOINT_CONN_STRING: {exc}", field="conn_string"
        ) from exc


def is_database_url(conn_string: str) -> bool:
    """Whether ``conn_string`` names a database (the ORM saver's), not Redis or memory."""
    return conn_string.split("://", 1)[0].split("+", 1)[0].lower() in DATABASE_SCHEMES


def _shipped_migrations(app_label: str) -> set[str] | None:
    """The names of the migrations an app ships, listed as Django's loader finds them but
    without importing them; None where they cannot be listed so (the planner decides)."""
    from django.db.migrations.loader import MigrationLoader

    module_name, _ = MigrationLoader.migrations_module(app_label)
    try:
        module = importlib.import_module(module_name) if module_name else None
    except ImportError:
        return None
    if module is None or not hasattr(module, "__path__"):
        return None
    return {
        name
        for _, name, is_pkg in pkgutil.iter_modules(module.__path__)
        if not is_pkg and name[0] not in "_~"
    }


def _store_is_current(alias: str) -> bool:
    """Whether the store's recorded migrations are exactly the ones this code ships.

    The fast path of every open: two small queries, no migration module imported and no
    plan made. Anything else (tables missing, a migration to run, one this code does not
    know, a squashed history) is left to the planner.
    """
    from django.db import connections
    from django.db.migrations.recorder import MigrationRecorder

    recorder = MigrationRecorder(connections[alias])
    if not recorder.has_table():
        return False
    recorded = set(recorder.migration_qs.filter(app__in=STORE_APPS).values_list("app", "name"))
    for app_label in STORE_APPS:
        shipped = _shipped_migrations(app_label)
        if shipped is None or {name for app, name in recorded if app == app_label} != shipped:
            return False
    return True


def _store_migrations_pending(alias: str, *, refuse_newer: bool = True) -> bool:
    """Whether the store's tables need a migration; ``refuse_newer`` refuses a store
    migrated past this code (a database this module owns: a project's own may be mid-way
    through a rolling deploy, where the older code keeps working as Django lets it)."""
    from django.db import connections
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connections[alias])
    loader = executor.loader
    replaced = {key for squash in loader.replacements.values() for key in squash.replaces}
    unknown = sorted(
        key
        for key in loader.applied_migrations
        if key[0] in STORE_APPS and key not in loader.disk_migrations and key not in replaced
    )
    if unknown and refuse_newer:
        names = ", ".join(f"{app}.{name}" for app, name in unknown)
        raise CheckpointStoreFormatError(
            f"the checkpoint store on database {alias!r} was migrated by a newer version of "
            f"the checkpoint store: it has migration {names}, which this version does not "
            "know. Open it with that version or a later one",
            field="conn_string",
        )
    targets = [
        node
        for node in loader.graph.leaf_nodes()
        if node[0] in STORE_APPS and node[0] in loader.migrated_apps
    ]
    return bool(executor.migration_plan(targets))


def _ensure_tables(alias: str, may_create: bool) -> None:
    """Create the store's tables on a database this module owns; else refuse, naming how."""
    if alias in _ready_aliases:
        return
    if _store_is_current(alias) or (may_create and _create_new_store(alias)):
        _ready_aliases.add(alias)
        return
    # Looked at again: another process may have just made the store this one found empty.
    if not _store_is_current(alias) and _store_migrations_pending(alias, refuse_newer=may_create):
        if not may_create:
            raise CheckpointConfigError(
                f"the checkpoint store's tables are missing or out of date on database "
                f"{alias!r}; run `python manage.py migrate --database {alias}` in your project",
                field="conn_string",
            )
        _migrate(alias)
    _ready_aliases.add(alias)


# Created straight from the models on an empty database (`_create_new_store`): a
# standalone process's apps, in migration dependency order, each with its migrations.
NEW_STORE_APPS = ("contenttypes", "auth", "checkpoints", "retention")


class _NotEmpty(Exception):
    """The database has tables: not a new store; the migrations decide."""


def _create_new_store(alias: str) -> bool:
    """Make a new store's schema on an empty database as ``migrate`` would, without it.

    ``migrate`` renders the project state between every one of its ~27 migrations (auth,
    contenttypes, ours): 200-300 ms on a new SQLite file. On a database with no tables at
    all, the end state is known: every model's table as ``schema_editor.create_model``
    makes it, plus the dialect's extra statements (its saver's ``new_store_extra_sql``), and
    every shipped migration recorded as applied (what ``migrate --fake`` records). All of it
    in one transaction, under the dialect's lock (``lock_new_store``), so a second process
    making the same store waits, then finds tables and leaves it to the check.

    Only for the standalone configuration (its apps are known); False, nothing done,
    wherever the database has a table or anything is not as expected: the caller goes on
    to the migrations. ``post_migrate`` is not sent: its receivers (contenttypes rows,
    auth permissions) add rows the store makes when it needs them
    (``ContentType.objects.get_for_model``), and a project's next ``migrate`` adds them.
    """
    from django.apps import apps
    from django.conf import settings
    from django.db import DatabaseError, connections
    from django.db.migrations.loader import MigrationLoader
    from django.db.migrations.recorder import MigrationRecorder
    from django.utils import timezone

    # As `_open`'s: the registry once Django is configured (the module's docstring).
    from checkpoints.store.registry import dialect_saver

    connection = connections[alias]
    if (
        not _standalone
        or list(settings.INSTALLED_APPS) != STANDALONE_APPS
        or getattr(settings, "MIGRATION_MODULES", None)
        or settings.AUTH_USER_MODEL != "auth.User"
        or getattr(settings, "DATABASE_ROUTERS", None)
    ):
        return False
    try:
        dialect = dialect_saver(alias)
    except CheckpointConfigError:
        return False
    shipped = {label: _shipped_migrations(label) for label in NEW_STORE_APPS}
    if not all(shipped.values()):
        return False
    extra = []
    for app_label, name, attribute in dialect.new_store_extra_sql:
        if name not in shipped[app_label]:
            return False
        module_name, _ = MigrationLoader.migrations_module(app_label)
        extra.append(getattr(importlib.import_module(f"{module_name}.{name}"), attribute))
    models = [
        model
        for label in NEW_STORE_APPS
        for model in apps.get_app_config(label).get_models()
        if model._meta.managed and not model._meta.proxy and not model._meta.swapped
    ]
    try:
        # The schema editor's own transaction: on SQLite it must turn foreign key checks
        # off before the transaction begins, as migrate does.
        with connection.schema_editor(atomic=True) as editor:
            dialect.lock_new_store(editor)
            with connection.cursor() as cursor:
                if connection.introspection.table_names(cursor, include_views=True):
                    raise _NotEmpty
            with dialect.schema_batch(editor) as batch:
                for model in [*models, MigrationRecorder.Migration]:
                    editor.create_model(model)
                batch.send()  # alter_field reads the catalog: the tables first
                for model in models:
                    for field in model._meta.local_many_to_many:
                        _as_migrated_through_key(editor, field.remote_field.through)
                # After the foreign keys, which the editor defers to its end (0009 re-makes
                # them).
                editor.deferred_sql.extend(extra)
            now = timezone.now()
            MigrationRecorder.Migration.objects.using(alias).bulk_create(
                MigrationRecorder.Migration(app=label, name=name, applied=now)
                for label in NEW_STORE_APPS
                for name in sorted(shipped[label])
            )
    except _NotEmpty:
        return False
    except DatabaseError:
        # Another process (one not taking the lock: an older version, `manage.py migrate`)
        # made tables at the same moment: the migrations go on from where it is.
        connection.close()
        return False
    return True


def _as_migrated_through_key(editor, through) -> None:
    """An auto-created many-to-many table's key as ``migrate`` makes it.

    The migrations' models are rendered without their apps' ``default_auto_field``, so an
    auto-created through table's key is ``DEFAULT_AUTO_FIELD``'s (bigint here), where the
    app's own model (auth: ``AutoField``) has an integer one: alter it to match.
    """
    from django.conf import settings
    from django.utils.module_loading import import_string

    if not through._meta.auto_created:
        return
    old = through._meta.pk
    new = import_string(settings.DEFAULT_AUTO_FIELD)(
        verbose_name="ID", primary_key=True, auto_created=True, serialize=False
    )
    new.set_attributes_from_name(old.name)
    new.model = through
    if old.db_type(editor.connection) != new.db_type(editor.connection):
        editor.alter_field(through, old, new)


def _migrate(alias: str, attempts: int = 5) -> None:
    """``migrate`` on ``alias``; another process migrating the same new database at once
    makes ours fail on a table it just made, so look again and go on from where it is."""
    from django.core.management import call_command
    from django.db import DatabaseError, connections

    for attempt in range(attempts):
        try:
            call_command("migrate", database=alias, verbosity=0, interactive=False)
            return
        except DatabaseError:
            connections[alias].close()
            if attempt == attempts - 1:
                raise
            time.sleep(0.5 * (attempt + 1))
            if not _store_migrations_pending(alias):
                return


def _open(conn_string: str, options: dict[str, Any]):
    """The saver for ``conn_string`` and the database alias it uses (None for Redis/memory)."""
    provider = provider_for(conn_string)
    from django.conf import settings

    with _lock:
        if not settings.configured:
            _configure_standalone(provider, conn_string)
        # Imported once Django is configured: the registry reads its settings.
        from checkpoints.store.registry import get_saver

        if not is_database_url(conn_string):
            # The URL is the store's own address (Redis); memory:// names none.
            return get_saver(provider, conn_string=conn_string, **options), None
        alias, added = database_alias(conn_string)
        # Tables are created only where nobody else manages them: a database this module
        # configured (standalone) or added; a project's own database is migrated by it.
        _ensure_tables(alias, may_create=_standalone or added)
    return get_saver(provider, using=alias, **options), alias


def _close(saver, alias: str | None) -> None:
    client = getattr(saver, "client", None) if getattr(saver, "conn_string", None) else None
    if client is not None:
        client.close()  # a Redis client made for this URL alone
    if alias is not None and (_standalone or alias.startswith("checkpoints_")):
        from django.db import connections

        connections[alias].close()


@contextmanager
def from_conn_string(conn_string: str, **options: Any) -> Iterator[Any]:
    """A saver for ``memory://``, ``sqlite:///path``, ``postgresql://...`` or ``redis://...``.

    ``options`` go to the saver (``max_checkpoints``, ``serde``). Works with or without a
    configured Django; see the module's docstring.

    ``checkpoints+https://host[/prefix]`` (``+http`` for local use) opens the remote saver
    on the store service there (``api_key=TOKEN``, ``timeout``, ``retry_seconds``): no
    Django, no database connection in this process.
    """
    if is_remote_url(conn_string):
        with RemoteSaver(conn_string, **options) as saver:
            yield saver
        return
    # Imported at first use, as Django is (the module's docstring).
    from checkpoints.store.orm.aio import off_loop, on_loop_thread

    # In a notebook cell (a running loop on this thread) the set-up touches the database
    # on the thread the saver's sync calls then use (aio.off_loop), and so does the close.
    via = off_loop if on_loop_thread() else (lambda func, *args: func(*args))
    saver, alias = via(_open, conn_string, options)
    try:
        yield saver
    finally:
        via(_close, saver, alias)


@asynccontextmanager
async def afrom_conn_string(conn_string: str, **options: Any) -> AsyncIterator[Any]:
    """``from_conn_string`` for async code: the set-up runs off the event loop."""
    if is_remote_url(conn_string):
        async with RemoteSaver(conn_string, **options) as saver:
            yield saver
        return
    from asgiref.sync import sync_to_async

    saver, alias = await sync_to_async(_open, thread_sensitive=True)(conn_string, options)
    try:
        yield saver
    finally:
        await sync_to_async(_close, thread_sensitive=True)(saver, alias)
