"""OpenTelemetry spans of the store's own, when ``opentelemetry-api`` is installed (the
``otel`` extra); without it ``tracer`` is None and callers take their untraced path.

Spans: ``checkpoints.saver <op>`` for each flow a saver runs (put, put_writes, delete, copy,
prune, ...) and each read (get_tuple, list), ``checkpoints.timetravel <op>`` for each
time-travel operation, ``checkpoints.sweep batch`` for each batch of a sweep. Attributes
say where and how much (provider, namespace, thread and checkpoint counts, the bytes the
values encoded to), never a stored value or a thread id.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager, nullcontext
from contextvars import ContextVar
from typing import Any

try:
    INSTALLED = importlib.util.find_spec("opentelemetry.trace") is not None
except ModuleNotFoundError:  # no "opentelemetry" package at all
    INSTALLED = False

tracer = None
if INSTALLED:
    from opentelemetry import trace

    # A proxy: spans go to whichever provider the process sets, before or after this import.
    tracer = trace.get_tracer("checkpoints")
    _UNSET = trace.ProxyTracerProvider
    _FROM_ENV = "OTEL_PYTHON_TRACER_PROVIDER" in os.environ


# True once a tracer provider is set (`recording`): a yes is final, since OpenTelemetry sets
# one once a process.
ON = False


def recording() -> bool:
    """A tracer provider is set: until one is, the API's spans would go nowhere, so the
    store does not make them (installed but unconfigured costs one check a call)."""
    global ON
    if not ON:
        ON = _provider_set()
    return ON


def _provider_set() -> bool:
    if _FROM_ENV or not hasattr(trace, "_TRACER_PROVIDER"):
        return not isinstance(trace.get_tracer_provider(), _UNSET)
    # Without the environment naming one, only set_tracer_provider sets it, here; asking
    # the API instead looks the variable up in os.environ (a KeyError caught) every call.
    return trace._TRACER_PROVIDER is not None


PREFIX = "checkpoints."


# The encoded bytes of the span under way (StoreSaver._encode adds to it).
_sent: ContextVar[list[int] | None] = ContextVar("checkpoints_span_bytes", default=None)


def count_bytes(size: int) -> None:
    box = _sent.get()
    if box is not None:
        box[0] += size


def _flow_attributes(provider: str, flow) -> tuple[str, dict[str, Any]]:
    """The operation's name and what its arguments say of its size (read before it runs)."""
    name = flow.__name__.removeprefix("_flow_").lstrip("_")
    attributes: dict[str, Any] = {PREFIX + "provider": provider, PREFIX + "operation": name}
    args = flow.gi_frame.f_locals if flow.gi_frame is not None else {}
    config = args.get("config")
    if isinstance(config, dict):
        ns = (config.get("configurable") or {}).get("checkpoint_ns")
        if isinstance(ns, str):
            attributes[PREFIX + "namespace"] = ns
    if isinstance(args.get("checkpoint_ns"), str):
        attributes[PREFIX + "namespace"] = args["checkpoint_ns"]
    if name == "put":
        attributes[PREFIX + "checkpoint_count"] = 1
    # A batch prepared ahead (`put_prepared`) carries its writes.
    writes = getattr(args.get("prepared"), "writes", args.get("writes"))
    if isinstance(writes, (list, tuple)):
        attributes[PREFIX + "write_count"] = len(writes)
    for key in ("thread_ids", "judged", "run_ids"):
        if hasattr(args.get(key), "__len__"):
            attributes[PREFIX + "thread_count"] = len(args[key])
    return name, attributes


def _finish(span, result: Any, sent: int) -> None:
    span.set_attribute(PREFIX + "bytes", sent)
    if isinstance(result, int) and not isinstance(result, bool):
        span.set_attribute(PREFIX + "result_count", result)


def run_flow(kind: str, provider: str, flow, perform: Callable, runner: Callable) -> Any:
    """``runner(flow, perform)`` inside a span for the flow, with the bytes it encoded."""
    if not recording():
        return runner(flow, perform)
    name, attributes = _flow_attributes(provider, flow)
    token = _sent.set([0])
    try:
        with tracer.start_as_current_span(f"{PREFIX}{kind} {name}", attributes=attributes) as s:
            result = runner(flow, perform)
            _finish(s, result, _sent.get()[0])
            return result
    finally:
        _sent.reset(token)


