"""Raw HTTP calls to /langgraph as any client sends them, and the 422 shape they expect."""

from __future__ import annotations

import json

import httpx


def call(lg, who: str, method: str, path: str, body=None, raw: bytes | None = None):
    """``body`` sent as JSON with escapes for what UTF-8 cannot carry (a lone surrogate is
    "\\ud800" on the wire, as any client's JSON encoder sends it)."""
    headers = {"x-api-key": lg.tokens[who]}
    if body is not None and raw is None:
        raw = json.dumps(body).encode()
    if raw is not None:
        headers["Content-Type"] = "application/json"
    return httpx.request(method, f"{lg.url}{path}", content=raw, headers=headers)


def refused(response, field: str, *words: str) -> dict:
    """A 422 in the Platform's shape naming ``field`` (and each of ``words``)."""
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["field"] == field, body
    for word in words:
        assert word in body["detail"], (word, body)
    return body
