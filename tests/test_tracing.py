"""The store's own OpenTelemetry spans, read from the SDK's in-memory exporter; and no
OpenTelemetry at all (not even imported) where it is not installed."""

from __future__ import annotations

import re
import subprocess
import sys
from datetime import timedelta

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from checkpoints.demo import build_demo_graph
from checkpoints.graphs import time_travel_for
from checkpoints.store.planning import utcnow
from retention.runs import mark_finished
from retention.sweep import sweep_checkpoints
from tests.standalone import ROOT

EXPORTER = InMemorySpanExporter()
SECRET = "a-stored-value-no-span-may-carry"


class WhileTesting(SimpleSpanProcessor):
    """Exports only while this module runs: the provider outlives it (set once a process)."""

    on = False

    def on_end(self, span) -> None:
        if self.on:
            super().on_end(span)


PROCESSOR = WhileTesting(EXPORTER)


@pytest.fixture(scope="module", autouse=True)
def provider_with_memory_exporter():
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    if not getattr(PROCESSOR, "added", False):
        provider.add_span_processor(PROCESSOR)
        PROCESSOR.added = True
    PROCESSOR.on = True
    yield
    PROCESSOR.on = False
    EXPORTER.clear()


@pytest.fixture
def spans():
    EXPORTER.clear()
    return lambda: {s.name: s for s in EXPORTER.get_finished_spans()}


def test_each_saver_call_opens_a_span_with_sizes_not_values(store, spans):
    config = {"configurable": {"thread_id": "traced", "checkpoint_ns": ""}}
    build_demo_graph(store).invoke({"topic": SECRET}, config)
    head = store.get_tuple(config)
    listed = len(list(store.list(config)))
    assert listed == 5  # the demo graph's input, plan, write, review and its start
    store.copy_thread("traced", "traced-copy")
    store.prune(["traced-copy"], strategy="keep_latest")
    store.delete_thread("traced-copy")
    got = spans()
    for name in ("put", "put_writes", "get", "list", "copy", "prune", "delete"):
        span = got.get(f"checkpoints.saver {name}")
        assert span is not None, (name, sorted(got))
        assert span.attributes["checkpoints.provider"] == store.provider, name
    put = got["checkpoints.saver put"].attributes
    assert put["checkpoints.namespace"] == "" and put["checkpoints.checkpoint_count"] == 1
    assert put["checkpoints.bytes"] > 0
    assert got["checkpoints.saver list"].attributes["checkpoints.checkpoint_count"] == listed
    assert got["checkpoints.saver get"].attributes["checkpoints.checkpoint_count"] == 1
    assert head is not None
    for span in EXPORTER.get_finished_spans():
        assert all(SECRET not in str(v) for v in span.attributes.values()), span.name
        assert "traced" not in str(dict(span.attributes)), span.name  # no thread ids either


async def test_async_saver_calls_open_spans_too(store, spans):
    config = {"configurable": {"thread_id": "traced-async", "checkpoint_ns": ""}}
    await build_demo_graph(store).ainvoke({"topic": "async"}, config)
    assert await store.aget_tuple(config) is not None
    assert len([c async for c in store.alist(config)]) == 5
    got = spans()
    for name in ("put", "put_writes", "get", "list"):
        assert f"checkpoints.saver {name}" in got, (name, sorted(got))


@pytest.mark.parametrize("provider", ["sqlite"])
def test_time_travel_and_sweep_batches_open_spans(store, spans):
    config = {"configurable": {"thread_id": "tt"}}
    build_demo_graph(store).invoke({"topic": "time travel"}, config)
    first = list(store.list(config))[-1].config["configurable"]["checkpoint_id"]
    travel = time_travel_for(store, "tt")
    travel.fork("tt", first, "tt-fork")
    travel.rollback("tt", first)
    mark_finished(store, "tt-fork", now=utcnow() - timedelta(days=3))
    sweep_checkpoints(saver=store, now=utcnow())
    got = spans()
    assert "checkpoints.timetravel fork" in got and "checkpoints.timetravel rollback" in got
    fork = got["checkpoints.timetravel fork"]
    assert fork.attributes["checkpoints.provider"] == "sqlite"
    # The saver's own spans nest inside the operation's.
    inside = [s for s in EXPORTER.get_finished_spans() if s.parent is not None]
    assert any(s.parent.span_id == fork.context.span_id for s in inside)
    batch = got["checkpoints.sweep batch"].attributes
    assert batch["checkpoints.thread_count"] >= 1 and batch["checkpoints.horizon"]


