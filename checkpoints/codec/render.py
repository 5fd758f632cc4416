"""Show stored values to people and clients: the one renderer behind the admin and the API.

A value goes through the faithful JSON codec first, so what is shown is what the store would
write. It is then shaped for one of two readers:

- ``plain`` (the API, :func:`to_plain`): envelopes are made plain where a plain JSON form
  says the same thing (tuples and sets as lists, datetimes as ISO-8601 strings, decimals,
  UUIDs and big integers as strings, enums as their value, models and dataclasses as their
  fields, LangChain objects as LangChain's own ``{"lc": 1, "type": "constructor", ...}``
  form). Envelopes with no plain form (bytes, timedeltas, time zones, exceptions, ``Send``)
  are kept as they are.
- ``stored`` (the admin, :func:`readable`): the envelopes as stored, so an operator sees the
  real types, with LangChain objects shortened to their class name and non-empty fields.

A value the codec refuses is rendered part by part (objects already in memory are shown
field by field: that imports nothing), so one odd value never fails a page or a response;
a part with no JSON form at all is an ``unrenderable`` envelope naming why (plain) or its
``repr()`` (stored).
"""

from __future__ import annotations

import ast
import dataclasses
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from enum import Enum
from typing import Any

from pydantic import BaseModel

from checkpoints.codec.envelope import ENVELOPE_KEY
from checkpoints.codec.exception import CheckpointedException
from checkpoints.codec.json import FaithfulJSONCodec
from checkpoints.conf import setting
from checkpoints.errors import CheckpointCodecError, InvalidCheckpointInput

__all__ = [
    "MESSAGES_BEFORE",
    "ErrorWords",
    "PREVIEW_CHARS",
    "MessagePage",
    "is_message",
    "is_message_list",
    "message_page",
    "messages_before",
    "paged_values",
    "plain_mapping",
    "pretty",
    "preview",
    "readable",
    "render",
    "render_mapping",
    "to_plain",
    "content_text",
    "error_words",
    "moment_text",
    "prompt_key",
    "words",
]

PREVIEW_CHARS = 80

_codec = FaithfulJSONCodec(compress_bytes=None)


def render(value: Any, *, plain: bool = True, path: str = "value") -> Any:
    """``value`` as JSON data in the plain or the stored form; never raises for a value."""
    try:
        encoded = json.loads(_codec.dumps(value, path=path))
    except CheckpointCodecError as exc:
        return _piecewise(value, path, exc, plain)
    return _shape(encoded, plain)


def render_mapping(values: Mapping[str, Any] | None, *, plain: bool, path: str) -> dict[str, Any]:
    """Each entry rendered on its own, so one bad entry spoils only itself."""
    return {str(k): render(v, plain=plain, path=f"{path}.{k}") for k, v in (values or {}).items()}


def to_plain(value: Any, *, path: str = "value") -> Any:
    """``value`` as plain JSON data for API clients."""
    return render(value, plain=True, path=path)


def plain_mapping(values: Mapping[str, Any] | None, *, path: str) -> dict[str, Any]:
    """Each entry as plain JSON data, rendered on its own."""
    return render_mapping(values, plain=True, path=path)


def readable(value: Any) -> Any:
    """``value`` as JSON data in the stored form, for the admin."""
    return render(value, plain=False)


def pretty(value: Any) -> str:
    """Indented JSON text of ``value`` in the stored form."""
    return json.dumps(readable(value), indent=2, ensure_ascii=False, sort_keys=False)


def preview(value: Any) -> str:
    """A one-line hint of what ``value`` holds, at most ``PREVIEW_CHARS`` long."""
    if isinstance(value, (list, tuple)):
        return f"list of {len(value)} item(s)"
    if isinstance(value, Mapping):
        return f"object with {len(value)} key(s)"
    text = json.dumps(readable(value), ensure_ascii=False)
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"


# --- message lists, shown a page at a time ----------------------------------------------
# A 10,000-message list rendered whole is seconds of work and megabytes of page: the admin and
# the API show the last MESSAGES_PAGE_SIZE messages and page back with this parameter.
MESSAGES_BEFORE = "messages_before"
MESSAGE_TYPES = frozenset({"human", "ai", "tool", "system", "function", "chat", "remove"})


