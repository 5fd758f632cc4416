"""The admin's HTML for stored values: collapsible <details> blocks of readable JSON.

The data comes from :mod:`checkpoints.codec.render`, the renderer the API uses too;
``readable``, ``pretty`` and ``preview`` are re-exported from there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from checkpoints.codec.render import PREVIEW_CHARS, pretty, preview, readable

__all__ = [
    "PREVIEW_CHARS",
    "collapsible",
    "collapsible_map",
    "json_block",
    "pretty",
    "preview",
    "readable",
]


def json_block(value: Any) -> SafeString:
    """``value`` as indented JSON in a <pre>, escaped."""
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
