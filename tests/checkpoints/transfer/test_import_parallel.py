"""import_checkpoints --jobs N: threads in parallel processes from LangGraph's tables.

The sources are real PostgresSaver and SqliteSaver stores: the threads of real graphs
(interrupts, a subgraph, sends), their rows copied under more ids in SQL. ``--jobs 2``
leaves exactly what ``--jobs 1`` leaves; an import killed part-way leaves whole threads
and a second run completes it, skipping what is there; progress is shown as a bar on a
terminal and as plain lines elsewhere; what needs one process refuses ``--jobs``.
"""

from __future__ import annotations

import io
import json
import os
import signal
import sqlite3
import subprocess
import time

import pytest
from django.core.management import CommandError, call_command

from checkpoints.management.commands.import_checkpoints import Progress
from checkpoints.transfer import SaverSource, verify_thread
from checkpoints.transfer.records import header
from tests.checkpoints.transfer.graphs import THREADS, copy_rows, seed
from tests.checkpoints.transfer.records_helpers import deployment, held

COPIES = 10


@pytest.fixture(params=["sqlite", "postgres"])
def provider(request):
    return request.param


def run(*args, stderr=None) -> str:
    out = io.StringIO()
    call_command("import_checkpoints", *args, stdout=out, stderr=stderr or io.StringIO())
    return out.getvalue()


def snapshot(store) -> dict:
    source = SaverSource(store)
    return {t: source.thread(t) for t in sorted(source.thread_ids())}


def test_two_jobs_leave_what_one_job_leaves(peer, peer_url, target):
    seed(peer)
    counts = copy_rows(peer, COPIES)
    assert len(counts) == len(THREADS) + COPIES * (len(THREADS) - 1)
    out = run(peer_url, "--jobs", "1")
    assert f"Imported {len(counts)} thread(s), {sum(counts.values())} checkpoint(s)" in out
    one = snapshot(target)
    target.reset_store()
    out = run(peer_url, "--jobs", "2")
    assert f"Imported {len(counts)} thread(s), {sum(counts.values())} checkpoint(s)" in out
    assert "0 skipped, 0 refused" in out
    assert "Retention: each thread's clock restarted" in out
    two = snapshot(target)
    assert list(two) == list(one)
    for thread_id, thread in one.items():
        verify_thread(thread, two[thread_id])
    # A second run finds every thread there, in batches, and reads none of them.
    again = run(peer_url, "--jobs", "2")
    assert "Imported 0 thread(s), 0 checkpoint(s)" in again
    assert f"{len(counts)} skipped" in again


def test_progress_is_a_bar_on_a_terminal_and_plain_lines_elsewhere(
    peer, peer_url, target, monkeypatch
):
    seed(peer)
    counts = copy_rows(peer, 4)
    monkeypatch.setattr(Progress, "PLAIN_EVERY", 0.0)
    plain = io.StringIO()
    run(peer_url, "--jobs", "2", stderr=plain)
    lines = plain.getvalue().splitlines()
    assert lines[-1].startswith(f"progress: {len(counts)}/{len(counts)} threads")
    assert "threads/s" in lines[-1] and "ETA 0:00:00" in lines[-1]
    assert "\r" not in plain.getvalue()

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    target.reset_store()
    bar = Terminal()
    run(peer_url, stderr=bar)
    drawn = bar.getvalue()
    assert drawn.count("\r[") == len(counts)
    assert f"\r[{'#' * Progress.WIDTH}] {len(counts)}/{len(counts)} threads" in drawn
    assert drawn.endswith("\n")


