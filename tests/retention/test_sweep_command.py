"""manage.py sweep_checkpoints: readable summary, --json, --dry-run, non-zero on failure."""

from __future__ import annotations

import io
import json
import threading
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db import connections

from checkpoints.store.planning import utcnow
from checkpoints.store.registry import get_saver
from retention.locks import sweep_lock
from retention.models import SweepRun
from retention.runs import mark_finished
from retention.sweep import register_live_thread_filter
from tests.retention_fixtures import holds, write

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def deployment():
    """The deployment's saver (SQLite in the test settings) with one due and one kept thread."""
    saver = get_saver()
    for name in ("done", "kept"):
        write(saver, name)
        mark_finished(saver, name, now=utcnow() - timedelta(days=2))
    register_live_thread_filter("keeper", lambda ids: {"kept"})
    return saver


def run(*args) -> str:
    out = io.StringIO()
    call_command("sweep_checkpoints", *args, stdout=out)
    return out.getvalue()


def test_the_summary_names_counts_and_every_spared_thread(deployment):
    text = run()
    assert "Swept the sqlite store (waiting 10080 min, finished 1440 min)" in text
    assert "deleted 1 thread(s): 1 finished, 0 waiting" in text
    assert "spared 1 thread(s)" in text
    assert "kept  horizon=finished  owner=keeper" in text
    assert not holds(deployment, "done") and holds(deployment, "kept")
    assert SweepRun.objects.get().triggered_by == "command"


def test_json_prints_the_result_fields(deployment):
    data = json.loads(run("--json"))
    assert data["provider"] == "sqlite"
    assert (data["swept_count"], data["finished_swept"], data["waiting_swept"]) == (1, 1, 0)
    assert data["spared"] == [
        {
            "thread_id": "kept",
            "horizon": "finished",
            "owner": "keeper",
            "reason": "live-thread filter 'keeper' claims it",
        }
    ]
    assert data["skipped"] is None and data["dry_run"] is False
    assert data["sweep_run_id"] == SweepRun.objects.get().pk


def test_dry_run_says_what_would_go_and_deletes_nothing(deployment):
    text = run("--dry-run")
    assert "Dry run on the sqlite store" in text and "would delete 1 thread(s)" in text
    assert holds(deployment, "done") and not SweepRun.objects.exists()


def test_a_failing_filter_exits_non_zero_naming_it(deployment):
    register_live_thread_filter("agents", lambda ids: 1 / 0)
    with pytest.raises(CommandError, match=r"live_filter_failed.*'agents'") as caught:
        run()
    assert caught.value.returncode == 1
    assert holds(deployment, "done")


def test_a_second_sweep_exits_non_zero_while_one_runs(deployment):
    held, release = threading.Event(), threading.Event()

    def hold():
        with sweep_lock(deployment):
            held.set()
            release.wait(30)
        connections.close_all()

    other = threading.Thread(target=hold)
    other.start()
    try:
        assert held.wait(30)
        with pytest.raises(CommandError, match="another sweep is running"):
            run()
    finally:
        release.set()
        other.join(30)
    assert holds(deployment, "done")
