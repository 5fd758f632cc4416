"""The admin's HTML for stored values: collapsible <details> blocks of readable JSON.

The data comes from :mod:`checkpoints.codec.render`, the renderer the API uses too;
``readable``, ``pretty`` and ``preview`` are re-exported from there. Every value is shown
through :mod:`checkpoints.admin.value_cut`: one over the preview size is cut, says so, and
links to its download where the page knows one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from itertools import islice
from typing import Any

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from checkpoints.admin.prose import markdown_html
from checkpoints.admin.value_cut import Preview, cut, cut_text, json_preview, text_preview
from checkpoints.codec.render import (
    MESSAGES_BEFORE,
    PREVIEW_CHARS,
    MessagePage,
    content_text,
    error_words,
    is_message,
    is_message_list,
    message_page,
    messages_before,
    moment_text,
    pretty,
    preview,
    prompt_key,
    readable,
    words,
)
from checkpoints.errors import CheckpointEncryptionError, CheckpointStoreError

__all__ = [
    "PREVIEW_CHARS",
    "Paging",
    "is_message",
    "page_nav",
    "collapsible",
    "collapsible_map",
    "json_block",
    "pretty",
    "preview",
    "readable",
    "when",
]

# The console's one date format (see render.MOMENT_FORMAT).
when = moment_text


def cut_note(shown: Preview, download: str = "") -> SafeString:
    """What a cut preview leaves out, and where the whole value is."""
    if not shown.cut:
        return mark_safe("")
    whole = (
        format_html(
            '<a class="cs-download" href="{}" download>download it whole (JSON)</a>', download
        )
        if download
        else "its checkpoint's page downloads it whole"
    )
    shows = (
        format_html("the first {} of it, cut where it says “…”", byte_size(shown.limit))
        if shown.limit
        else "none of it, as this page has shown all the values it may"
    )
    return format_html(
        '<p class="cs-cut">Too large to show here whole (CHECKPOINTS["ADMIN_VALUE_PREVIEW_BYTES"]'
        "): {}; {}.</p>",
        shows,
        whole,
    )


def json_block(value: Any, *, download: str = "") -> SafeString:
    """``value`` as indented JSON in a <pre>, escaped; over the preview size, its start."""
    shown = json_preview(value)
    return format_html('{}<pre class="cs-json">{}</pre>', cut_note(shown, download), shown.text)


def hint(value: Any) -> str:
    """`preview` of ``value``, made from no more of it than the hint shows."""
    if isinstance(value, (list, tuple, Mapping)):
        return preview(value)
    return preview(cut(value, PREVIEW_CHARS * 2)[0])


def collapsible(label: str, value: Any, *, open: bool = False, download: str = "") -> SafeString:
    """One <details> element: the label and a preview, the indented JSON inside."""
    return format_html(
        '<details class="cs-value"{}><summary><strong>{}</strong> '
        '<span class="cs-hint">{}</span></summary>{}</details>',
        mark_safe(" open") if open else "",
        label,
        hint(value),
        json_block(value, download=download),
    )


def collapsible_map(values: Mapping[str, Any], *, empty: str = "(none)") -> SafeString:
    """One <details> per key of ``values``, in key order."""
    if not values:
        return format_html("<em>{}</em>", empty)
    return format_html_join(
        "", "{}", ((collapsible(str(k), values[k]),) for k in sorted(values, key=str))
    )


# -- a checkpoint's state: a transcript for messages, internals behind a toggle -------------
INTERNAL_PREFIXES = ("branch:", "__pregel", "start:", "join:")
INTERNAL_NAMES = frozenset({"__start__", "__end__"})


def is_internal(channel: str) -> bool:
    """LangGraph's own bookkeeping channels, not the graph's state."""
    return channel in INTERNAL_NAMES or channel.startswith(INTERNAL_PREFIXES)


def page_nav(page: MessagePage, query: Mapping[str, Any] | None = None) -> SafeString:
    """Which messages a page shows of how many, with links to the older and newer pages.

    ``query`` is the request's (a QueryDict): the links keep its other parameters, such as
    the chosen store.
    """

    def link(before: int) -> str:
        params = query.copy() if query is not None else None
        if params is None:
            return f"?{MESSAGES_BEFORE}={before}"
        params[MESSAGES_BEFORE] = str(before)
        return f"?{params.urlencode()}"

    older = (
        format_html(' · <a class="cs-msgs-older" href="{}">← older messages</a>', link(page.older))
        if page.older is not None
        else ""
    )
    newer = (
        format_html(' · <a class="cs-msgs-newer" href="{}">newer messages →</a>', link(page.newer))
        if page.newer is not None
        else ""
    )
    return format_html(
        '<p class="cs-page">messages {}–{} of {}{}{}</p>',
        page.start + 1 if page.items else page.start,
        page.end,
        page.total,
        older,
        newer,
    )


def _said(content: Any) -> SafeString:
    """A message's content as the transcript shows it: its text, Markdown rendered safely."""
    if isinstance(content, (str, list, tuple)):
        text, was_cut = text_preview(content, content_text)
        said = markdown_html(text)
        if was_cut:
            return format_html('{}<p class="cs-cut">{}</p>', said, _CUT_MESSAGE)
        return said
    return json_block(content)


