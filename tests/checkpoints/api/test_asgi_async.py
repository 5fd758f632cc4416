"""The savers' async methods from an ASGI view: real async, nothing blocks the event loop."""

from __future__ import annotations

import asyncio

import pytest
from django.http import JsonResponse
from django.test import AsyncClient
from django.urls import include, path

from tests.store_helpers import put_chain

SAVERS: dict = {}


async def latest(request, thread_id):
    saver = SAVERS["saver"]
    found = await saver.aget_tuple({"configurable": {"thread_id": thread_id}})
    listed = [
        t.config["configurable"]["checkpoint_id"]
        async for t in saver.alist({"configurable": {"thread_id": thread_id}}, limit=2)
    ]
    return JsonResponse(
        {"values": found.checkpoint["channel_values"] if found else None, "listed": listed}
    )


# The store service's routes too: the remote saver's calls reach the live service, which
# serves this URLconf while the test runs.
urlpatterns = [
    path("latest/<str:thread_id>/", latest),
    path("store/v1/", include("checkpoints.store_service.urls")),
]


@pytest.mark.urls(__name__)
async def test_async_view_reads_through_the_saver(store):
    SAVERS["saver"] = store
    config = await asyncio.to_thread(put_chain, store, "asgi-thread", {"n": 3}, steps=3)
    response = await AsyncClient().get("/latest/asgi-thread/")
    assert response.status_code == 200
    body = response.json()
    assert body["values"] == {"n": 3}
    assert body["listed"][0] == config["configurable"]["checkpoint_id"]
    assert len(body["listed"]) == 2


async def test_async_calls_leave_the_event_loop_free(store):
    """While ten saver calls run, a ticker on the same loop keeps ticking."""
    await asyncio.to_thread(put_chain, store, "busy-loop", {"n": 1})
    ticks = 0
    stop = asyncio.Event()

    async def ticker():
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            await asyncio.sleep(0)

    async def calls():
        for _ in range(10):
            await store.aget_tuple({"configurable": {"thread_id": "busy-loop"}})

    task = asyncio.create_task(ticker())
    try:
        # A hang guard, not a speed check: a saver that deadlocked the loop fails here with
        # TimeoutError instead of stalling the run.
        await asyncio.wait_for(calls(), timeout=30)
    finally:
        stop.set()
        await task
    # A saver that blocked the loop would let the ticker run at most once per call.
    if store.provider in ("sqlite", "postgres", "redis"):
        assert ticks > 10