def is_message(item: Any) -> bool:
    """A LangChain message (or anything shaped like one: a ``type`` and a ``content``)."""
    kind = getattr(item, "type", None)
    return isinstance(kind, str) and kind in MESSAGE_TYPES and hasattr(item, "content")


def is_message_list(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and bool(value) and all(map(is_message, value))


@dataclass(frozen=True)
class MessagePage:
    """Items ``start`` to ``end`` (exclusive) of a list of ``total``."""

    items: list[Any]
    total: int
    start: int

    @property
    def end(self) -> int:
        return self.start + len(self.items)

    @property
    def older(self) -> int | None:
        """The ``messages_before`` of the page before this one; None on the first page."""
        return self.start if self.start > 0 else None

    @property
    def newer(self) -> int | None:
        """The ``messages_before`` of the page after this one; None on the last page."""
        if self.end >= self.total:
            return None
        return min(self.total, self.end + max(len(self.items), 1))

    def as_dict(self) -> dict[str, int | None]:
        return {
            "total": self.total,
            "start": self.start,
            "end": self.end,
            "next_before": self.older,
        }


def message_page(items: Sequence[Any], before: int | None = None, size: int | None = None):
    """The last ``size`` items before position ``before`` (the end when None)."""
    if size is None:
        size = setting("MESSAGES_PAGE_SIZE")
    total = len(items)
    end = total if before is None else max(0, min(before, total))
    start = max(0, end - size)
    return MessagePage(list(items[start:end]), total, start)


def paged_values(
    values: Mapping[str, Any] | None, before: int | None = None, size: int | None = None
) -> tuple[dict[str, Any], dict[str, MessagePage]]:
    """``values`` with each message list cut to its page, and those pages by channel."""
    shown: dict[str, Any] = {}
    pages: dict[str, MessagePage] = {}
    for name, value in (values or {}).items():
        if is_message_list(value):
            pages[name] = message_page(value, before, size)
            shown[name] = pages[name].items
        else:
            shown[name] = value
    return shown, pages


def messages_before(raw: str | None) -> int | None:
    """The ``messages_before`` parameter as given: absent, or a whole number from 0."""
    if raw is None:
        return None
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 18:
        raise InvalidCheckpointInput(
            f"{MESSAGES_BEFORE} must be a whole number from 0 (a message's position), "
            f"got {raw[:100]!r}",
            field=MESSAGES_BEFORE,
        )
    return int(raw)


# --- a value the codec refused -----------------------------------------------------------


def _piecewise(value: Any, path: str, exc: CheckpointCodecError, plain: bool) -> Any:
    """Render a refused value part by part, so only the parts at fault are marked.

    Classes outside CODEC_ALLOWED_MODULES are refused for storage (they could not be read
    back), but showing an object already in memory imports nothing, so its fields are shown.
    """
    if isinstance(value, Enum):
        return render(value.value, plain=plain, path=f"{path}.value")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        return render_mapping(fields, plain=plain, path=path)
    if isinstance(value, BaseModel):
        names = type(value).model_fields
        fields = {k: v for k, v in value.__dict__.items() if k in names}
        return render_mapping(fields, plain=plain, path=path)
    if isinstance(value, tuple) and hasattr(value, "_asdict"):
        return render_mapping(value._asdict(), plain=plain, path=path)
    if isinstance(value, Mapping):
        if all(isinstance(k, str) for k in value) and ENVELOPE_KEY not in value:
            return render_mapping(value, plain=plain, path=path)
        # Keys JSON objects cannot hold keep the codec's pairs form in both readers.
        return {
            ENVELOPE_KEY: "dict",
            "items": [
                [render(k, plain=plain, path=path), render(v, plain=plain, path=path)]
                for k, v in value.items()
            ],
        }
    if isinstance(value, (list, tuple, set, frozenset)):
        return [render(item, plain=plain, path=f"{path}[{i}]") for i, item in enumerate(value)]
    if not plain:
        return _repr(value)
    return {
        ENVELOPE_KEY: "unrenderable",
        "type": f"{type(value).__module__}.{type(value).__qualname__}",
        "reason": exc.message,
    }


def _repr(value: Any) -> str:
    try:
        return repr(value)
    except Exception:  # a broken __repr__ must not break the page showing it
        return f"<{type(value).__module__}.{type(value).__qualname__} object>"


# --- shaping the codec's JSON --------------------------------------------------------------


def _shape(data: Any, plain: bool) -> Any:
    if isinstance(data, list):
        return [_shape(item, plain) for item in data]
    if not isinstance(data, dict):
        return data
    kind = data.get(ENVELOPE_KEY)
    if kind == "lc":
        return _plain_langchain(data) if plain else _short_langchain(data)
    if plain and kind in _PLAIN_FORMS:
        return _PLAIN_FORMS[kind](data)
    return {key: _shape(item, plain) for key, item in data.items()}


def _plain_langchain(env: dict[str, Any]) -> dict[str, Any]:
    return {
        "lc": 1,
        "type": "constructor",
        "id": env.get("id"),
        "kwargs": _shape(env.get("kwargs"), True),
    }


def _short_langchain(env: dict[str, Any]) -> dict[str, Any]:
    ident = env.get("id")
    if not isinstance(ident, list) or not ident:
        return {key: _shape(item, False) for key, item in env.items()}
    fields = env.get("kwargs") if isinstance(env.get("kwargs"), dict) else {}
    # Empty lists and dicts (no tool calls, no extra kwargs) are noise on a message.
    kept = {k: _shape(v, False) for k, v in fields.items() if v not in ([], {})}
    return {ENVELOPE_KEY: str(ident[-1]), **kept}


def _plain_items(env: dict[str, Any]) -> list[Any]:
    return [_shape(item, True) for item in env.get("items", [])]


def _plain_clock(env: dict[str, Any]) -> str:
    return _codec.loads(json.dumps(env)).isoformat()


def _plain_dict(env: dict[str, Any]) -> Any:
    pairs = [(_shape(k, True), _shape(v, True)) for k, v in env.get("items", [])]
    if all(isinstance(k, str) for k, _ in pairs) and not any(k == ENVELOPE_KEY for k, _ in pairs):
        return dict(pairs)
    # Keys JSON objects cannot hold (numbers, tuples, "$type") keep the pairs form.
    return {ENVELOPE_KEY: "dict", "items": [[k, v] for k, v in pairs]}


_PLAIN_FORMS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "tuple": _plain_items,
    "set": _plain_items,
    "frozenset": _plain_items,
    "decimal": lambda env: env.get("v"),
    "uuid": lambda env: env.get("v"),
    "date": lambda env: env.get("v"),
    "int": lambda env: str(int(env["hex"], 16)),
    "datetime": _plain_clock,
    "time": _plain_clock,
    "enum": lambda env: _shape(env.get("value"), True),
    "model": lambda env: _shape(env.get("fields"), True),
    "dataclass": lambda env: _shape(env.get("fields"), True),
    "namedtuple": lambda env: _shape(env.get("fields"), True),
    "dict": _plain_dict,
}