async def arun_flow(kind: str, provider: str, flow, aperform: Callable, runner: Callable) -> Any:
    if not recording():
        return await runner(flow, aperform)
    name, attributes = _flow_attributes(provider, flow)
    token = _sent.set([0])
    try:
        with tracer.start_as_current_span(f"{PREFIX}{kind} {name}", attributes=attributes) as s:
            result = await runner(flow, aperform)
            _finish(s, result, _sent.get()[0])
            return result
    finally:
        _sent.reset(token)


def _read_attributes(saver, config) -> dict[str, Any]:
    attributes: dict[str, Any] = {PREFIX + "provider": saver.provider}
    ns = ((config or {}).get("configurable") or {}).get("checkpoint_ns")
    if isinstance(ns, str):
        attributes[PREFIX + "namespace"] = ns
    return attributes


def traced_reads(cls) -> None:
    """Wrap the get_tuple, list and their async twins ``cls`` defines in spans."""
    import functools

    for name in ("get_tuple", "aget_tuple"):
        method = getattr(cls, name, None)  # its own or a mixin's
        if method is None or getattr(method, "_traced", False):
            continue
        if name == "get_tuple":

            def get(self, config, _m=method):
                if not recording():
                    return _m(self, config)
                attributes = _read_attributes(self, config)
                with tracer.start_as_current_span(PREFIX + "saver get", attributes=attributes) as s:
                    found = _m(self, config)
                    s.set_attribute(PREFIX + "checkpoint_count", int(found is not None))
                    return found

        else:

            async def get(self, config, _m=method):
                if not recording():
                    return await _m(self, config)
                attributes = _read_attributes(self, config)
                with tracer.start_as_current_span(PREFIX + "saver get", attributes=attributes) as s:
                    found = await _m(self, config)
                    s.set_attribute(PREFIX + "checkpoint_count", int(found is not None))
                    return found

        get._traced = True
        setattr(cls, name, functools.wraps(method)(get))
    for name in ("list", "alist"):
        method = getattr(cls, name, None)  # its own or a mixin's
        if method is None or getattr(method, "_traced", False):
            continue
        if name == "list":

            def listed(self, config, *args, _m=method, **kwargs) -> Iterator:
                if not recording():
                    yield from _m(self, config, *args, **kwargs)
                    return
                # Not made current: a generator's caller may resume it in another context.
                span = tracer.start_span(
                    PREFIX + "saver list", attributes=_read_attributes(self, config)
                )
                count = 0
                try:
                    for item in _m(self, config, *args, **kwargs):
                        count += 1
                        yield item
                finally:
                    span.set_attribute(PREFIX + "checkpoint_count", count)
                    span.end()

        else:

            async def listed(self, config, *args, _m=method, **kwargs) -> AsyncIterator:
                if not recording():
                    async for item in _m(self, config, *args, **kwargs):
                        yield item
                    return
                span = tracer.start_span(
                    PREFIX + "saver list", attributes=_read_attributes(self, config)
                )
                count = 0
                try:
                    async for item in _m(self, config, *args, **kwargs):
                        count += 1
                        yield item
                finally:
                    span.set_attribute(PREFIX + "checkpoint_count", count)
                    span.end()

        listed._traced = True
        setattr(cls, name, functools.wraps(method)(listed))


@contextmanager
def _span(name: str, attributes: dict[str, Any]):
    with tracer.start_as_current_span(name, attributes=attributes) as span:
        yield span


def span(name: str, **attributes: Any):
    """A span named ``checkpoints.<name>`` (a no-op context yielding None when not
    installed or not recording); attributes are given without the prefix."""
    if tracer is None or not recording():
        return nullcontext()
    return _span(PREFIX + name, {PREFIX + k: v for k, v in attributes.items()})


def set_attributes(current, **attributes: Any) -> None:
    """Add attributes to a span from `span` (nothing when tracing is off)."""
    if current is not None:
        for key, value in attributes.items():
            current.set_attribute(PREFIX + key, value)
