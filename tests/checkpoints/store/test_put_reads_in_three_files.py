"""A PostgreSQL put and a SQLite put each run in at most three files of their dialect's
package (issue 51): what a reader follows from the saver's ``put`` to the server. The
contract, the codec, sealing and the pure plans are shared and not counted."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async
from langgraph.checkpoint.base import empty_checkpoint

from tests.store_helpers import config_for

PACKAGES = Path(__file__).resolve().parents[3] / "checkpoints" / "store"


def _profiler(dialect: str) -> tuple[set[str], object]:
    """A profile function recording which files of ``checkpoints/store/<dialect>/`` run."""
    package = str(PACKAGES / dialect) + "/"
    seen: set[str] = set()

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_filename.startswith(package):
            seen.add(frame.f_code.co_filename[len(package) :])

    return seen, profile


async def _files_run(dialect: str, put) -> set[str]:
    """The dialect's files whose code runs during ``await put()``: on this thread and on
    Django's sync thread (where an ORM saver's async put runs)."""
    seen, profile = _profiler(dialect)
    in_sync_thread = sync_to_async(sys.setprofile, thread_sensitive=True)
    await in_sync_thread(profile)
    sys.setprofile(profile)
    try:
        await put()
    finally:
        sys.setprofile(None)
        await in_sync_thread(None)
    return seen


def _put(saver, thread_id: str, step: int):
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"n": step, "log": ["x"] * step}
    versions = {"n": f"{step:032}.0", "log": f"{step:032}.0"}
    checkpoint["channel_versions"] = versions
    return config_for(thread_id, ns=""), checkpoint, {"step": step}, versions


@pytest.mark.parametrize("provider", ["postgres", "sqlite"])
@pytest.mark.asyncio
async def test_a_put_reads_in_at_most_three_files_of_its_package(store, provider):
    await sync_to_async(store.put)(*_put(store, "warm", 1))  # pools and caches made
    await store.aput(*_put(store, "warm", 2))

    sync_files = await _files_run(
        provider, sync_to_async(lambda: store.put(*_put(store, "three", 1)))
    )
    async_files = await _files_run(provider, lambda: store.aput(*_put(store, "three", 2)))
    for files in (sync_files, async_files):
        assert "saver.py" in files
        assert len(files) <= 3, sorted(files)
    stored = await store.aget_tuple(config_for("three", ns=""))
    assert stored.checkpoint["channel_values"]["n"] == 2
