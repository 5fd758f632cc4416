"""Say what a rollback or fork leaves behind of the head: messages and channels, counted.

The confirmation pages show this against the head they name in the form (``expected_head``);
the time-travel service refuses the POST when that is no longer the head.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from checkpoints.admin import queries
from checkpoints.admin.display import is_internal, transcript, when
from checkpoints.admin.store_choice import store_alias, store_saver
from checkpoints.codec.render import is_message_list, message_page
from checkpoints.errors import CheckpointStoreError, InvalidCheckpointInput
from checkpoints.graphs import time_travel_for
from checkpoints.models import Checkpoint
from checkpoints.status import node_of
from checkpoints.timetravel.diff import ChannelChange, channel_changes

# The form field that carries the head checkpoint id a confirmation page showed.
SHOWN_HEAD = "expected_head"


@dataclass(frozen=True)
class MessageChannelLoss:
    """A message channel's messages the head holds that the result lacks, and the reverse."""

    channel: str
    discarded: list[Any] = field(default_factory=list)
    restored: list[Any] = field(default_factory=list)

    @cached_property
    def _newest_page(self) -> list[Any]:
        return message_page(self.discarded).items

    @property
    def discarded_shown(self):
        """The newest page of the discarded messages, as a transcript: a long tail of
        turns stays one page of HTML, and the count above it says how many there are."""
        return transcript(self._newest_page)

    @property
    def discarded_page_size(self) -> int:
        return len(self._newest_page)

    @property
    def discarded_hidden(self) -> int:
        return len(self.discarded) - self.discarded_page_size


@dataclass(frozen=True)
class ChannelFate:
    """What happens to one non-message channel: ``removed``, ``restored`` or ``changed``."""

    channel: str
    fate: str
    detail: str


@dataclass(frozen=True)
class Discards:
    """Everything the head holds that the state written (or forked) from the target does not."""

    messages: list[MessageChannelLoss]
    channels: list[ChannelFate]
    unchanged: list[str]

    @property
    def discarded_messages(self) -> int:
        return sum(len(m.discarded) for m in self.messages)

    @property
    def restored_messages(self) -> int:
        return sum(len(m.restored) for m in self.messages)

    @property
    def removed_channels(self) -> list[str]:
        return [c.channel for c in self.channels if c.fate == "removed"]

    @property
    def changed_channels(self) -> list[str]:
        return [c.channel for c in self.channels if c.fate == "changed"]

    @property
    def nothing(self) -> bool:
        return not self.messages and not self.channels


def discards(head: Mapping[str, Any], result: Mapping[str, Any]) -> Discards:
    """What going from the ``head``'s values to ``result``'s loses, regains and changes.

    LangGraph's bookkeeping channels are left out: the operator did not write them and a
    rollback's new head sets them anew.
    """
    before = {k: v for k, v in head.items() if not is_internal(k)}
    after = {k: v for k, v in result.items() if not is_internal(k)}
    messages: list[MessageChannelLoss] = []
    channels: list[ChannelFate] = []
    for change in channel_changes(before, after):
        loss = _message_loss(change)
        if loss is not None:
            messages.append(loss)
        elif change.kind == "removed":
            channels.append(ChannelFate(change.channel, "removed", "the head's value goes"))
        elif change.kind == "added":
            channels.append(ChannelFate(change.channel, "restored", "the head has no value"))
        else:
            channels.append(ChannelFate(change.channel, "changed", change.summary))
    changed = {c.channel for c in messages} | {c.channel for c in channels}
    return Discards(messages, channels, sorted((set(before) | set(after)) - changed))


def _message_loss(change: ChannelChange) -> MessageChannelLoss | None:
    if change.kind == "list" and (is_message_list(change.before) or is_message_list(change.after)):
        return MessageChannelLoss(change.channel, list(change.dropped), list(change.appended))
    if change.kind == "removed" and is_message_list(change.before):
        return MessageChannelLoss(change.channel, discarded=list(change.before))
    if change.kind == "added" and is_message_list(change.after):
        return MessageChannelLoss(change.channel, restored=list(change.after))
    return None


def shown_head_of(request) -> str:
    """The head the confirmation page showed, as posted back; refused when absent.

    Its format is the service's to judge; only absence is the form's own fault.
    """
    shown = request.POST.get(SHOWN_HEAD)
    if not shown:
        raise InvalidCheckpointInput(
            f"{SHOWN_HEAD} is missing: the confirmation page posts back the head checkpoint "
            "it showed, so that a head written since is never replaced unseen; open the "
            "confirmation page again",
            field=SHOWN_HEAD,
        )
    return shown


def discards_context(thread_id: str, ns: str, head: Checkpoint | None, result: Checkpoint) -> dict:
    """The template's ``discards`` against ``result``'s state, or why it cannot be said."""
    if head is None:
        return {"discards": None, "discards_error": "the thread has no head to compare with"}
    travel = time_travel_for(store_saver(), thread_id)
    try:
        now = travel.get_state(thread_id, head.checkpoint_id, checkpoint_ns=ns).values
        then = travel.get_state(thread_id, result.checkpoint_id, checkpoint_ns=ns).values
    except CheckpointStoreError as exc:
        return {"discards": None, "discards_error": exc.message}
    return {"discards": discards(now, then), "discards_error": ""}


def moved_words(request, *, thread_id: str, ns: str, head: Checkpoint | None) -> str:
    """A head that moved since the confirmation page, in words: what the page showed and
    when it was written, what was written since, when and by which node (the page says
    what to do: look at the new head, confirm again)."""
    shown = request.POST.get(SHOWN_HEAD, "")
    alias = store_alias()
    seen = (
        queries.checkpoint_row(alias=alias, thread_id=thread_id, checkpoint_id=shown, ns=ns)
        if shown
        else None
    )
    seen_text = f"checkpoint {shown}" + (f", written {when(seen.created_at)}," if seen else "")
    if head is None:
        return f"This page showed {seen_text} as the head; the thread now has no checkpoint."
    since = (
        queries.checkpoint_rows(alias=alias)
        .filter(thread_id=head.thread_id, checkpoint_ns=ns, checkpoint_id__gt=shown)
        .count()
    )
    writers = (
        queries.writers_of(
            alias=alias, checkpoints=[(head.thread_id, ns, head.parent_checkpoint_id)]
        )
        if head.parent_checkpoint_id
        else []
    )
    nodes = sorted({node_of(path) for *_, path in writers} - {""})
    by = f" by node {', '.join(nodes)}" if nodes else f" ({head.source or 'unknown source'})"
    step = f" at step {head.step}" if head.step is not None else ""
    return (
        f"This page showed {seen_text} as the head. Since then {since} checkpoint(s) were "
        f"written: the head is now checkpoint {head.checkpoint_id}, written "
        f"{when(head.created_at)}{by}{step}."
    )
