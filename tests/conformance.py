"""LangGraph's own conformance suite on a saver, through its async or its sync methods."""

from __future__ import annotations

import asyncio

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.conformance import validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES
from langgraph.checkpoint.conformance.initializer import RegisteredCheckpointer
from langgraph.checkpoint.conformance.report import ProgressCallbacks


async def _sync(func, *args):
    # Django refuses ORM calls on the event loop's thread, as it should: run them off it.
    return await asyncio.to_thread(func, *args)


class SyncDriven(BaseCheckpointSaver):
    """Runs the (async) suite against a saver's sync methods."""

    def __init__(self, inner):
        super().__init__(serde=inner.serde)
        self.inner = inner

    def get_next_version(self, current, channel=None):
        return self.inner.get_next_version(current, channel)

    async def aget_tuple(self, config):
        return await _sync(self.inner.get_tuple, config)

    async def alist(self, config, *, filter=None, before=None, limit=None):
        items = await _sync(
            lambda: list(self.inner.list(config, filter=filter, before=before, limit=limit))
        )
        for item in items:
            yield item

    async def aput(self, config, checkpoint, metadata, new_versions):
        return await _sync(self.inner.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(self, config, writes, task_id, task_path=""):
        return await _sync(self.inner.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id):
        return await _sync(self.inner.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids):
        return await _sync(self.inner.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id, target_thread_id):
        return await _sync(self.inner.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids, *, strategy="keep_latest"):
        return await _sync(lambda: self.inner.prune(thread_ids, strategy=strategy))

    # The ninth capability (delta_channel_history, on LangGraph's main branch): detected by
    # this override, so a wrapper without it would be reported as not implementing it.
    def get_delta_channel_history(self, *, config, channels):
        return self.inner.get_delta_channel_history(config=config, channels=channels)

    async def aget_delta_channel_history(self, *, config, channels):
        return await _sync(
            lambda: self.inner.get_delta_channel_history(config=config, channels=channels)
        )


def run_suite(store, provider: str, path: str) -> None:
    """Run the whole suite on ``store`` (``path``: "async" or "sync"); every capability must
    be implemented and pass."""
    subject = store if path == "async" else SyncDriven(store)

    async def factory():
        yield subject

    registered = RegisteredCheckpointer(name=f"{provider}-{path}", factory=factory)
    failures: list[str] = []

    def on_result(capability, test_name, passed, error):
        if not passed:
            failures.append(f"{capability}.{test_name}: {error}")

    report = asyncio.run(validate(registered, progress=ProgressCallbacks(on_test_result=on_result)))
    assert not failures, "\n".join(failures)
    for capability in ALL_CAPABILITIES:
        result = report.results[capability.value]
        # Every capability must be implemented and pass: none may be declared unsupported.
        assert result.detected, f"{capability.value} not implemented on {provider}"
        assert result.passed is True, f"{capability.value} failed on {provider}"
        assert result.tests_passed > 0
    print(
        f"conformance {provider}/{path}: "
        + ", ".join(
            f"{k}={v.tests_passed}/{v.tests_passed + v.tests_failed}"
            for k, v in sorted(report.results.items())
        )
    )
