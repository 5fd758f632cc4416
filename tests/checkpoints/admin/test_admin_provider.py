"""The provider filter of the admin's thread list: which ORM checkpoint store a page reads."""

from __future__ import annotations

import re
from html import unescape

import pytest
from django.conf import settings
from django.utils import timezone

from checkpoints.models import Checkpoint, FinishedMark, Thread
from tests.services import need_service
from tests.store_helpers import put_chain

pytestmark = pytest.mark.django_db(
    transaction=True,
    databases=["default", "pg"] if "pg" in settings.DATABASES else ["default"],
)

THREADS = "/admin/checkpoints/thread/"
CHECKPOINTS = "/admin/checkpoints/checkpoint/"


def saver_on(alias: str):
    from checkpoints.store.orm.ledger import forget_format_checks
    from checkpoints.store.registry import get_saver

    # The flush between tests empties the format record too: let the saver write it again.
    forget_format_checks()
    return get_saver("postgres" if alias == "pg" else "sqlite", using=alias)


@pytest.fixture
def admin_client(client, superuser):
    client.force_login(superuser)
    return client


@pytest.fixture
def two_stores():
    """A thread in PostgreSQL and one in SQLite that share a primary key."""
    need_service(settings.POSTGRES_UNAVAILABLE)
    put_chain(saver_on("pg"), "pg-thread", {"where": "in-postgres"}, steps=2)
    pg_pk = Thread.objects.using("pg").get(thread_id="pg-thread").pk
    # Same pk on both sides, so a page reading the wrong database would show the other one.
    now = timezone.now()
    Thread.objects.using("default").create(
        pk=pg_pk, thread_id="sqlite-thread", created_at=now, last_write_at=now
    )
    put_chain(saver_on("default"), "sqlite-thread", {"where": "in-sqlite"}, steps=2)
    return pg_pk


def checkpoint_ids(alias: str, thread_id: str) -> list[str]:
    return list(
        Checkpoint.objects.using(alias)
        .filter(thread__thread_id=thread_id)
        .values_list("checkpoint_id", flat=True)
    )


def href_before(page: str, text: str) -> str:
    """The href of the link whose text is ``text``."""
    found = re.search(r'href="([^"]+)"[^>]*>' + re.escape(text) + "<", page)
    assert found, f"no link to {text!r}"
    return unescape(found.group(1))


def test_unfiltered_list_reads_the_deployment_store(admin_client, two_stores):
    page = admin_client.get(THREADS).content.decode()
    assert ">sqlite-thread<" in page and ">pg-thread<" not in page


def test_provider_pg_lists_only_the_postgres_threads(admin_client, two_stores):
    response = admin_client.get(THREADS, {"provider": "pg"})
    assert response.status_code == 200
    page = response.content.decode()
    assert ">pg-thread<" in page and ">sqlite-thread<" not in page
    spec = next(s for s in response.context["cl"].filter_specs if s.title == "provider")
    choices = {c["display"]: c for c in spec.choices(response.context["cl"])}
    assert {"postgres (pg)", "sqlite (default)"} <= set(choices)
    assert choices["postgres (pg)"]["selected"] and not choices["sqlite (default)"]["selected"]
    assert "All" not in choices


def test_default_choice_is_the_deployment_store(admin_client, two_stores):
    response = admin_client.get(THREADS)
    spec = next(s for s in response.context["cl"].filter_specs if s.title == "provider")
    selected = [c["display"] for c in spec.choices(response.context["cl"]) if c["selected"]]
    assert selected == ["sqlite (default)"]


def test_thread_page_from_the_pg_list_reads_pg(admin_client, two_stores):
    listing = admin_client.get(THREADS, {"provider": "pg"}).content.decode()
    thread_url = href_before(listing, "pg-thread")
    assert "provider" in thread_url
    page = admin_client.get(thread_url).content.decode()
    assert "pg-thread" in page and "sqlite-thread" not in page
    for cid in checkpoint_ids("pg", "pg-thread"):
        assert cid in page
    for cid in checkpoint_ids("default", "sqlite-thread"):
        assert cid not in page
    # The unfiltered link with the same pk is the SQLite thread: the choice made the difference.
    plain = admin_client.get(f"{THREADS}{two_stores}/change/").content.decode()
    assert "sqlite-thread" in plain and "pg-thread" not in plain


