"""Bounds on what a request may carry, checked before anything deeper reads it.

Python's JSON decoder recurses once per nesting level, so a deeply nested body or query
value would end in ``RecursionError`` (a 500) before any serializer saw it; NaN and
Infinity are not JSON and no store can filter or keep them faithfully. Both are refused
here with a 400 that names the parameter.
"""

from __future__ import annotations

import json
from typing import Any

from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication
from rest_framework.parsers import JSONParser

from checkpoints.errors import InvalidCheckpointInput
from checkpoints.lockout import limit_token_guessing

MAX_JSON_DEPTH = 64


def json_depth(text: str) -> int:
    """The deepest nesting of arrays and objects in ``text``, without recursing."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


class _NonFinite(ValueError):
    pass


def _refuse_constant(name: str):
    raise _NonFinite(f"{name} is not a JSON number (NaN and Infinity are refused)")


def _check_depth(text: str, field: str) -> None:
    depth = json_depth(text)
    if depth > MAX_JSON_DEPTH:
        raise InvalidCheckpointInput(
            f"{field} nests {depth} levels of arrays or objects; at most {MAX_JSON_DEPTH} "
            "are accepted",
            field=field,
        )


def load_json(text: str, *, field: str, or_text: bool = False) -> Any:
    """Parse ``text`` as strict JSON; raises ``InvalidCheckpointInput`` naming ``field``.

    With ``or_text``, text that is not JSON is returned as it is (the limits still apply).
    """
    _check_depth(text, field)
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except _NonFinite as exc:
        raise InvalidCheckpointInput(f"{field}: {exc}", field=field) from exc
    except ValueError as exc:
        if or_text:
            return text
        raise InvalidCheckpointInput(f"{field} is not valid JSON: {exc}", field=field) from exc


def load_json_or_text(text: str, *, field: str) -> Any:
    """``text`` as JSON when it parses, else the string itself; limits apply either way."""
    return load_json(text, field=field, or_text=True)


class BoundedJSONParser(JSONParser):
    """DRF's JSON parser with the depth bound and without NaN/Infinity."""

    def parse(self, stream, media_type=None, parser_context=None):
        encoding = (parser_context or {}).get("encoding", "utf-8")
        raw = stream.read() if stream is not None else b""
        try:
            text = raw.decode(encoding)
        except (UnicodeDecodeError, LookupError) as exc:
            raise exceptions.ParseError(f"the request body is not {encoding} text: {exc}") from exc
        try:
            return load_json(text, field="request body")
        except InvalidCheckpointInput as exc:
            raise exceptions.ParseError(exc.message) from exc


class StrictTokenAuthentication(TokenAuthentication):
    """Token auth that refuses control characters before the key reaches the database
    (PostgreSQL rejects a NUL in a query parameter with an error, not a miss)."""

    @limit_token_guessing
    def authenticate(self, request):
        return super().authenticate(request)

    def authenticate_credentials(self, key):
        if not key.isprintable() or not key.isascii():
            raise exceptions.AuthenticationFailed(
                "Invalid token: the key must be printable ASCII characters."
            )
        return super().authenticate_credentials(key)
