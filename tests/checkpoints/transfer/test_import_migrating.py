"""Imports a migrating team can trust, from real PostgresSaver and SqliteSaver stores.

Threads are written by LangGraph's own savers, one of them last written 200 days ago. The
import restarts every thread's retention clock and says how many are older than the
waiting horizon; ``--keep-source-times`` keeps the source's times, so the next sweep takes
the old one. Owners come from ``--owner`` or ``--owner-from-metadata``; ``--thread-metadata``
lifts checkpoint metadata into the thread metadata the threads API searches; export, reset
and import keep thread metadata and holds; a source needing a package we do not install
names the pip extra in one line.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from langgraph.checkpoint.base import empty_checkpoint

from checkpoints.langgraph_api.models import ThreadMetadata
from checkpoints.models import Thread
from checkpoints.store.planning import utcnow
from checkpoints.store.registry import get_saver
from checkpoints.transfer import open_source
from retention.holds import hold_thread, holds_on
from retention.models import Hold
from retention.sweep import sweep_checkpoints
from tests.api_fixtures import token_client

OLD_DAYS = 200


@pytest.fixture(params=["sqlite", "postgres"])
def provider(request):
    """The stores whose threads are database rows (their times can be kept)."""
    return request.param


def write_thread(saver, thread_id: str, *, days_ago: float, metadata: dict, steps: int = 3):
    """``steps`` checkpoints through LangGraph's own ``put``, the newest ``days_ago`` old."""
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    newest = datetime.now(UTC) - timedelta(days=days_ago)
    version = None
    for step in range(steps):
        checkpoint = empty_checkpoint()
        checkpoint["ts"] = (newest - timedelta(minutes=steps - 1 - step)).isoformat()
        version = saver.get_next_version(version, None)
        checkpoint["channel_values"] = {"count": step}
        checkpoint["channel_versions"] = {"count": version}
        config = saver.put(
            config, checkpoint, {"source": "loop", "step": step, **metadata}, {"count": version}
        )
    return newest


@pytest.fixture
def aged(peer):
    """An old thread (200 days) of team red and a fresh one of team blue in the peer."""
    old = write_thread(peer, "old", days_ago=OLD_DAYS, metadata={"team": "red", "tier": "gold"})
    write_thread(peer, "new", days_ago=0, metadata={"team": "blue", "who": "alice"})
    return old


def run(*args) -> str:
    from io import StringIO

    out = StringIO()
    call_command("import_checkpoints", *args, stdout=out)
    return out.getvalue()


def times(store, thread_id: str) -> tuple[datetime, datetime]:
    row = Thread.objects.using(store.db_alias).get(thread_id=thread_id)
    return row.created_at, row.last_write_at


def test_the_import_restarts_every_clock_and_counts_the_threads_past_the_horizon(
    aged, peer_url, target
):
    before = utcnow()
    out = run(peer_url)
    assert "Imported 2 thread(s)" in out
    assert "Retention: each thread's clock restarted at this import" in out
    assert "waiting horizon (10080 min unless the thread declares its own)" in out
    assert "1 of them were last written longer ago than that and would fall to the next " in out
    assert "sweep with --keep-source-times." in out
    for thread_id in ("old", "new"):
        created, last = times(target, thread_id)
        assert created >= before and last >= before
    # Restarted, nothing is due: the sweep keeps both.
    result = sweep_checkpoints(dry_run=True, saver=target)
    assert result.deleted_ids["waiting"] == []


def test_keep_source_times_keeps_the_newest_ts_so_the_next_sweep_takes_it(aged, peer_url, target):
    out = run(peer_url, "--keep-source-times")
    assert "Retention: each thread kept its source's times" in out
    assert "1 of them are older than their waiting horizon (10080 min" in out
    assert "so the next sweep deletes them" in out
    created, last = times(target, "old")
    assert last == aged
    assert created == aged - timedelta(minutes=2)  # its oldest checkpoint's ts
    assert times(target, "new")[1] > utcnow() - timedelta(minutes=5)
    result = sweep_checkpoints(dry_run=True, saver=target)
    assert result.deleted_ids["waiting"] == ["old"]


def test_keep_source_times_on_a_store_that_keeps_its_own_times_is_refused(
    peer, peer_url, store_memory
):
    write_thread(peer, "old", days_ago=OLD_DAYS, metadata={})
    with pytest.raises(
        CommandError,
        match="--keep-source-times sets each thread's created and "
        "last-write times, which the memory store keeps itself",
    ):
        run(peer_url, "--keep-source-times")
    assert store_memory.get_tuple({"configurable": {"thread_id": "old"}}) is None


@pytest.fixture
def store_memory(request, monkeypatch):
    from tests.store_helpers import make_saver

    saver = make_saver(request, "memory")
    monkeypatch.setattr(
        "checkpoints.management.commands.import_checkpoints.get_saver", lambda: saver
    )
    return saver


def test_owners_from_the_flag_or_from_a_metadata_key(aged, peer_url, target):
    for name in ("ops", "alice"):
        User.objects.db_manager(target.db_alias).create(username=name)
    run(peer_url, "--owner-from-metadata", "who", "--owner", "ops")
    owners = dict(Thread.objects.using(target.db_alias).values_list("thread_id", "owner__username"))
    # "new" names alice under "who"; "old" names no one, so --owner has it.
    assert owners == {"new": "alice", "old": "ops"}