WITHOUT_OTEL = """
import sys

class NoOpenTelemetry:
    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ModuleNotFoundError(name)
        return None

sys.meta_path.insert(0, NoOpenTelemetry())
from checkpoints import from_conn_string, tracing

assert tracing.tracer is None
with from_conn_string("memory://") as saver:
    from checkpoints.demo import build_demo_graph

    config = {"configurable": {"thread_id": "plain"}}
    build_demo_graph(saver).invoke({"topic": "no tracing"}, config)
    assert saver.get_tuple(config) is not None
    assert not getattr(type(saver).get_tuple, "_traced", False)
loaded = sorted(m for m in sys.modules if m.startswith("opentelemetry"))
assert not loaded, loaded
print("untraced ok")
"""


def test_without_opentelemetry_nothing_is_imported_or_wrapped(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_OTEL],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("untraced ok")


WIRED = {
    # A request through each entry point serve.sh and a WSGI host use; Django's own
    # instrumentation drops ASGI requests silently unless the ASGI instrumentation is there.
    "wsgi": """
from project.wsgi import application  # noqa: F401 - instruments before the app loads
from django.test import Client

assert Client().get("/health/", HTTP_ACCEPT="application/json").status_code in (200, 503)
""",
    "asgi": """
import asyncio
from project.asgi import application  # noqa: F401 - instruments before the app loads
from django.test import AsyncClient

async def main():
    response = await AsyncClient().get("/health/", headers={"accept": "application/json"})
    assert response.status_code in (200, 503)

asyncio.run(main())
""",
}
FLUSH = """
from opentelemetry import trace

trace.get_tracer_provider().force_flush()
"""


@pytest.mark.parametrize("entry", ["wsgi", "asgi"])
def test_the_service_wires_the_standard_instrumentations(tmp_path, entry):
    from django.conf import settings

    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(ROOT),
        "CHECKPOINTS_DATA_DIR": str(tmp_path),
        "REDIS_URL": settings.REDIS_TEST_URL,
        "OTEL_TRACES_EXPORTER": "console",
        "DJANGO_LOG_FORMAT": "console",
    }
    done = subprocess.run(
        [sys.executable, "-c", WIRED[entry] + FLUSH],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    names = set(re.findall(r'"name": "([^"]+)"', done.stdout))
    assert "GET health/" in names, names  # Django's server span
    assert any(n in ("PING", "SET", "GET") for n in names), names  # Redis, from the probe


@pytest.mark.parametrize("provider", ["postgres", "sqlite"])
def test_a_batch_put_many_and_put_prepared_open_their_own_spans(store, spans):
    from langgraph.checkpoint.base import empty_checkpoint

    def batch(thread_id):
        checkpoint = {**empty_checkpoint(), "channel_values": {"a": 1}}
        checkpoint["channel_versions"] = {"a": "1"}
        config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        at = {"configurable": {**config["configurable"], "checkpoint_id": checkpoint["id"]}}
        puts = [(config, checkpoint, {"source": "input", "step": -1}, {"a": "1"})]
        return puts, [(at, [("a", 2)], "task-1", ""), (at, [("a", 3)], "task-2", "")]

    store.put_many(*batch("many"))
    store.put_prepared(store.prepare_many(*batch("prepared")))
    got = spans()
    many = got["checkpoints.saver put_many"].attributes
    prepared = got["checkpoints.saver put_prepared"].attributes
    assert many["checkpoints.write_count"] == prepared["checkpoints.write_count"] == 2
    assert many["checkpoints.bytes"] > 0
