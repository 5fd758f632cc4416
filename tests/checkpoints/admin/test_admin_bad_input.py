"""List actions posted with ids that are not the model's are refused, never a 500."""

from __future__ import annotations

from datetime import timedelta

import pytest

from checkpoints.models import FinishedMark, Thread
from checkpoints.store.planning import utcnow
from retention.models import Park
from retention.runs import mark_finished
from tests.admin_fixtures import CHANGELISTS, run_chat
from tests.services import need_service

pytestmark = pytest.mark.django_db(transaction=True)

BAD_IDS = ["", "x", "1\x00", "²", "9" * 30]


@pytest.fixture
def admin_client(client, superuser):
    client.force_login(superuser)
    return client


@pytest.mark.parametrize("bad", BAD_IDS)
@pytest.mark.parametrize(
    ("changelist", "action"),
    [
        ("checkpoints/thread", "mark_finished_selected"),
        ("checkpoints/checkpoint", "rollback_selected"),
        ("checkpoints/finishedmark", "unmark_selected"),
        ("retention/park", "delete_selected"),
    ],
)
def test_a_bad_selected_id_is_refused_and_changes_nothing(
    admin_client, saver, changelist, action, bad
):
    thread_id = run_chat(saver)
    mark_finished(saver, thread_id)
    park = Park.objects.create(
        thread_id=thread_id,
        deadline=utcnow() + timedelta(days=1),
        created_at=utcnow(),
        provider="sqlite",
    )
    thread = Thread.objects.get(thread_id=thread_id)
    good = {
        "checkpoints/thread": thread.pk,
        "checkpoints/checkpoint": thread.checkpoints.order_by("pk").first().pk,
        "checkpoints/finishedmark": FinishedMark.objects.get().pk,
        "retention/park": park.pk,
    }[changelist]
    before = (thread.version, thread.checkpoints.count(), FinishedMark.objects.count())
    url = f"/admin/{changelist}/"
    answer = admin_client.post(
        url,
        {"action": action, "_selected_action": [str(good), bad], "post": "yes"},
        follow=True,
    )
    assert answer.status_code == 200
    assert answer.redirect_chain[0][1] == 302
    shown = [str(m) for m in answer.context["messages"]]
    assert any(f"{bad!r} is not the id of a" in m for m in shown), shown
    thread.refresh_from_db()
    assert (thread.version, thread.checkpoints.count(), FinishedMark.objects.count()) == before
    assert Park.objects.filter(pk=park.pk).exists()


@pytest.mark.parametrize("changelist", CHANGELISTS)
def test_a_nul_in_a_list_query_is_refused_and_the_list_shown_without_it(admin_client, changelist):
    url = f"/admin/{changelist}/"
    answer = admin_client.get(url, {"q": "a\x00b", "o": "1"}, follow=True)
    assert answer.status_code == 200
    assert answer.redirect_chain == [(f"{url}?o=1", 302)]
    shown = [str(m) for m in answer.context["messages"]]
    assert any("'q' held a NUL character" in m for m in shown), shown


@pytest.mark.django_db(transaction=True, databases=["default", "pg"])
def test_a_nul_in_the_search_of_a_postgres_store_is_refused(admin_client):
    from django.conf import settings as django_settings

    need_service(django_settings.POSTGRES_UNAVAILABLE)
    url = "/admin/checkpoints/thread/"
    # PostgreSQL refuses a NUL in any text: this search once reached the database (500).
    answer = admin_client.get(url, {"provider": "pg", "q": "\x00"}, follow=True)
    assert answer.status_code == 200
    assert answer.redirect_chain == [(f"{url}?provider=pg", 302)]


def test_every_list_writes_the_action_checkbox_django_would(saver):
    """The checkboxes the mixin writes by hand are Django's own markup, for every list."""
    from django.contrib import admin
    from django.contrib.admin import ModelAdmin

    from checkpoints.admin.base import RefuseBadInputMixin

    run_chat(saver, "boxed", turns=1)
    mark_finished(saver, "boxed", owner="ops")
    Park.objects.create(
        thread_id="boxed", deadline=utcnow() + timedelta(days=1), created_at=utcnow()
    )
    ours = [a for a in admin.site._registry.values() if isinstance(a, RefuseBadInputMixin)]
    assert {type(a).__name__ for a in ours} >= {"ParkAdmin", "FinishedMarkAdmin"}
    checked = 0
    for model_admin in ours:
        obj = model_admin.model._default_manager.first()
        if obj is None:
            continue
        assert model_admin.action_checkbox(obj) == ModelAdmin.action_checkbox(model_admin, obj)
        checked += 1
    assert checked >= 4, checked
