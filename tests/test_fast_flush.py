"""The suite's flush between transactional tests (tests/fast_flush.py) empties every table
but the rows post_migrate would write back, and falls back to Django's flush when a test
changed those."""

import pytest
from django.contrib.auth.models import Permission, User
from django.contrib.contenttypes.models import ContentType
from django.utils import timezone

from checkpoints.models import Thread
from tests import fast_flush


@pytest.mark.django_db(transaction=True)
def test_empty_keeps_content_types_and_permissions_and_removes_the_rest():
    before = (ContentType.objects.count(), Permission.objects.count())
    user = User.objects.create_user("flushed")
    user.user_permissions.add(Permission.objects.first())
    now = timezone.now()
    Thread.objects.create(thread_id="flushed-thread", owner=user, created_at=now, last_write_at=now)

    fast_flush._empty("default")

    assert not User.objects.exists()
    assert not Thread.objects.exists()
    assert (ContentType.objects.count(), Permission.objects.count()) == before


@pytest.mark.django_db(transaction=True)
def test_a_changed_permission_table_is_seen():
    fast_flush._baseline.setdefault("default", fast_flush._kept_rows("default"))
    assert fast_flush._kept_rows("default") == fast_flush._baseline["default"]
    ct = ContentType.objects.get_for_model(Thread)
    Permission.objects.create(codename="made_by_a_test", name="made", content_type=ct)
    # The teardown will see this and run Django's flush, which drops the row.
    assert fast_flush._kept_rows("default") != fast_flush._baseline["default"]


def test_a_database_without_the_kept_tables_gets_djangos_flush(tmp_path, django_db_blocker):
    # A store a test opens at a URL of its own is an alias of its own, without Django's
    # tables; a transactional test over "__all__" databases flushes it too.
    from django.db import connections

    from checkpoints.connect import database_alias

    alias, _ = database_alias(f"sqlite:///{tmp_path / 'bare.sqlite3'}")
    try:
        with django_db_blocker.unblock():
            assert fast_flush._kept_rows(alias) is None
    finally:
        connections[alias].close()
        del connections.settings[alias]
