"""A refused action inside the admin (issue 54 item 6): the 403 is an admin page naming the
permission the user lacks, nothing changes, and the attempt is audited like an accepted one
(same action, ``refused`` in its detail)."""

from __future__ import annotations

import pytest

from checkpoints.models import AuditEvent, Checkpoint, FinishedMark, Thread
from retention.models import Hold, SweepRun
from tests.admin_fixtures import run_chat, staff_user

pytestmark = pytest.mark.django_db(transaction=True)
THREADS = "/admin/checkpoints/thread/"
CHECKPOINTS = "/admin/checkpoints/checkpoint/"


@pytest.mark.parametrize(
    ("action", "url", "data", "needs"),
    [
        ("rollback", "{cp}/rollback/", {"post": "yes"}, "checkpoints.change_checkpoint"),
        ("fork", "{cp}/fork/", {"post": "yes"}, "checkpoints.add_checkpoint"),
        ("hold", "{th}/hold/", {"reason": "x"}, "retention.add_hold"),
        ("mark_finished", "{th}/mark/", {}, "checkpoints.change_thread"),
        ("sweep", "sweep", {"post": "yes"}, "retention.run_sweep"),
    ],
)
def test_a_refused_action_is_an_admin_page_naming_the_permission_and_is_audited(
    client, saver, action, url, data, needs
):
    run_chat(saver, "theirs", turns=1)
    thread = Thread.objects.get(thread_id="theirs")
    checkpoint = Checkpoint.objects.filter(thread=thread).order_by("checkpoint_id").first()
    viewer = staff_user("viewer", "checkpoints.view_thread", "checkpoints.view_checkpoint")
    client.force_login(viewer)
    target = {
        "{cp}": f"{CHECKPOINTS}{checkpoint.pk}",
        "{th}": f"{THREADS}{thread.pk}",
        "sweep": "/admin/retention/sweeprun/sweep/",
    }
    for mark, path in target.items():
        url = url.replace(mark, path)
    before = (Checkpoint.objects.count(), Thread.objects.count(), thread.version)
    answer = client.post(url, data)
    assert answer.status_code == 403
    page = answer.content.decode()
    # Inside the admin's chrome (its header and breadcrumbs), the permission named.
    assert 'id="site-name"' in page and 'class="breadcrumbs"' in page
    assert f"<code>{needs}</code>" in page and 'id="refused"' in page
    thread.refresh_from_db()
    assert (Checkpoint.objects.count(), Thread.objects.count(), thread.version) == before
    assert not Hold.objects.exists() and not FinishedMark.objects.exists()
    assert not SweepRun.objects.exists()
    [event] = AuditEvent.objects.all()
    assert (event.action, event.origin, event.actor) == (action, "admin", "viewer")
    assert event.detail == {"refused": "missing permission", "needs": [needs]}
    assert event.thread_id == ("" if action == "sweep" else "theirs")
