"""A thread's owner survives export, reset and import; a checkpoint's metadata never sets it.

Bob makes a thread through the API, and a checkpoint of it then claims ``user_id`` =
alice's id in its metadata (what a run writes when the client chose its config). The
export names bob (the owner the store records), the store is reset, and the import gives
the thread back to bob, not to the user the metadata names. On the stores that record
owners (the ORM's, SQLite and PostgreSQL).
"""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from checkpoints.models import Thread
from checkpoints.store.registry import get_saver
from tests.api_fixtures import token_client


@pytest.fixture(params=["sqlite", "postgres"])
def provider(request):
    return request.param


@pytest.fixture
def deployment(store, provider, monkeypatch):
    """The API and the commands on ``store``; alice and bob users of its database."""
    for where in (
        "checkpoints.api.base",
        "checkpoints.management.commands.import_checkpoints",
        "checkpoints.management.commands.export_checkpoints",
    ):
        monkeypatch.setattr(f"{where}.get_saver", lambda: store)
    monkeypatch.setattr(
        "checkpoints.management.commands.reset_checkpoint_store.get_saver",
        lambda name, **kw: get_saver(provider, using=store.using, **kw),
    )
    users = {
        name: User.objects.create_user(name, password=f"pw-{name}") for name in ("alice", "bob")
    }
    if store.using != "default":
        # The same users in the store's database, under the same ids: the API reads a
        # thread's owner there by the requesting user's id.
        for user in users.values():
            User(pk=user.pk, username=user.username).save(using=store.using)
    return store, users


def owner_of(store, thread_id: str) -> str | None:
    row = Thread.objects.using(store.using).select_related("owner").get(thread_id=thread_id)
    return row.owner.username if row.owner else None


def test_metadata_claiming_another_user_does_not_make_the_owner(deployment, tmp_path, capsys):
    store, users = deployment
    bob = users["bob"]
    alice_id = users["alice"].pk
    made = token_client(bob).post("/langgraph/threads", {"thread_id": "bobs"}, format="json")
    assert made.status_code == 200, made.content
    head = store.get_tuple({"configurable": {"thread_id": "bobs"}})
    body = {**head.checkpoint, "id": "1fff0000-0000-6000-8000-000000000001"}
    store.put(head.config, body, {"source": "loop", "step": 0, "user_id": alice_id}, {})
    assert owner_of(store, "bobs") == "bob"
    export = tmp_path / "export.jsonl"
    call_command("export_checkpoints", "--output", str(export))
    records = [json.loads(line) for line in export.read_text().splitlines()]
    assert [r["owner"] for r in records if r.get("kind") == "thread"] == ["bob"]
    call_command("reset_checkpoint_store", "--yes")
    assert not Thread.objects.using(store.using).filter(thread_id="bobs").exists()
    call_command("import_checkpoints", str(export))
    assert owner_of(store, "bobs") == "bob"
    head = store.get_tuple({"configurable": {"thread_id": "bobs"}})
    assert head.metadata["user_id"] == alice_id  # the claim stays data
    # Asking for the metadata's owner does not override the owner the export records.
    call_command("reset_checkpoint_store", "--yes")
    call_command("import_checkpoints", str(export), "--owner-from-metadata", "user_id")
    assert owner_of(store, "bobs") == "bob"
    capsys.readouterr()


def test_an_owner_who_is_no_user_here_refuses_the_thread(deployment, tmp_path, capsys):
    store, users = deployment
    bob = users["bob"]
    for thread_id in ("first", "second"):
        made = token_client(bob).post("/langgraph/threads", {"thread_id": thread_id}, format="json")
        assert made.status_code == 200, made.content
    export = tmp_path / "export.jsonl"
    call_command("export_checkpoints", "--output", str(export))
    lines = export.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if '"thread_id":"second"' in line)
    lines[at] = lines[at].replace('"owner":"bob"', '"owner":"mallory"')
    export.write_text("\n".join(lines) + "\n")
    call_command("reset_checkpoint_store", "--yes")
    with pytest.raises(CommandError, match="1 thread"):
        call_command("import_checkpoints", str(export), "--owner", "alice")
    err = capsys.readouterr().err
    assert f"refused: {export}:{at + 1}: thread 'second': its owner 'mallory' is no user" in err
    assert owner_of(store, "first") == "bob"
    assert not Thread.objects.using(store.using).filter(thread_id="second").exists()