# --- values in words: what an interrupt asks and what an error says --------------------------
# An operator reads these in a status line or beside a transcript; a dict's repr or a
# ``$type: dataclass`` envelope makes them decode Python first.

# The one way the console writes a moment (lists, pages, statuses): to the second, with the
# time zone named.
MOMENT_FORMAT = "%Y-%m-%d %H:%M:%S %Z"
# Keys an interrupt's payload conventionally puts its question under, most telling first.
PROMPT_KEYS = ("question", "prompt", "message", "text", "content", "description", "title")


def moment_text(moment: datetime | None) -> str:
    """``moment`` in the console's one format, in the current time zone; "" for None."""
    if moment is None:
        return ""
    # Imported here: the codec runs without a configured Django (from_conn_string); only
    # the console's words read its time zone.
    from django.utils import timezone

    if timezone.is_aware(moment):
        moment = timezone.localtime(moment)
    return f"{moment:{MOMENT_FORMAT}}".strip()


def content_text(content: Any) -> str:
    """A message's content as text: a string as it is, content blocks' text joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)):
        parts = [
            str(part.get("text", "")) if isinstance(part, Mapping) else words(part)
            for part in content
        ]
        return "\n".join(part for part in parts if part)
    return words(content)


def prompt_key(value: Mapping[str, Any]) -> str | None:
    """The key a mapping asks its question under (see PROMPT_KEYS), or None."""
    return next((k for k in PROMPT_KEYS if isinstance(value.get(k), str) and value[k]), None)


def words(value: Any) -> str:
    """``value`` as text a person reads: a string as it is, a message as its content, an
    interrupt as its value, a mapping as its question and then "key: value" pairs, a list as
    its items; never a repr or a typed envelope."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, datetime):
        return moment_text(value)
    if isinstance(value, date):
        return value.isoformat()
    if is_message(value):
        return content_text(value.content)
    if _is_interrupt(value):
        return words(value.value)
    if isinstance(value, Mapping):
        return _mapping_words(value)
    if isinstance(value, (list, tuple, set, frozenset)):
        return ", ".join(text for text in map(words, value) if text)
    if isinstance(value, BaseException):
        found = error_words(value)
        return f"{found.type}: {found.message}" if found.type else found.message
    plain = render(value, plain=True)
    if isinstance(plain, Mapping) and ENVELOPE_KEY in plain:
        return _envelope_words(plain)
    return words(plain)


