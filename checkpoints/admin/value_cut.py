"""Values over the admin's preview size, cut to a preview before they are rendered.

Rendering a value (``pretty``) copies it several times over: a 60 MiB string, stored as a
3 KiB zstd frame, cost a page 12 s and 600 MB. A page therefore renders a *cut* of each
value: the same types and shape, its strings and bytes shortened and its collections cut
after the items that fit, so what it shows reads like the value itself. The cut walks no
more of the value than its preview holds, whatever the value's size. The whole value is a
download of its own (`checkpoints.admin.views.ValueDownloadView`).

The size is ``CHECKPOINTS["ADMIN_VALUE_PREVIEW_BYTES"]`` (characters of indented JSON,
default 256 KiB); None shows every value whole. One page (`page_previews`) shows at most
``PAGE_PREVIEWS`` times that in all: a checkpoint of a hundred values just under the size
would otherwise still make a page of tens of megabytes; past it, values show their link.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from langgraph.types import Send
from pydantic import BaseModel

from checkpoints.codec.render import pretty
from checkpoints.conf import store_settings
from checkpoints.errors import CheckpointConfigError

PREVIEW_SETTING = "ADMIN_VALUE_PREVIEW_BYTES"
# Marks where a string, a list or a mapping was cut.
MORE = "…"
# A cut stops descending here (a stored value is at most CODEC_MAX_DEPTH deep).
MAX_DEPTH = 256
# What one page shows of values in all, in previews.
PAGE_PREVIEWS = 8

# Characters the current page may still show (a one-item list, spent in place); None: no bound.
_page_left: ContextVar[list[int] | None] = ContextVar("admin_page_previews", default=None)


def preview_bytes() -> int | None:
    """The preview size in force: the setting, else the default; None for no cut."""
    size = store_settings()[PREVIEW_SETTING]
    if size is not None and (type(size) is not int or size < 1):
        raise CheckpointConfigError(
            f"CHECKPOINTS[{PREVIEW_SETTING!r}] must be a whole number of characters from 1, "
            f"or None to show every value whole; got {size!r}"
        )
    return size


@dataclass(frozen=True)
class Preview:
    """A value's JSON text as a page shows it; ``cut`` when that is not all of it."""

    text: str
    cut: bool
    limit: int | None


@contextmanager
def page_previews() -> Iterator[None]:
    """Previews made inside share one page's allowance (``PAGE_PREVIEWS`` previews)."""
    limit = preview_bytes()
    token = _page_left.set(None if limit is None else [PAGE_PREVIEWS * limit])
    try:
        yield
    finally:
        _page_left.reset(token)


def _allowance() -> int | None:
    """What the next preview may hold: the preview size, or less of the page's allowance."""
    limit = preview_bytes()
    left = _page_left.get()
    return limit if limit is None or left is None else min(limit, left[0])


def _spend(size: int) -> None:
    left = _page_left.get()
    if left is not None:
        left[0] = max(0, left[0] - size)


def json_preview(value: Any) -> Preview:
    """The indented JSON of ``value`` (its stored form), cut to what the page may show."""
    limit = _allowance()
    if limit is None:
        return Preview(pretty(value), False, None)
    shown, was_cut = cut(value, limit)
    text = pretty(shown)
    if len(text) > limit:
        text, was_cut = text[:limit] + MORE, True
    _spend(len(text))
    return Preview(text, was_cut, limit)


def text_preview(value: Any, as_text) -> tuple[str, bool]:
    """``as_text`` of a cut of ``value``, cut to what the page may show; whether it was cut."""
    limit = _allowance()
    if limit is None:
        return as_text(value), False
    shown, was_cut = cut(value, limit)
    text = as_text(shown)
    if len(text) > limit:
        text, was_cut = text[:limit] + MORE, True
    _spend(len(text))
    return text, was_cut


def cut_text(text: str, limit: int | None = None) -> str:
    """``text`` up to ``limit`` characters (the preview size by default)."""
    limit = preview_bytes() if limit is None else limit
    return text if limit is None or len(text) <= limit else text[:limit] + MORE


