"""kill -9 of the store service in the middle of a run of many threads, then a restart:
every put the client saw acknowledged is there, the run goes on through the retries, and a
call that cannot be retried raises StoreUnavailable while the service is down."""

from __future__ import annotations

import threading
import time

import pytest

from checkpoints.errors import StoreUnavailable
from checkpoints.remote import RemoteSaver
from tests.remote.service_process import ServiceProcess
from tests.store_helpers import config_for, put_chain

WRITERS = 6
THREADS_PER_WRITER = 4
STEPS = 6


@pytest.fixture
def service(tmp_path):
    process = ServiceProcess(tmp_path)
    process.prepare()
    process.start()
    yield process
    process.stop()


def test_kill_9_mid_run_loses_no_acknowledged_put_and_the_run_goes_on(service):
    acknowledged: list[dict] = []
    failures: list[BaseException] = []
    lock = threading.Lock()
    half = threading.Event()
    total = WRITERS * THREADS_PER_WRITER * STEPS

    def writer(index: int) -> None:
        saver = RemoteSaver(service.url, api_key=service.token, retry_seconds=60, timeout=10)
        try:
            for step in range(STEPS):
                for n in range(THREADS_PER_WRITER):
                    thread_id = f"w{index}-t{n}"
                    config = put_chain(saver, thread_id, {"step": step, "writer": index})
                    saver.put_writes(config, [("log", f"{thread_id}:{step}")], f"task-{step}")
                    with lock:
                        acknowledged.append(config)
                        if len(acknowledged) >= total // 3:
                            half.set()
        except BaseException as exc:  # noqa: BLE001 - reported by the test below
            failures.append(exc)
        finally:
            saver.close()

    workers = [threading.Thread(target=writer, args=(i,)) for i in range(WRITERS)]
    for worker in workers:
        worker.start()
    assert half.wait(120), service.log()[-3000:]
    service.kill()
    before_restart = len(acknowledged)
    # While it is down, a call that is not safe to repeat is tried once and named.
    once = RemoteSaver(service.url, api_key=service.token, retry_seconds=60)
    with pytest.raises(StoreUnavailable, match="once"):
        once.copy_thread("w0-t0", "copied")
    time.sleep(1.0)
    service.start()
    for worker in workers:
        worker.join(180)
    assert not failures, failures
    assert len(acknowledged) == total
    assert before_restart < total  # the kill came mid-run

    reader = RemoteSaver(service.url, api_key=service.token)
    for config in acknowledged:
        found = reader.get_tuple(config)
        assert found is not None, config
        assert (
            found.config["configurable"]["checkpoint_id"] == config["configurable"]["checkpoint_id"]
        )
    for index in range(WRITERS):
        for n in range(THREADS_PER_WRITER):
            thread_id = f"w{index}-t{n}"
            assert len(list(reader.list(config_for(thread_id)))) == STEPS
            latest = reader.get_tuple(config_for(thread_id))
            assert latest.checkpoint["channel_values"] == {"step": STEPS - 1, "writer": index}
            last = STEPS - 1
            assert latest.pending_writes == [(f"task-{last}", "log", f"{thread_id}:{last}")]
