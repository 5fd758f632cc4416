"""The top of a thread's page: where the thread stands now, and what was said last."""

from __future__ import annotations

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from checkpoints.admin import queries
from checkpoints.admin.base import checkpoint_change_url
from checkpoints.admin.display import is_internal, transcript, unreadable_card, when
from checkpoints.admin.store_choice import store_alias, store_saver
from checkpoints.admin.value_cut import cut
from checkpoints.codec.render import is_message_list, words
from checkpoints.errors import CheckpointStoreError

# The last messages the thread page opens with; the head checkpoint's page pages the rest.
LAST_MESSAGES = 5
# A channel's value in words on the thread page is cut here; its checkpoint page has it all.
VALUE_CHARS = 200


def _short(text: str) -> str:
    return text if len(text) <= VALUE_CHARS else text[: VALUE_CHARS - 1] + "…"


def current_state(thread_pk, branch_at: str | None = None) -> SafeString | str:
    """The head checkpoint of the thread's root namespace (or, when the branch switcher shows
    another branch, that branch's head ``branch_at``): its place, the last messages of each
    message channel, and the graph's other channels in words."""
    if not str(thread_pk).isdigit():
        return ""
    thread = queries.thread_by_pk(alias=store_alias(), pk=int(thread_pk))
    if thread is None:
        return ""
    thread_head = queries.head_row(alias=store_alias(), thread_id=thread.thread_id)
    if thread_head is None:
        return format_html(
            '<div class="cs-card cs-current"><h2>Current state</h2><p>{}</p></div>',
            "No checkpoint yet.",
        )
    shown = (
        queries.checkpoint_row(
            alias=store_alias(), thread_id=thread.thread_id, checkpoint_id=branch_at
        )
        if branch_at
        else None
    )
    head_row = shown or thread_head
    on_branch = head_row.pk != thread_head.pk
    try:
        head = store_saver().get_tuple(
            {
                "configurable": {
                    "thread_id": thread.thread_id,
                    "checkpoint_ns": "",
                    "checkpoint_id": head_row.checkpoint_id,
                }
            }
        )
    except CheckpointStoreError as exc:
        return format_html(
            '<div class="cs-card cs-current"><h2>Current state</h2>{}</div>',
            unreadable_card(exc, "Cannot read the head checkpoint"),
        )
    values = (head.checkpoint.get("channel_values") or {}) if head is not None else {}
    link = checkpoint_change_url(head_row.pk)
    said = []
    for name in sorted(values, key=str):
        value = values[name]
        if is_internal(str(name)) or not is_message_list(value):
            continue
        last = list(value)[-LAST_MESSAGES:]
        said.append(
            format_html(
                '<h3 class="cs-current-channel">{} · the last {} of {} '
                '<a href="{}">(all)</a></h3>{}',
                name,
                len(last),
                len(value),
                link,
                transcript(last),
            )
        )
    others = [
        # Words of a cut: a 100,000-item list is not joined to show its first 200 characters.
        (str(name), _short(words(cut(values[name], VALUE_CHARS * 2)[0])) or "(empty)")
        for name in sorted(values, key=str)
        if not is_internal(str(name)) and not is_message_list(values[name])
    ]
    state = (
        format_html(
            '<table class="cs-table cs-current-values"><tbody>{}</tbody></table>',
            format_html_join("", "<tr><th>{}</th><td>{}</td></tr>", others),
        )
        if others
        else ""
    )
    title = (
        format_html(
            'State of the shown branch <span class="cs-muted">(the thread\'s head is '
            '<a href="{}">{}</a>)</span>',
            checkpoint_change_url(thread_head.pk),
            thread_head.checkpoint_id,
        )
        if on_branch
        else "Current state"
    )
    return format_html(
        '<div class="cs-card cs-current"><h2>{}</h2>'
        '<p class="cs-muted">head checkpoint <a href="{}">{}</a> · step {} · {} · written {}</p>'
        "{}{}</div>",
        title,
        link,
        head_row.checkpoint_id,
        head_row.step if head_row.step is not None else "—",
        head_row.source or "—",
        when(head_row.created_at),
        format_html_join("", "{}", ((s,) for s in said)),
        state,
    )