# A message too long for the page: the channel's JSON (or its download) holds it whole.
_CUT_MESSAGE = "Too long to show here whole: its start, cut where it says “…”."


def transcript(messages: list[Any]) -> SafeString:
    """Messages as a conversation: who said what, and the tools the model called."""
    rows = []
    for message in messages:
        calls = getattr(message, "tool_calls", None) or []
        call_text = "; ".join(
            f"{call.get('name', '?')}({json_preview(call.get('args', {})).text})"
            for call in calls
            if isinstance(call, Mapping)
        )
        name = getattr(message, "name", None) or ""
        who = message.type + (f" · {name}" if name else "")
        rows.append((who, _said(message.content), call_text))
    return format_html(
        '<table class="cs-table cs-transcript"><tbody>{}</tbody></table>',
        format_html_join(
            "",
            '<tr><th class="cs-role">{}</th><td><div class="cs-said">{}</div>{}</td></tr>',
            (
                (
                    who,
                    said,
                    format_html('<div class="cs-muted">tool calls: {}</div>', calls)
                    if calls
                    else "",
                )
                for who, said, calls in rows
            ),
        ),
    )


# -- interrupts and errors, said in words ----------------------------------------------------
def _asked(question: Any) -> SafeString:
    """What one interrupt asks: its question (Markdown, safely), then its other fields."""
    if isinstance(question, Mapping) and (lead := prompt_key(question)) is not None:
        rest = [(str(k), words(v)) for k, v in question.items() if k != lead]
        return format_html(
            "{}{}",
            markdown_html(str(question[lead])),
            format_html_join(
                "", '<div class="cs-muted cs-ask-field">{}: {}</div>', (r for r in rest if r[1])
            ),
        )
    if isinstance(question, Mapping):
        return format_html_join(
            "",
            '<div class="cs-ask-field">{}: {}</div>',
            ((str(k), words(v)) for k, v in question.items()),
        )
    if is_message(question):
        return _said(question.content)
    return markdown_html(words(question))


def interrupt_view(value: Any, node: str = "") -> SafeString:
    """An interrupt write as the transcript shows a message: the node that asks, and what
    it asks in words. Not its stored form: an Interrupt's envelope and id tell an operator
    nothing the words do not (the checkpoint's metadata and the API keep them)."""
    value = cut(value)[0]
    interrupts = value if isinstance(value, (list, tuple)) else [value]
    who = f"interrupt · {node}" if node else "interrupt"
    rows = format_html_join(
        "",
        '<tr><th class="cs-role">{}</th><td><div class="cs-said cs-question">{}</div></td></tr>',
        ((who, _asked(getattr(item, "value", item))) for item in interrupts),
    )
    return format_html(
        '<table class="cs-table cs-transcript cs-interrupt"><tbody>{}</tbody></table>', rows
    )


