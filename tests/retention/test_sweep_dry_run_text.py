"""manage.py sweep_checkpoints --dry-run in text names every thread it would delete, by
horizon, as --json does; an operator reads the list before the real run."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import call_command

from checkpoints.models import Thread
from checkpoints.store.planning import utcnow
from checkpoints.store.registry import get_saver
from retention.management.commands import sweep_checkpoints as command
from retention.runs import mark_finished
from tests.retention_fixtures import holds, write

pytestmark = pytest.mark.django_db(transaction=True)


def run(*args) -> str:
    out = io.StringIO()
    call_command("sweep_checkpoints", *args, stdout=out)
    return out.getvalue()


def test_the_dry_run_text_names_the_threads_it_would_delete():
    saver = get_saver()
    write(saver, "done")
    mark_finished(saver, "done", now=utcnow() - timedelta(days=2))
    write(saver, "idle")
    write(saver, "fresh")
    long_ago = utcnow() - timedelta(days=30)
    Thread.objects.using(saver.using).filter(thread_id="idle").update(
        created_at=long_ago, last_write_at=long_ago
    )
    text = run("--dry-run")
    assert "would delete 2 thread(s): 1 finished, 1 waiting" in text
    assert "    done  horizon=finished" in text
    assert "    idle  horizon=waiting" in text
    assert "fresh" not in text
    assert holds(saver, "done") and holds(saver, "idle")
    # The real run names no list of its own (its counts and spared threads stay as before).
    assert "horizon=waiting" not in run()
    assert not holds(saver, "idle") and holds(saver, "fresh")


def test_a_long_list_is_cut_and_says_how_many_more(monkeypatch):
    saver = get_saver()
    monkeypatch.setattr(command, "LISTED", 2)
    long_ago = utcnow() - timedelta(days=30)
    for n in range(5):
        write(saver, f"idle-{n}")
    Thread.objects.using(saver.using).update(created_at=long_ago, last_write_at=long_ago)
    text = run("--dry-run")
    assert text.count("horizon=waiting") == 2
    assert "... and 3 more waiting (--json names all)" in text
