"""Render stored values for the admin: readable JSON in collapsible <details> blocks."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from checkpoints.codec import FaithfulJSONCodec
from checkpoints.errors import CheckpointCodecError

_codec = FaithfulJSONCodec(compress_bytes=None)
PREVIEW_CHARS = 80


def readable(value: Any) -> Any:
    """``value`` as JSON data: the faithful codec's form, else a repr for what it refuses."""
    try:
        return _compact(json.loads(_codec.dumps(value)))
    except CheckpointCodecError:
        pass
    if isinstance(value, Mapping):
        return {str(k): readable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [readable(v) for v in value]
    return repr(value)


def _compact(data: Any) -> Any:
    """Shorten LangChain envelopes to their class name and fields: what a reader wants."""
    if isinstance(data, list):
        return [_compact(v) for v in data]
    if not isinstance(data, dict):
        return data
    if data.get("$type") == "lc" and isinstance(data.get("id"), list) and data["id"]:
        fields = data.get("kwargs") if isinstance(data.get("kwargs"), dict) else {}
        # Empty lists and dicts (no tool calls, no extra kwargs) are noise on a message.
        kept = {k: _compact(v) for k, v in fields.items() if v not in ([], {})}
        return {"$type": str(data["id"][-1]), **kept}
    return {k: _compact(v) for k, v in data.items()}


def pretty(value: Any) -> str:
    """Indented JSON text of ``value``."""
    return json.dumps(readable(value), indent=2, ensure_ascii=False, sort_keys=False)


def preview(value: Any) -> str:
    """A one-line hint of what ``value`` holds, for a <summary>."""
    if isinstance(value, (list, tuple)):
        return f"list of {len(value)} item(s)"
    if isinstance(value, Mapping):
        return f"object with {len(value)} key(s)"
    text = json.dumps(readable(value), ensure_ascii=False)
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"


def json_block(value: Any) -> SafeString:
    return format_html('<pre class="cs-json">{}</pre>', pretty(value))


def collapsible(label: str, value: Any, *, open: bool = False) -> SafeString:
    """One <details> element: the label and a preview, the indented JSON inside."""
    return format_html(
        '<details class="cs-value"{}><summary><strong>{}</strong> '
        '<span class="cs-hint">{}</span></summary>{}</details>',
        mark_safe(" open") if open else "",
        label,
        preview(value),
        json_block(value),
    )


def collapsible_map(values: Mapping[str, Any], *, empty: str = "(none)") -> SafeString:
    """One <details> per key of ``values``, in key order."""
    if not values:
        return format_html("<em>{}</em>", empty)
    return format_html_join(
        "", "{}", ((collapsible(str(k), values[k]),) for k in sorted(values, key=str))
    )
