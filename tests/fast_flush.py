"""A transactional test's databases emptied with DELETEs, keeping content types and
permissions, instead of Django's flush.

Django's flush after every transactional test TRUNCATEs each table (about 70 ms for
PostgreSQL's ~60 tables) and then sends ``post_migrate``, whose receivers (contenttypes and
auth, the only ones installed) recreate every content type and permission row it has just
removed (about 25 ms on SQLite, 50 ms on PostgreSQL). That was most of the suite's 486 s of
teardown. Here the rows those receivers would write back are kept, every other table is
emptied in one transaction (the keys are deferred, so order does not matter), and a test
that changed the kept rows gets Django's own flush instead, so the next test starts from
the same rows either way.
"""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import DatabaseError, connections, transaction
from django.test import TransactionTestCase

# What post_migrate would write back after a flush, kept as migrate left it.
KEPT = ("django_migrations", "django_content_type", "auth_permission")
_COUNT = "SELECT (SELECT count(*) FROM django_content_type), (SELECT count(*) FROM auth_permission)"

_baseline: dict[str, tuple] = {}
_djangos_teardown = TransactionTestCase._fixture_teardown


def _kept_rows(db_name: str) -> tuple | None:
    """The kept tables' row counts; None for a database without them (an alias a test
    opened on a store of its own, which Django's flush handles as it always has)."""
    try:
        with connections[db_name].cursor() as cursor:
            cursor.execute(_COUNT)
            return tuple(cursor.fetchone())
    except DatabaseError:
        return None


def _empty(db_name: str) -> None:
    connection = connections[db_name]
    tables = connection.introspection.django_table_names(only_existing=True, include_views=False)
    statements = [
        f"DELETE FROM {connection.ops.quote_name(table)}" for table in tables if table not in KEPT
    ]
    with transaction.atomic(using=db_name), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET CONSTRAINTS ALL DEFERRED")
            cursor.execute(";".join(statements))
        else:
            for statement in statements:
                cursor.execute(statement)


def _fixture_teardown(self) -> None:
    if self.available_apps is not None or self.serialized_rollback:
        _djangos_teardown(self)
        return
    for db_name in self._databases_names(include_mirrors=False):
        rows = _kept_rows(db_name)
        if rows is not None and _baseline.get(db_name) == rows:
            _empty(db_name)
        else:
            call_command(
                "flush", verbosity=0, interactive=False, database=db_name, reset_sequences=False
            )
            after = _kept_rows(db_name)
            if after is not None:
                _baseline.setdefault(db_name, after)


@pytest.fixture(scope="session", autouse=True)
def _fast_flush(request, django_db_blocker):
    """Patch the flush in once the test databases exist; the first flush of each database
    is Django's own, and the rows it leaves are the ones kept from then on."""
    request.getfixturevalue("django_db_setup")
    TransactionTestCase._fixture_teardown = _fixture_teardown
    yield
    TransactionTestCase._fixture_teardown = _djangos_teardown