def error_text(value: Any, node: str = "") -> str:
    """An error write in one line: ``ValueError: the tool timed out (in node explode)``."""
    said = str(error_words(value))
    return f"{said} (in node {node})" if node else said


def error_view(value: Any, node: str = "") -> SafeString:
    """An error write: the exception's type, its message and the node that raised it."""
    found = error_words(value)
    return format_html(
        '<div class="cs-card cs-error"><strong class="cs-error-type">{}</strong> '
        '<span class="cs-error-message">{}</span>{}</div>',
        found.type or "error",
        cut_text(found.message),
        format_html(' <span class="cs-muted">in node <code>{}</code></span>', node) if node else "",
    )


def byte_size(size: int | None) -> str:
    if size is None:
        return ""
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KiB"
    return f"{size / (1024 * 1024):.1f} MiB"


def size_text(size: int | None) -> str:
    return f"{byte_size(size)} stored" if size is not None else ""


def _channel(
    name: str, value: Any, size: int | None, paging: Paging, download: str = ""
) -> SafeString:
    if is_message_list(value):
        page = message_page(value, paging.before)
        return format_html(
            '<details class="cs-value" open><summary><strong>{}</strong> '
            '<span class="cs-hint">{} · {} messages{}</span></summary>{}{}'
            '<details class="cs-raw"><summary class="cs-hint">as stored (JSON)</summary>{}'
            "</details></details>",
            name,
            preview(value),
            len(value),
            format_html(" · {}", size_text(size)) if size is not None else "",
            page_nav(page, paging.query),
            transcript(page.items),
            json_block(page.items, download=download),
        )
    return format_html(
        '<details class="cs-value"><summary><strong>{}</strong> '
        '<span class="cs-hint">{} {}</span></summary>{}</details>',
        name,
        hint(value),
        format_html("· {}", size_text(size)) if size is not None else "",
        json_block(value, download=download),
    )


@dataclass(frozen=True)
class Paging:
    """Where a page's message lists start (``messages_before``) and the query it came with."""

    before: int | None = None
    query: Mapping[str, Any] | None = None

    @classmethod
    def of(cls, request) -> Paging:
        """The request's paging; a bad ``messages_before`` raises InvalidCheckpointInput."""
        return cls(messages_before(request.GET.get(MESSAGES_BEFORE)), request.GET)


def state_view(
    values: Mapping[str, Any],
    sizes: Mapping[str, int] | None = None,
    paging: Paging | None = None,
    download: Callable[[str], str] | None = None,
) -> SafeString:
    """The graph's channels first (messages as a transcript, a page of them), LangGraph's
    internals folded; ``download(channel)`` is the URL of a channel's whole value."""
    sizes = sizes or {}
    paging = paging or Paging()
    download = download or (lambda name: "")
    names = sorted(values, key=str)
    own = [n for n in names if not is_internal(str(n))]
    internal = [n for n in names if is_internal(str(n))]
    if not names:
        return format_html("<em>{}</em>", "(no values)")
    body = format_html_join(
        "",
        "{}",
        ((_channel(str(n), values[n], sizes.get(n), paging, download(n)),) for n in own),
    )
    if internal:
        body = format_html(
            '{}<details class="cs-internals"><summary>LangGraph internals ({} channels: {})'
            "</summary>{}</details>",
            body,
            len(internal),
            ", ".join(str(n) for n in internal),
            format_html_join(
                "",
                "{}",
                (
                    (_channel(str(n), values[n], sizes.get(n), paging, download(n)),)
                    for n in internal
                ),
            ),
        )
    return body


# -- a diff, shown: messages as messages, everything else as indented JSON -------------------
# Keys of a changed dict shown of each kind (added, removed, changed); the rest are counted.
KEYS_SHOWN = 100