def test_checkpoint_pages_from_a_pg_thread_stay_on_pg(admin_client, two_stores):
    listing = admin_client.get(THREADS, {"provider": "pg"}).content.decode()
    thread_page = admin_client.get(href_before(listing, "pg-thread")).content.decode()
    head = max(checkpoint_ids("pg", "pg-thread"))
    checkpoint_page = admin_client.get(href_before(thread_page, head)).content.decode()
    assert "in-postgres" in checkpoint_page and "in-sqlite" not in checkpoint_page
    assert "pg-thread" in checkpoint_page
    history = admin_client.get(href_before(thread_page, "Checkpoints of this thread"))
    assert history.status_code == 200
    listed = history.content.decode()
    assert all(cid in listed for cid in checkpoint_ids("pg", "pg-thread"))
    assert not any(cid in listed for cid in checkpoint_ids("default", "sqlite-thread"))
    changes = admin_client.get(href_before(checkpoint_page, "What changed"))
    assert changes.status_code == 200
    assert ">pg-thread<" in changes.content.decode()
    assert "sqlite-thread" not in changes.content.decode()


def test_rollback_from_a_pg_checkpoint_writes_to_pg(admin_client, two_stores):
    listing = admin_client.get(THREADS, {"provider": "pg"}).content.decode()
    thread_page = admin_client.get(href_before(listing, "pg-thread")).content.decode()
    first = min(checkpoint_ids("pg", "pg-thread"))
    checkpoint_page = admin_client.get(href_before(thread_page, first)).content.decode()
    confirm_url = href_before(checkpoint_page, "Roll back to here")
    confirm = admin_client.get(confirm_url).content.decode()
    assert "Roll back thread pg-thread?" in confirm
    action = unescape(re.search(r'<form method="post" action="([^"]+)"', confirm).group(1))
    sqlite_before = sorted(checkpoint_ids("default", "sqlite-thread"))
    shown = re.search(r'name="expected_head" value="([^"]+)"', confirm).group(1)
    response = admin_client.post(action, {"post": "yes", "expected_head": shown})
    assert response.status_code == 302
    assert len(checkpoint_ids("pg", "pg-thread")) == 3
    assert sorted(checkpoint_ids("default", "sqlite-thread")) == sqlite_before
    landed = admin_client.get(response["Location"]).content.decode()
    assert "pg-thread" in landed and "sqlite-thread" not in landed


def test_mark_action_on_the_pg_list_marks_in_pg(admin_client, two_stores):
    response = admin_client.post(
        f"{THREADS}?provider=pg",
        {"action": "mark_finished_selected", "_selected_action": [str(two_stores)]},
    )
    assert response.status_code == 302
    assert FinishedMark.objects.using("pg").filter(thread_id="pg-thread").exists()
    assert not FinishedMark.objects.using("default").exists()


def test_unknown_provider_answers_cleanly(admin_client):
    put_chain(saver_on("default"), "only-thread", {"where": "in-sqlite"})
    response = admin_client.get(THREADS, {"provider": "nope", "q": "only"})
    assert response.status_code == 302 and response["Location"] == f"{THREADS}?q=only"
    page = admin_client.get(response["Location"]).content.decode()
    # Said plainly, not a silent fall back to the default store.
    assert "There is no checkpoint store &#x27;nope&#x27; in this admin" in page
    assert ">only-thread<" in page
    pk = Thread.objects.get(thread_id="only-thread").pk
    detail = admin_client.get(f"{THREADS}{pk}/change/", {"_changelist_filters": "provider=nope"})
    assert detail.status_code == 404


def test_naming_the_deployment_store_is_the_same_as_no_choice(admin_client):
    put_chain(saver_on("default"), "only-thread", {"where": "in-sqlite"})
    page = admin_client.get(THREADS, {"provider": "default"}).content.decode()
    assert ">only-thread<" in page and "sqlite (default)" in page


def test_park_filter_on_the_pg_list_reads_the_parks_where_they_live(admin_client, two_stores):
    """Parks are rows of the default database; the pg list filters by them all the same."""
    from datetime import timedelta

    from retention.models import Park

    put_chain(saver_on("pg"), "pg-parked", {"where": "in-postgres"}, steps=1)
    now = timezone.now()
    Park.objects.create(thread_id="pg-parked", deadline=now + timedelta(hours=1), created_at=now)
    Park.objects.create(thread_id="pg-thread", deadline=now - timedelta(hours=1), created_at=now)
    parked = admin_client.get(THREADS, {"provider": "pg", "park": "yes"}).content.decode()
    assert ">pg-parked<" in parked and ">pg-thread<" not in parked
    unparked = admin_client.get(THREADS, {"provider": "pg", "park": "no"}).content.decode()
    assert ">pg-thread<" in unparked and ">pg-parked<" not in unparked
