"""`manage.py reset_checkpoint_store`: empties a refused store and lets savers build again."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from checkpoints.errors import CheckpointStoreFormatError
from checkpoints.store.registry import get_saver
from tests.store_helpers import put_chain


def _refuse_format(provider, store):
    """Make the store look like another version wrote it."""
    if provider in ("sqlite", "postgres"):
        from checkpoints.models import StoreFormat
        from checkpoints.store.orm.ledger import forget_format_checks

        StoreFormat.objects.using(store.using).update(generation=2)
        forget_format_checks()
    else:
        from checkpoints.store.redis.keys import FORMAT_KEY

        store.client.set(FORMAT_KEY, 2)


def _rebuild(provider, store):
    if provider == "redis":
        return get_saver("redis", conn_string=store.conn_string)
    return get_saver(provider, using=store.using)


@pytest.fixture(params=["sqlite", "postgres", "redis"])
def provider(request):
    return request.param


def _options(provider, store):
    if provider == "redis":
        return {"conn_string": store.conn_string}
    return {"using": store.using}


def test_reset_empties_and_records_generation(store, provider, monkeypatch):
    put_chain(store, "old-thread", {"v": 1}, steps=3)
    _refuse_format(provider, store)
    with pytest.raises(CheckpointStoreFormatError, match="reset the checkpoint store"):
        _rebuild(provider, store)
    # The command builds its saver like get_saver() does, on the deployment's store.
    monkeypatch.setattr(
        "checkpoints.management.commands.reset_checkpoint_store.get_saver",
        lambda name, **kw: get_saver(provider, **_options(provider, store), **kw),
    )
    out = io.StringIO()
    call_command("reset_checkpoint_store", "--yes", stdout=out)
    assert "1 thread(s) deleted" in out.getvalue()
    fresh = _rebuild(provider, store)
    assert fresh.get_tuple({"configurable": {"thread_id": "old-thread"}}) is None
    put_chain(fresh, "new-thread", {"v": 2})


def test_reset_asks_and_cancel_keeps_data(store, provider, monkeypatch):
    put_chain(store, "kept", {"v": 1})
    monkeypatch.setattr(
        "checkpoints.management.commands.reset_checkpoint_store.get_saver",
        lambda name, **kw: get_saver(provider, **_options(provider, store), **kw),
    )
    monkeypatch.setattr("builtins.input", lambda prompt: "no")
    with pytest.raises(CommandError, match="cancelled"):
        call_command("reset_checkpoint_store")
    assert store.get_tuple({"configurable": {"thread_id": "kept"}}) is not None