def cut(value: Any, limit: int | None = None) -> tuple[Any, bool]:
    """``value`` cut so its JSON is about ``limit`` characters (the preview size by default);
    whether anything was cut."""
    limit = preview_bytes() if limit is None else limit
    if limit is None:
        return value, False
    walk = _Cut(limit)
    return walk.value(value, 0), walk.was_cut


class _Cut:
    """One cut: characters left, and whether anything was left out."""

    def __init__(self, limit: int) -> None:
        self.left = limit
        self.was_cut = False

    def value(self, v: Any, depth: int) -> Any:
        if depth > MAX_DEPTH:
            self.was_cut = True
            return MORE
        if isinstance(v, str):
            return self._text(v)
        if isinstance(v, (bytes, bytearray, memoryview)):
            return self._bytes(v)
        if v is None or isinstance(v, (bool, int, float)):
            self.left -= 8
            return v
        if isinstance(v, BaseModel):
            return self._model(v, depth)
        if isinstance(v, Send):
            return Send(v.node, self.value(v.arg, depth + 1))
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            return self._dataclass(v, depth)
        if isinstance(v, tuple) and hasattr(v, "_replace") and hasattr(v, "_fields"):
            fields = {f: self.value(getattr(v, f), depth + 1) for f in v._fields}
            return v._replace(**fields)
        if isinstance(v, Mapping):
            return self._mapping(v, depth)
        if isinstance(v, (list, tuple, set, frozenset)):
            return self._items(v, depth)
        # Dates, decimals, enums, UUIDs, exceptions: small, shown as they are.
        self.left -= 32
        return v

    def _text(self, v: str) -> str:
        if not v or len(v) + 2 <= self.left:
            self.left -= len(v) + 2
            return v
        self.was_cut = True
        keep = max(self.left - 2, 0)
        self.left = 0
        return v[:keep] + MORE

    def _bytes(self, v: bytes | bytearray | memoryview) -> Any:
        # Shown as base64: four characters for every three bytes.
        size = len(v) * 4 // 3 + 32
        if size <= self.left:
            self.left -= size
            return v
        self.was_cut = True
        keep = max(self.left - 32, 0) * 3 // 4
        self.left = 0
        return type(v)(bytes(v[:keep])) if not isinstance(v, memoryview) else bytes(v[:keep])

    def _items(self, v: list | tuple | set | frozenset, depth: int) -> Any:
        kept = []
        for item in v:
            if self.left <= 0:
                self.was_cut = True
                break
            kept.append(self.value(item, depth + 1))
        if isinstance(v, (set, frozenset)):
            try:
                return type(v)(kept)
            except TypeError:  # an item cut to an unhashable shape: shown as a list
                return kept
        if isinstance(v, tuple):
            return tuple(kept)
        if len(kept) < len(v):
            kept.append(MORE)
        return kept

    def _mapping(self, v: Mapping, depth: int) -> dict:
        kept = {}
        for key, item in v.items():
            if self.left <= 0:
                self.was_cut = True
                kept.setdefault(MORE, MORE)
                break
            self.left -= len(key) + 4 if isinstance(key, str) else 16
            kept[key] = self.value(item, depth + 1)
        return kept

    def _model(self, v: BaseModel, depth: int) -> BaseModel:
        # Every field stays (a model without one is not that model): fields past the
        # preview are cut to nothing of their own type.
        update = {
            name: self.value(getattr(v, name, None), depth + 1)
            for name in type(v).model_fields
            if name in v.__dict__
        }
        return v.model_copy(update=update)

    def _dataclass(self, v: Any, depth: int) -> Any:
        fields = {f.name: self.value(getattr(v, f.name), depth + 1) for f in dataclasses.fields(v)}
        try:
            shown = copy.copy(v)
            for name, item in fields.items():
                object.__setattr__(shown, name, item)
        except Exception:  # noqa: BLE001 - a class that refuses a copy: its fields stand in
            return fields
        return shown