def test_lifted_metadata_is_found_by_the_threads_api_search(aged, peer_url, target, monkeypatch):
    monkeypatch.setattr("checkpoints.api.base.get_saver", lambda: target)
    out = run(peer_url, "--thread-metadata", "team,tier")
    assert "Imported 2 thread(s)" in out
    rows = {
        r.thread_id: r.metadata for r in ThreadMetadata.objects.filter(provider=target.provider)
    }
    assert rows == {"old": {"team": "red", "tier": "gold"}, "new": {"team": "blue"}}
    staff = User.objects.create_user("staff", password="pw", is_staff=True)
    if target.db_alias != "default":
        User(pk=staff.pk, username="staff", is_staff=True).save(using=target.db_alias)
    client = token_client(staff)
    found = client.post("/langgraph/threads/search", {"metadata": {"team": "red"}}, format="json")
    assert found.status_code == 200, found.content
    assert [t["thread_id"] for t in found.json()] == ["old"]
    assert found.json()[0]["metadata"] == {"team": "red", "tier": "gold"}


def test_a_bad_key_list_is_refused_naming_it(aged, peer_url, target):
    with pytest.raises(CommandError, match=r"--thread-metadata 'team,,tier' must name keys"):
        run(peer_url, "--thread-metadata", "team,,tier")


def test_a_lifted_key_the_service_keeps_for_itself_refuses_that_thread(
    aged, peer, peer_url, target, capsys
):
    write_thread(peer, "claims", days_ago=0, metadata={"user_id": "mallory"})
    with pytest.raises(CommandError, match="1 thread"):
        run(peer_url, "--thread-metadata", "user_id")
    err = capsys.readouterr().err
    assert "refused: thread 'claims': its metadata: thread metadata key 'user_id' is the " in err
    held = set(Thread.objects.using(target.db_alias).values_list("thread_id", flat=True))
    assert held == {"old", "new"}


def test_export_reset_import_keeps_thread_metadata_and_holds(target, monkeypatch, tmp_path):
    monkeypatch.setattr("checkpoints.api.base.get_saver", lambda: target)
    for where in ("export_checkpoints", "import_checkpoints"):
        monkeypatch.setattr(f"checkpoints.management.commands.{where}.get_saver", lambda: target)
    staff = User.objects.create_user("staff", password="pw", is_staff=True)
    if target.db_alias != "default":
        User(pk=staff.pk, username="staff", is_staff=True).save(using=target.db_alias)
    client = token_client(staff)
    for thread_id, team in (("kept", "red"), ("plain", "blue")):
        made = client.post(
            "/langgraph/threads",
            {"thread_id": thread_id, "metadata": {"team": team}},
            format="json",
        )
        assert made.status_code == 200, made.content
    until = utcnow() + timedelta(days=3)
    hold_thread(target, "kept", reason="refund dispute", by="ops", until=until)
    export = tmp_path / "all.jsonl"
    call_command("export_checkpoints", "--output", str(export))
    assert '"extras":{"metadata":{"team":"red"},"holds":{"reason":"refund dispute"' in (
        export.read_text()
    )
    target.reset_store()
    # A new deployment: no thread metadata, no holds.
    ThreadMetadata.objects.all().delete()
    Hold.objects.all().delete()
    run(str(export))
    rows = {
        r.thread_id: r.metadata for r in ThreadMetadata.objects.filter(provider=target.provider)
    }
    assert rows == {"kept": {"team": "red"}, "plain": {"team": "blue"}}
    hold = holds_on(provider=target.provider, thread_ids=["kept", "plain"])
    assert list(hold) == ["kept"]
    assert (hold["kept"].reason, hold["kept"].created_by) == ("refund dispute", "ops")
    assert hold["kept"].until == until
    found = client.post("/langgraph/threads/search", {"metadata": {"team": "red"}}, format="json")
    assert [t["thread_id"] for t in found.json()] == ["kept"]


def test_a_source_needing_a_package_we_do_not_install_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "langgraph.checkpoint.redis", None)
    with pytest.raises(Exception) as caught:  # noqa: PT011 - the type is asserted below
        with open_source("langgraph+redis://127.0.0.1:6379/0", trust_source=True):
            pass
    assert type(caught.value).__name__ == "CheckpointConfigError"
    message = caught.value.message
    assert "\n" not in message
    assert 'pip install "checkpoint-store[langgraph-redis]"' in message


@pytest.mark.django_db
def test_the_command_answers_the_missing_package_in_one_line(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "langgraph.checkpoint.redis", None)
    monkeypatch.setattr(
        "checkpoints.management.commands.import_checkpoints.get_saver", lambda: get_saver()
    )
    with pytest.raises(CommandError) as caught:
        call_command("import_checkpoints", "langgraph+redis://127.0.0.1:6379/0", "--trust-source")
    assert "ModuleNotFoundError" not in str(caught.value)
    assert "checkpoint-store[langgraph-redis]" in str(caught.value)


def test_the_named_extra_installs_that_package():
    import tomllib
    from pathlib import Path

    from checkpoints.transfer.sources import REDIS_EXTRA

    pyproject = Path(__file__).resolve().parents[3] / "pyproject.toml"
    extras = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]
    assert extras[REDIS_EXTRA] == ["langgraph-checkpoint-redis"]
