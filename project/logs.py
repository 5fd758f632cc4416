"""The service's request log lines: the thread a request acted on, beside django-structlog's
request id and user id (the apps log with the stdlib and know nothing of structlog)."""

from __future__ import annotations


def bind_thread_id(request, log_kwargs, **kwargs) -> None:
    """Add ``thread_id`` to a request's ``request_finished`` or ``request_failed`` line when
    its URL names one (the REST API, the LangGraph API)."""
    match = getattr(request, "resolver_match", None)
    thread_id = match.kwargs.get("thread_id") if match is not None else None
    if thread_id is not None:
        log_kwargs["thread_id"] = str(thread_id)