def _is_interrupt(value: Any) -> bool:
    # LangGraph's Interrupt (and our readers' stand-ins): a value with an id, nothing more.
    return type(value).__name__ == "Interrupt" and hasattr(value, "value")


def _mapping_words(value: Mapping[str, Any]) -> str:
    if ENVELOPE_KEY in value:
        return _envelope_words(value)
    lead = prompt_key(value)
    rest = "; ".join(
        f"{key}: {text}" for key, item in value.items() if key != lead and (text := words(item))
    )
    if lead is None:
        return rest
    return f"{value[lead]} ({rest})" if rest else str(value[lead])


def _envelope_words(env: Mapping[str, Any]) -> str:
    kind = env.get(ENVELOPE_KEY)
    if kind == "unrenderable":
        return f"(a {env.get('type', 'value')} value that cannot be shown)"
    if kind == "bytes":
        return "(bytes)"
    fields = {k: v for k, v in env.items() if k != ENVELOPE_KEY}
    return f"{kind}: {_mapping_words(fields)}" if fields else str(kind)


@dataclass(frozen=True)
class ErrorWords:
    """A task's error as an operator reads it: the exception's class name and message."""

    type: str
    message: str

    def __str__(self) -> str:
        return f"{self.type}: {self.message}" if self.type else self.message


# LangGraph stores a task's error as the exception's repr(), "ValueError('the tool timed out')".
_ERROR_REPR = re.compile(r"^([A-Za-z_][\w.]*)\((.*)\)$", re.S)
# Longer reprs are shown as they are: parsing them buys nothing an operator needs.
_ERROR_PARSE_CHARS = 10_000


def error_words(value: Any) -> ErrorWords:
    """The class name and message of an error write (an exception, our stored record of
    one, or LangGraph's repr string); the text as it is when it names no class."""
    if isinstance(value, CheckpointedException):
        return ErrorWords(value.id[-1] if value.id else "Exception", value.message)
    if isinstance(value, BaseException):
        return ErrorWords(type(value).__name__, str(value))
    text = (value if isinstance(value, str) else words(value)).strip()
    found = _ERROR_REPR.match(text) if len(text) <= _ERROR_PARSE_CHARS else None
    if found is None:
        return ErrorWords("", text)
    name, inner = found.group(1), found.group(2)
    try:
        # literal_eval evaluates literals only: a repr with anything else stays text.
        args = ast.literal_eval(f"({inner},)") if inner.strip() else ()
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return ErrorWords(name, inner)
    # str() of an exception: its one argument, or the tuple of several.
    message = words(args[0]) if len(args) == 1 else ", ".join(map(words, args))
    return ErrorWords(name, message)
