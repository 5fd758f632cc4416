"""Reading the ORM tables' rows into LangGraph's tuples (a mixin of `OrmSaver`).

Both dialects' statements return the same row shape: pk, thread pk, thread id, ns,
checkpoint id, parent id, body type, body, metadata, channel versions, then the
checkpoint's blobs and its pending writes folded into two lists. Values are decoded in one
go where none is sealed, else one by one so a failure names its place.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from operator import itemgetter
from typing import Any

from langgraph.checkpoint.base import CheckpointTuple, writes_sort_key

from checkpoints.channels import TASKS
from checkpoints.codec import decompress_typed
from checkpoints.codec.compression import (
    FRAME_MIN_BYTES,
    current_budget,
    reading_checkpoint,
    reserve,
)
from checkpoints.codec.encryption import SUFFIX as SEALED
from checkpoints.codec.encryption import Place, encryption_enabled
from checkpoints.codec.failures import decode_at, decode_writes
from checkpoints.errors import CheckpointCodecError, UnreadableValue
from checkpoints.store.planning.parent_sends import migrate_parent_sends, needs_parent_sends
from checkpoints.store.planning.reads import body_shape, metadata_shape
from checkpoints.store.projection import set_aside


class OrmReading:
    """`_tuples` and what it needs; the saver supplies ``using``, ``serde``, ``_load`` and
    ``json_as_text``."""

    using: str
    json_as_text: bool
    _load: Callable[..., Any]

    def _plain_loads(self, typed: list[tuple[Any, Any]], seen: dict | None = None) -> list | None:
        """Values read in one go when none is sealed (the common case), else None; also
        None on any failure, and the caller reads them one by one to name the failing one.

        ``seen``: values this call has read already, by their plain bytes object. A page's
        rows share a document's compressed frame, which decompresses to one cached object
        (`FRAMES`): a value that cannot be changed in place is then read once for them all.
        """
        stored = []
        for type_, data in typed:
            if type(type_) is not str:
                type_ = _text(type_)
            if type_.endswith(SEALED):
                return None
            stored.append((type_, data if type(data) is bytes else bytes(data)))
        # Frames stating more than this checkpoint (or response) may expand to are refused
        # before any is expanded.
        reserve(stored)
        budget = current_budget()
        mark = budget.mark() if budget is not None else None
        try:
            plain = [decompress_typed(one) for one in stored]
        except CheckpointCodecError as exc:
            if isinstance(exc, UnreadableValue) and exc.where:
                raise  # a budget's refusal, already naming the checkpoint
            if budget is not None:
                budget.rewind(mark)  # read again one by one, which names the failing value
            return None
        # Only cached frames' plain bytes are shared; shorter values are not worth a lookup.
        keys = [
            (t, id(d)) if seen is not None and len(d) >= FRAME_MIN_BYTES else None for t, d in plain
        ]
        values: list = [None] * len(plain)
        missing = []
        for i, key in enumerate(keys):
            # The entry holds its bytes object, so no other object can take its id meanwhile.
            known = seen.get(key) if key is not None else None
            if known is not None and known[0] is plain[i][1]:
                values[i] = known[1]
            else:
                missing.append(i)
        loads_many = getattr(self.serde, "loads_many", None)
        todo = [plain[i] for i in missing]
        try:
            if loads_many is not None:
                loaded = loads_many(todo)
            else:
                loaded = [self.serde.loads_typed(one) for one in todo]
        except Exception:  # noqa: BLE001 - read again one by one, which names the failure
            return None
        for i, value in zip(missing, loaded, strict=True):
            values[i] = value
            if keys[i] is not None and type(value) in _UNCHANGEABLE:
                seen[keys[i]] = (plain[i][1], value)
        return values

    def _tuples(self, rows: list[tuple]) -> list[CheckpointTuple]:
        out = []
        # Sealed values, and plaintext in a store with keys, need their place: the slow path.
        plain = not encryption_enabled()
        # Values read once for all of this page's rows (`_plain_loads`).
        seen: dict | None = {} if len(rows) > 1 else None
        # A str is JSON text only where the dialect hands JSON columns back as text.
        text_json = self.json_as_text
        for row in rows:
            _, _, thread_id, ns, cid, parent, type_, body, metadata, versions, blobs, writes = row[
                :12
            ]
            with reading_checkpoint(thread_id, ns, cid):
                at = {"thread_id": thread_id, "ns": ns, "checkpoint_id": cid}
                checkpoint = decode_at(
                    lambda t=type_, b=body, v=versions: body_shape(
                        self.serde.loads_typed((t, bytes(b))),
                        json.loads(v) if text_json and isinstance(v, str) else v,
                    ),
                    part="the body",
                    **at,
                )
                metadata = decode_at(
                    lambda m=metadata: metadata_shape(m), part="the metadata", **at
                )
                versions = checkpoint["channel_versions"]
                blobs = blobs or []
                if blobs and type(blobs[0][0]) is not str:
                    # PostgreSQL's arrays hand names back as bytea: decoded once, here.
                    blobs = [(_text(c), _text(t), d) for c, t, d in blobs]
                blobs, unread = set_aside(blobs, itemgetter(0))
                values = checkpoint["channel_values"] = unread
                # A checkpoint from before format v4: its parent's sends, which the row
                # carried, read in the same go as its blobs (`needs_parent_sends` asked
                # with the values known so far: those set aside, then the blobs' channels).
                sends = row[12]
                if sends and (
                    not needs_parent_sends(checkpoint, parent) or any(b[0] == TASKS for b in blobs)
                ):
                    sends = None
                elif sends:
                    sends = [(_text(t), int(_text(i)), _text(k), d) for t, i, k, d in sends]
                typed = [b[1:] for b in blobs]
                if sends:
                    typed += [send[2:] for send in sends]
                loaded = self._plain_loads(typed, seen) if plain and typed else None
                if loaded is not None:
                    channels = (b[0] for b in blobs)
                    values.update(zip(channels, loaded[: len(blobs)], strict=True))
                    if sends:
                        migrate_parent_sends(
                            checkpoint, loaded[len(blobs) :], lambda: self.get_next_version(None)
                        )
                        sends = None
                else:
                    for channel, blob_type, data in blobs:
                        values[channel] = decode_at(
                            lambda t=blob_type, d=data, c=channel, a=at, v=versions: self._load(
                                t, d, lambda: _blob_place(a, c, v)
                            ),
                            part=("channel", channel),
                            **at,
                        )
                pending = sorted(
                    (
                        (
                            _text(task_id),
                            _text(task_path),
                            int(_text(idx)),
                            _text(channel),
                            _text(w_type),
                            data,
                        )
                        for task_id, task_path, idx, channel, w_type, data in (writes or ())
                    ),
                    key=lambda w: writes_sort_key(w[1], w[0], w[2]),
                )
                loaded = self._plain_loads([w[4:] for w in pending]) if plain and pending else None
                if loaded is not None:
                    pending_writes = [(w[0], w[3], v) for w, v in zip(pending, loaded, strict=True)]
                else:
                    pending_writes = decode_writes(
                        (
                            (
                                w[0],
                                w[3],
                                lambda w=w, key=(thread_id, ns, cid): self._load(
                                    w[4], w[5], lambda: Place.write(*key, w[0], w[2], w[3])
                                ),
                            )
                            for w in pending
                        ),
                        **at,
                    )
                if sends:
                    self._migrate_sends(checkpoint, sends, thread_id, ns, parent)
                conf = {"thread_id": thread_id, "checkpoint_ns": ns}
                out.append(
                    CheckpointTuple(
                        config={"configurable": {**conf, "checkpoint_id": cid}},
                        checkpoint=checkpoint,
                        metadata=metadata,
                        parent_config=(
                            {"configurable": {**conf, "checkpoint_id": parent}} if parent else None
                        ),
                        pending_writes=pending_writes,
                    )
                )
        return out

    def _migrate_sends(
        self, checkpoint: dict, sends: list, thread_id: str, ns: str, parent: str
    ) -> None:
        """A checkpoint from before format v4 given its parent's pending sends, which its
        row carried ((task id, idx, type, bytes) of each, in task path, task id, idx order),
        read one by one so a failure names its write: `planning.migrate_parent_sends`."""
        values = decode_writes(
            (
                (
                    task_id,
                    TASKS,
                    lambda t=type_, d=data, task=task_id, i=idx: self._load(
                        t, d, lambda: Place.write(thread_id, ns, parent, task, i, TASKS)
                    ),
                )
                for task_id, idx, type_, data in sends
            ),
            thread_id=thread_id,
            ns=ns,
            checkpoint_id=parent,
        )
        migrate_parent_sends(
            checkpoint, [value for _, _, value in values], lambda: self.get_next_version(None)
        )

    def decode_write(
        self,
        thread_id: str,
        ns: str,
        checkpoint_id: str,
        task_id: str,
        idx: int,
        channel: str,
        type_: str,
        blob: Any,
    ) -> Any:
        """One pending write's value from its row, for readers of the tables (the admin's
        list shows an interrupt's question without loading the whole checkpoint)."""
        at = Place.write(thread_id, ns, checkpoint_id, task_id, idx, channel)
        return decode_at(
            lambda: self._load(type_, blob, at),
            thread_id=thread_id,
            ns=ns,
            checkpoint_id=checkpoint_id,
            part=f"pending write {channel!r} of task {task_id!r}",
        )


# Values a reader cannot change in place: one object may stand in every row that holds it.
_UNCHANGEABLE = frozenset({str, bytes, int, float, bool, type(None)})


def _blob_place(at: dict, channel: Any, versions: dict) -> Place:
    # The stored blob is the one at the checkpoint's version of the channel.
    channel = _text(channel)
    return Place.blob(at["thread_id"], at["ns"], channel, versions.get(channel, ""))


def _text(value: Any) -> str:
    """Names come back as bytea from the PostgreSQL arrays and as str from the ORM."""
    kind = type(value)
    if kind is bytes:
        return value.decode()
    if kind is str:
        return value
    if isinstance(value, memoryview):
        value = bytes(value)
    return value.decode() if isinstance(value, bytes) else value