def value_html(value: Any) -> SafeString:
    """One value of a diff: a message (or a list of them) as the transcript, else JSON."""
    if is_message(value):
        return transcript([value])
    if is_message_list(value):
        return transcript(list(value))
    return json_block(value)


def _items_html(items: list) -> SafeString:
    if is_message_list(items):
        return transcript(list(items))
    return format_html_join("", '<div class="cs-item">{}</div>', ((value_html(v),) for v in items))


def shown_change(change, paging: Paging) -> dict:
    """What the diff page shows of one ChannelChange, as HTML, and nothing more.

    A list change shows the items added and removed, a page at a time; a message list that
    is new or cleared as a whole shows a page of it. A 10,000-message channel that gained one
    message is then one transcript row, not two copies of the list.
    """
    shown = {
        "channel": change.channel,
        "kind": change.kind,
        "summary": change.summary,
        "navs": [],
    }

    def page(items):
        cut = message_page(items, paging.before)
        if cut.start > 0 or cut.end < cut.total:
            shown["navs"].append(page_nav(cut, paging.query))
        return cut.items

    if change.kind == "list":
        # One block per side ("+85 items"), messages as one transcript: an append-only
        # list of 85 messages made 85 disclosure lines.
        shown["appended_count"], shown["dropped_count"] = len(change.appended), len(change.dropped)
        shown["appended"] = _items_html(page(change.appended))
        shown["dropped"] = _items_html(page(change.dropped))
    elif change.kind == "dict":
        # A dict whose 50,000 keys all changed made a 5 MB page: the first keys of each kind.
        def first(pairs: Mapping) -> list:
            shown["more_keys"] += max(0, len(pairs) - KEYS_SHOWN)
            return list(islice(pairs.items(), KEYS_SHOWN))

        shown["more_keys"] = 0
        shown["added_keys"] = {k: value_html(v) for k, v in first(change.added_keys)}
        shown["removed_keys"] = {k: value_html(v) for k, v in first(change.removed_keys)}
        shown["changed_keys"] = {
            k: (value_html(a), value_html(b)) for k, (a, b) in first(change.changed_keys)
        }
    else:
        for side in ("before", "after"):
            value = getattr(change, side)
            shown[side] = value_html(page(value) if is_message_list(value) else value)
    return shown


# -- a checkpoint that does not read, in words ------------------------------------------------
# What an operator can do about it.
SEALED_TODO = (
    "if the encryption keys were changed, put back the key this value was sealed under "
    '(any entry of CHECKPOINTS["ENCRYPTION_KEYS"] opens it; the first seals new values). '
    "If the keys are right, the stored bytes were altered or moved from another place: "
    "restore the row from a backup, or continue the thread from an earlier checkpoint that "
    "opens (the thread's history lists them)."
)
UNREADABLE_TODO = (
    "restore the row from a backup, or continue the thread from an earlier checkpoint that "
    "reads (the thread's history lists them)."
)


def unreadable_card(error: CheckpointStoreError, title: str) -> SafeString:
    """A read failure said for an operator: which part, that it did not open, what to do."""
    sealed = isinstance(error, CheckpointEncryptionError)
    part = (getattr(error, "where", None) or {}).get("part") or "a stored value"
    return format_html(
        '<div class="cs-card cs-unreadable"><strong>{}</strong>'
        '<p class="cs-unreadable-part">{} <code>{}</code> {}.</p>'
        "<p><code>{}</code>: {}</p>"
        '<p class="cs-unreadable-todo"><strong>What you can do:</strong> {}</p>'
        '<p class="cs-muted">Nothing was changed: the rows are left as they are, and what '
        "this page shows besides is still accurate.</p></div>",
        title,
        "The sealed" if sealed else "The stored",
        part,
        "failed to open" if sealed else "cannot be read",
        error.code,
        error.message,
        SEALED_TODO if sealed else UNREADABLE_TODO,
    )
