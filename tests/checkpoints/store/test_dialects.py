"""The ORM saver's dialect seam, its typed storage requests, and the Django internals it uses."""

from __future__ import annotations

import ast
import threading
from pathlib import Path

import pytest
from django.db import connections

from checkpoints.errors import CheckpointConfigError
from checkpoints.models import Thread
from checkpoints.store.orm.internals import raw_delete
from checkpoints.store.orm.saver import OrmSaver
from checkpoints.store.planning import utcnow
from checkpoints.store.postgres.saver import PostgresStore
from checkpoints.store.registry import dialect_saver, get_saver, orm_saver
from checkpoints.store.requests import CountThread, StoreRequest
from checkpoints.store.sqlite.connection import warm_connection
from checkpoints.store.sqlite.saver import SqliteStore

STORE = Path(__file__).resolve().parents[3] / "checkpoints" / "store"


def test_orm_saver_builds_the_class_of_its_databases_dialect(db):
    assert dialect_saver("default") is SqliteStore
    assert type(orm_saver(using="default")) is SqliteStore


@pytest.mark.django_db(databases=["default", "pg"])
def test_the_postgres_alias_gets_the_postgres_store():
    assert dialect_saver("pg") is PostgresStore
    saver = orm_saver(using="pg")
    assert type(saver) is PostgresStore
    assert saver.provider == "postgres" and saver.can_park
    assert type(get_saver("postgres", using="pg")) is PostgresStore


def test_a_dialect_class_refuses_a_database_of_another_dialect(db):
    with pytest.raises(CheckpointConfigError, match="PostgresStore runs on postgresql"):
        PostgresStore(using="default")


def test_the_registry_refuses_a_provider_its_database_does_not_speak(db):
    with pytest.raises(CheckpointConfigError, match="provider 'postgres' was asked for"):
        get_saver("postgres", using="default")


def test_an_unknown_alias_is_named(db):
    with pytest.raises(CheckpointConfigError, match="'nowhere' is not configured"):
        orm_saver(using="nowhere")


def test_an_unknown_storage_request_is_refused_by_name(db):
    saver = orm_saver(using="default")
    with pytest.raises(TypeError, match="no storage primitive for 'bogus'"):
        saver.perform("bogus")
    assert saver.perform(CountThread("nobody")).empty


def _sources():
    return [p for p in STORE.rglob("*.py") if "migrations" not in p.parts]


def test_no_storage_primitive_is_reached_by_a_computed_name():
    found = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "getattr"
                and len(node.args) >= 2
                and isinstance(node.args[0], ast.Name)
                and node.args[0].id == "self"
                and isinstance(node.args[1], ast.JoinedStr)
            ):
                found.append(f"{path.relative_to(STORE)}:{node.lineno}")
    assert found == []


def test_the_orm_saver_asks_its_class_not_its_provider():
    found = []
    for path in [p for d in ("orm", "postgres", "sqlite") for p in (STORE / d).glob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare) and any(
                isinstance(side, ast.Attribute)
                and side.attr == "provider"
                and isinstance(side.value, ast.Name)
                and side.value.id == "self"
                for side in (node.left, *node.comparators)
            ):
                found.append(f"{path.name}:{node.lineno}")
    assert found == []


def test_every_storage_request_has_a_primitive_on_every_saver():
    requests = StoreRequest.__args__
    contract = (STORE / "contract.py").read_text()
    redis = (STORE / "redis" / "saver.py").read_text()
    for request in requests:
        assert f"case {request.__name__}(" in contract, request
        assert f"case {request.__name__}(" in redis, request


# -- Django internals the store relies on: each fails here first if an upgrade moves it ----
def test_raw_delete_deletes_with_one_statement(db, django_assert_num_queries):
    now = utcnow()
    for name in ("gone-1", "gone-2"):
        Thread.objects.create(thread_id=name, created_at=now, last_write_at=now)
    with django_assert_num_queries(1):
        raw_delete(Thread.objects.filter(thread_id__startswith="gone-"))
    assert not Thread.objects.filter(thread_id__startswith="gone-").exists()


@pytest.mark.django_db(transaction=True)
def test_a_thread_without_a_connection_borrows_an_open_one():
    # sqlite.connection patches Django's thread-local slot (connections._connections) and
    # a connection's owning thread (_thread_ident): both must still exist and work.
    assert hasattr(connections, "_connections")
    seen = []

    def worker():
        with warm_connection("default"):
            wrapper = connections["default"]
            was_open = wrapper.connection is not None
            with wrapper.cursor() as cur:
                cur.execute("SELECT 1")
                seen.append((was_open, wrapper._thread_ident, cur.fetchone()[0], id(wrapper)))

    for _ in range(2):
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
        assert seen[-1][1] == thread.ident
    # The second thread was lent the connection the first one opened and gave back.
    assert [one for _, _, one, _ in seen] == [1, 1]
    assert seen[1][0] is True and seen[0][3] == seen[1][3]


def test_a_subclass_of_a_dialects_saver_keeps_its_methods(db):
    class Audited(SqliteStore):
        def label(self) -> str:
            return f"audited {self.provider}"

    saver = Audited(using="default")
    assert isinstance(saver, Audited) and isinstance(saver, SqliteStore)
    assert saver.label() == "audited sqlite" and saver.using == "default"


@pytest.mark.django_db(databases=["default", "pg"])
def test_a_subclass_of_orm_saver_itself_is_refused_naming_the_class_to_subclass():
    class Audited(OrmSaver):
        pass

    expected = {
        "default": "subclass checkpoints.store.sqlite.saver.SqliteStore",
        "pg": "subclass checkpoints.store.postgres.saver.PostgresStore",
    }
    for using, named in expected.items():
        with pytest.raises(CheckpointConfigError, match=f"Audited subclasses OrmSaver.*{named}"):
            Audited(using=using)
        with pytest.raises(CheckpointConfigError, match=named):
            Audited.build(provider=dialect_saver(using).provider, using=using)