def test_what_needs_one_process_refuses_jobs(peer, peer_url, target, tmp_path):
    seed(peer)
    export = tmp_path / "empty.jsonl"
    export.write_text(json.dumps(header()) + "\n")
    with pytest.raises(CommandError, match="an export file is read in order"):
        run(str(export), "--jobs", "2")
    with pytest.raises(CommandError, match="--jobs 2 with --strict"):
        run(peer_url, "--jobs", "2", "--strict")
    with pytest.raises(CommandError, match="--jobs 0 must be at least 1"):
        run(peer_url, "--jobs", "0")
    run(peer_url, "--thread", "t-done")
    with pytest.raises(CommandError, match="cannot import thread 't-done'"):
        run(peer_url, "--jobs", "2", "--on-conflict", "fail")
    assert set(SaverSource(target).thread_ids()) == {"t-done"}


def test_a_killed_parallel_import_leaves_whole_threads_and_a_rerun_completes(lg_sqlite, tmp_path):
    seed(lg_sqlite)
    counts = copy_rows(lg_sqlite, 300)
    db = tmp_path / "target.sqlite3"
    manage, env = deployment(db, tmp_path)
    source = f"langgraph+sqlite:///{lg_sqlite.path}"
    importer = subprocess.Popen(
        [*manage, "import_checkpoints", source, "--jobs", "2"],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its workers in its process group, killed with it
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and importer.poll() is None:
            try:
                if len(held(db)) >= 40:
                    break
            except sqlite3.OperationalError:
                pass  # a worker holds the write lock
            time.sleep(0.05)
        assert importer.poll() is None, "the import finished before it could be killed"
        os.killpg(importer.pid, signal.SIGKILL)
    finally:
        importer.wait()
    assert importer.returncode == -signal.SIGKILL
    there = held(db)
    assert 40 <= len(there) < len(counts)
    assert {t: counts[t] for t in there} == there  # whole threads or none
    rerun = subprocess.run(
        [*manage, "import_checkpoints", source, "--jobs", "2"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert rerun.returncode == 0, rerun.stderr
    assert held(db) == counts
    assert f"{len(there)} skipped, 0 refused" in rerun.stdout
    assert f"Imported {len(counts) - len(there)} thread(s)" in rerun.stdout


def test_a_thread_the_store_refuses_in_a_shared_transaction_leaves_the_others_whole(
    lg_sqlite, target, monkeypatch, settings, capsys
):
    seed(lg_sqlite)
    counts = copy_rows(lg_sqlite, 4)
    # Every thread in one transaction; t-big's 100,000-character value over the store's
    # bound for one value: the store refuses it as it writes (the checks do not look).
    monkeypatch.setattr("checkpoints.transfer.copy.COMMIT_EVERY", 1000)
    monkeypatch.setattr("checkpoints.transfer.copy.COMMIT_SECONDS", 600.0)
    settings.CHECKPOINTS = {**settings.CHECKPOINTS, "CODEC_MAX_BYTES": 50_000}
    err = io.StringIO()
    with pytest.raises(CommandError, match="1 thread"):
        run(f"langgraph+sqlite:///{lg_sqlite.path}", stderr=err)
    assert "refused: thread 't-big': cannot store " in err.getvalue(), err.getvalue()
    source = SaverSource(target)
    there = {t: len(source.thread(t).checkpoints) for t in source.thread_ids()}
    assert there == {t: n for t, n in counts.items() if t != "t-big"}


def test_a_thread_id_a_park_names_is_taken_for_the_batched_presence_check(lg_sqlite, target):
    from datetime import timedelta

    from checkpoints.store.planning import utcnow
    from retention.models import Park
    from retention.runs import park_presence

    seed(lg_sqlite)
    now = utcnow()
    Park.objects.create(
        thread_id="t-done",
        deadline=now + timedelta(days=1),
        created_at=now,
        provider=target.provider,
    )
    # The batched check answers as the thread-by-thread one (parks count where a run
    # can be parked: `runs.park_presence`).
    taken = park_presence(target, "t-done") is not None
    assert taken == target.can_park
    out = run(f"langgraph+sqlite:///{lg_sqlite.path}")
    assert f"Imported {len(THREADS) - taken} thread(s)" in out and f"{int(taken)} skipped" in out
    assert ("t-done" in set(SaverSource(target).thread_ids())) is not taken
