"""The storage page (issue 54 item 6): the compaction the command runs, in the console
behind a confirmation, its report shown; the sweep's permission needed."""

from __future__ import annotations

import pytest

from tests.admin_fixtures import run_chat, staff_user

pytestmark = pytest.mark.django_db(transaction=True)
STORAGE = "/admin/retention/sweeprun/storage/"


def test_compaction_asks_first_then_reports(admin_client, saver):
    run_chat(saver, "some", turns=2)
    runs = admin_client.get("/admin/retention/sweeprun/").content.decode()
    assert f'href="{STORAGE}"' in runs
    ask = admin_client.get(STORAGE).content.decode()
    assert 'id="compaction-confirm"' in ask and 'id="compaction-report"' not in ask
    # A POST without the confirmation is the question again.
    assert 'id="compaction-report"' not in admin_client.post(STORAGE, {}).content.decode()
    done = admin_client.post(STORAGE, {"post": "yes"}).content.decode()
    report = done[done.index('id="compaction-report"') :]
    assert "Compacted " in report and "bytes (auto_vacuum " in report
    assert "-&gt; incremental)" in report


def test_compaction_needs_the_sweep_permission(client, saver):
    client.force_login(staff_user("viewer", "checkpoints.view_thread"))
    answer = client.post(STORAGE, {"post": "yes"})
    assert (
        answer.status_code == 403 and "<code>retention.run_sweep</code>" in answer.content.decode()
    )
