"""What a transfer moves, and the export file that holds it (format version 1).

An export is UTF-8 JSON, one record a line (zstd-compressed when the name ends in .zst):

- line 1, the header: ``{"format": "checkpoint-store-export", "version": 1, ...}``;
- per thread, a ``{"kind": "thread", "thread_id", "owner", "retention", "finished",
  "extras"}`` record (``extras``: what registered apps keep per thread, such as its thread
  metadata and holds, `extras`; absent in files written before it, read as none), then its
  checkpoints oldest first (``"kind": "checkpoint"``: ns, id, parent,
  metadata, the body's v/ts/channel_versions/versions_seen/updated_channels, ``values``
  and its ``writes`` in read order), then ``{"kind": "end", "thread_id", "checkpoints",
  "writes"}``: a thread without its end record (a truncated file) is refused.

Blank lines are skipped. Reading is bounded: a line longer than `max_line_bytes` (a
checkpoint at ``MAX_CHECKPOINT_BYTES`` in base64, plus its record) or a file larger than
``max_bytes`` once decompressed (`DEFAULT_MAX_IMPORT_BYTES` unless the caller says) stops
the reading there, refused naming the file and line; the stream is read in chunks of
`READ_CHUNK`, so a small ``.zst`` that decompresses to a huge line never fills memory.

Values keep their types: each is ``{"type": tag, "data": base64}``, the serializer's own
(type, bytes) pair (LangGraph's JsonPlusSerializer tags, which every store here and
LangGraph's savers read), never a JSON rendering that would turn a message into a dict.
"""

from __future__ import annotations

import base64
import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from checkpoints.codec.budget import ObjectBudget, ObjectBudgetExceeded
from checkpoints.conf import DEFAULTS, setting
from checkpoints.errors import InvalidCheckpointInput

FORMAT_NAME = "checkpoint-store-export"
# A line holds one checkpoint: its values and writes (MAX_CHECKPOINT_BYTES at most, the
# store's read bound) in base64, which is 4/3 their size, plus the record around them
# (ids, metadata, versions), within this envelope.
LINE_ENVELOPE_BYTES = 4 * 1024 * 1024
# Decompressed bytes one import reads unless told otherwise (--max-bytes).
DEFAULT_MAX_IMPORT_BYTES = 64 * 1024**3
READ_CHUNK = 1024 * 1024
FORMAT_VERSION = 1
# Body fields kept as JSON; anything else in a body (pre-v4 pending_sends) goes typed.
BODY_JSON = ("v", "ts", "channel_versions", "versions_seen", "updated_channels")


class TransferFormatError(InvalidCheckpointInput):
    """A source, or one record in it, that cannot be read or imported; names the file and
    line, or the thread and checkpoint. ``thread_id``: the thread refused, when known."""

    code = "transfer_format"
    thread_id: str | None = None


def refuse(
    why: str,
    *,
    thread_id: str | None = None,
    path: str = "",
    line: int | None = None,
    checkpoint: tuple[str, str] | None = None,
) -> TransferFormatError:
    """The refusal of one thread: where (file and line, or thread and checkpoint) and why."""
    where = f"{path}:{line}: " if path else ""
    who = f"thread {thread_id!r}" if thread_id is not None else ""
    if checkpoint is not None:
        who += f"{', ' if who else ''}checkpoint {checkpoint[1]!r} (ns {checkpoint[0]!r})"
    err = TransferFormatError(
        f"{where}{who}{': ' if who else ''}{why}; nothing of this thread was imported"
    )
    err.thread_id = thread_id
    return err


@dataclass
class WriteRecord:
    task_id: str
    channel: str
    value: Any
    task_path: str = ""
    idx: int | None = None


@dataclass
class CheckpointRecord:
    ns: str
    checkpoint: dict[str, Any]
    metadata: dict[str, Any]
    parent_id: str | None
    writes: list[WriteRecord] = field(default_factory=list)
    # The export line it was read from (files only), for refusals.
    line: int | None = field(default=None, compare=False)

    @property
    def checkpoint_id(self) -> str:
        return str(self.checkpoint["id"])


@dataclass
class ThreadRecord:
    """One thread as a transfer moves it: its checkpoints oldest first per namespace."""

    thread_id: str
    checkpoints: list[CheckpointRecord]
    # The username of the thread's owner in the source ("" none): only our stores that
    # record owners name one, never from a checkpoint's metadata. As read from a file,
    # unchecked until `checks.check_thread`, like retention and finished.
    owner: Any = ""
    retention: Any = None
    # {"due_at": ISO, "owner": str} when the source marked the thread finished.
    finished: Any = None
    # The export line the thread's record starts at, and the file (files only).
    line: int | None = None
    path: str = ""
    # Registered extras by name (`extras`): thread metadata, holds. Unchecked until
    # `checks.check_thread`, as read from a file.
    extras: Any = field(default_factory=dict)
    # Set by an import that found the target without it just before reading it.
    absent: bool = field(default=False, compare=False)
    # Its batch as the target prepared it (`StoreSaver.prepare_many`) in a read-ahead,
    # under its own id; dropped once written.
    prepared: Any = field(default=None, compare=False, repr=False)

    @property
    def writes(self) -> int:
        return sum(len(c.writes) for c in self.checkpoints)


# -- encoding -----------------------------------------------------------------------------
def typed_json(serde, value: Any) -> dict[str, str]:
    type_, data = serde.dumps_typed(value)
    return {"type": type_, "data": base64.b64encode(data).decode("ascii")}


def typed_value(serde, entry: Any, where: str) -> Any:
    if type(entry) is not dict or set(entry) != {"type", "data"}:
        raise ValueError(f"{where} is not a {{type, data}} pair")
    if not isinstance(entry["type"], str) or not isinstance(entry["data"], str):
        raise ValueError(f"{where} has a type or data that is not text")
    try:
        data = base64.b64decode(entry["data"], validate=True)
    except ValueError as exc:
        raise ValueError(f"{where} data is not base64: {exc}") from None
    try:
        return serde.loads_typed((entry["type"], data))
    except ObjectBudgetExceeded as exc:
        raise ObjectBudgetExceeded(f"{where} cannot be read: {exc}", field=where) from None


def _typed_bytes(rec: dict[str, Any]) -> int:
    """The base64 text of a checkpoint record's typed values together (more than their
    bytes): what their decoding is bounded by before any is read."""
    entries = [rec.get("rest"), *(rec.get("values") or {}).values()]
    entries += [w.get("value") for w in rec.get("writes") or () if type(w) is dict]
    return sum(len(e["data"]) for e in entries if type(e) is dict and type(e.get("data")) is str)


def header(**extra: Any) -> dict[str, Any]:
    return {"format": FORMAT_NAME, "version": FORMAT_VERSION, **extra}


def thread_lines(serde, thread: ThreadRecord) -> Iterator[dict[str, Any]]:
    """The records of one thread, as dicts ready for ``json.dumps``."""
    yield {
        "kind": "thread",
        "thread_id": thread.thread_id,
        "owner": thread.owner,
        "retention": thread.retention,
        "finished": thread.finished,
        **({"extras": thread.extras} if thread.extras else {}),
    }
    for cp in thread.checkpoints:
        body = cp.checkpoint
        rest = {
            k: v
            for k, v in body.items()
            if k not in BODY_JSON and k not in ("id", "channel_values")
        }
        yield {
            "kind": "checkpoint",
            "ns": cp.ns,
            "id": cp.checkpoint_id,
            "parent": cp.parent_id,
            "metadata": cp.metadata,
            **{k: body[k] for k in BODY_JSON if k in body},
            "rest": typed_json(serde, rest) if rest else None,
            "values": {
                ch: typed_json(serde, v) for ch, v in (body.get("channel_values") or {}).items()
            },
            "writes": [
                {
                    "task_id": w.task_id,
                    "task_path": w.task_path,
                    "idx": w.idx,
                    "channel": w.channel,
                    "value": typed_json(serde, w.value),
                }
                for w in cp.writes
            ],
        }
    yield {
        "kind": "end",
        "thread_id": thread.thread_id,
        "checkpoints": len(thread.checkpoints),
        "writes": thread.writes,
    }


def _checkpoint(serde, rec: dict[str, Any], line: int) -> CheckpointRecord:
    for name, kinds in (("ns", str), ("id", str), ("metadata", dict), ("values", dict)):
        if not isinstance(rec.get(name), kinds):
            raise ValueError(f"its {name!r} is missing or not a {kinds.__name__}")
    if rec.get("parent") is not None and not isinstance(rec["parent"], str):
        raise ValueError("its 'parent' is not text")
    if not isinstance(rec.get("channel_versions", {}), dict):
        raise ValueError("its 'channel_versions' is not an object")
    if not isinstance(rec.get("writes") or [], list):
        raise ValueError("its 'writes' is not a list")
    with ObjectBudget(_typed_bytes(rec)):
        return _checkpoint_values(serde, rec, line)


def _checkpoint_values(serde, rec: dict[str, Any], line: int) -> CheckpointRecord:
    body: dict[str, Any] = {"id": rec["id"]}
    body.update({k: rec[k] for k in BODY_JSON if k in rec})
    if rec.get("rest") is not None:
        rest = typed_value(serde, rec["rest"], "its 'rest'")
        if type(rest) is not dict:
            raise ValueError("its 'rest' is not a dict")
        body.update(rest)
    body["channel_values"] = {
        ch: typed_value(serde, v, f"value of channel {ch!r}") for ch, v in rec["values"].items()
    }
    writes = []
    for i, w in enumerate(rec.get("writes") or ()):
        if type(w) is not dict or not isinstance(w.get("task_id"), str):
            raise ValueError(f"its write {i} has no task_id")
        if not isinstance(w.get("channel"), str) or not isinstance(w.get("task_path", ""), str):
            raise ValueError(f"its write {i} has no channel")
        if w.get("idx") is not None and type(w["idx"]) is not int:
            raise ValueError(f"its write {i} has an idx that is not a whole number")
        writes.append(
            WriteRecord(
                task_id=w["task_id"],
                channel=w["channel"],
                value=typed_value(serde, w.get("value"), f"write {i}'s value"),
                task_path=w.get("task_path", ""),
                idx=w.get("idx"),
            )
        )
    return CheckpointRecord(rec["ns"], body, rec["metadata"], rec.get("parent"), writes, line)


# -- files --------------------------------------------------------------------------------
def open_output(path: str, stdout=None):
    """A binary stream for ``path`` (``-``: stdout), zstd when it ends in ``.zst``."""
    if path == "-":
        return _Unclosed(stdout.buffer if hasattr(stdout, "buffer") else stdout)
    raw = open(path, "wb")  # noqa: SIM115 - closed by the caller's with
    if path.endswith(".zst"):
        import zstandard

        return zstandard.ZstdCompressor(level=3).stream_writer(raw, closefd=True)
    return raw


class _Unclosed(io.RawIOBase):
    def __init__(self, inner):
        self.inner = inner

    def write(self, data):
        return self.inner.write(data)

    def close(self):
        self.inner.flush()


def max_line_bytes() -> int:
    """The longest line an import reads: a checkpoint at the store's read bound, in base64."""
    per_checkpoint = setting("MAX_CHECKPOINT_BYTES") or DEFAULTS["MAX_CHECKPOINT_BYTES"]
    return per_checkpoint * 4 // 3 + LINE_ENVELOPE_BYTES


class _StopReading(TransferFormatError):
    """Internal: the file cannot be read past this line (too long, too big, corrupt)."""

    def __init__(self, path: str, line: int, why: str) -> None:
        super().__init__(f"{path}:{line}: {why}")
        self.path, self.line, self.why = path, line, why


# Whitespace up to and including a newline: the blank lines a run skips in one step.
_BLANK = re.compile(rb"[ \t\r\n]*\n")


def _input_lines(path: str, max_bytes: int) -> Iterator[tuple[int, bytes]]:
    """(line number, line) of each line that is not blank, read in bounded chunks."""
    max_line = max_line_bytes()
    raw = open(path, "rb")  # noqa: SIM115 - closed below
    try:
        if path.endswith(".zst"):
            import zstandard

            stream = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
        else:
            stream = raw
        number, total, partial = 1, 0, bytearray()
        while True:
            try:
                chunk = stream.read(READ_CHUNK)
            except Exception as exc:  # noqa: BLE001 - what zstd or the disk says, named
                raise _StopReading(path, number, f"the file cannot be read here: {exc}") from None
            if not chunk:
                break
            total += len(chunk)
            if total > max_bytes:
                raise _StopReading(
                    path,
                    number,
                    f"the file holds more than {max_bytes} bytes"
                    f"{' decompressed' if path.endswith('.zst') else ''}; the import reads no "
                    "further (raise the bound with --max-bytes if the file is genuine)",
                )
            start = 0
            while start < len(chunk):
                if not partial:
                    blank = _BLANK.match(chunk, start)
                    if blank is not None:
                        number += chunk.count(b"\n", start, blank.end())
                        start = blank.end()
                        continue
                end = chunk.find(b"\n", start)
                piece = chunk[start:] if end < 0 else chunk[start:end]
                if len(partial) + len(piece) > max_line:
                    raise _StopReading(
                        path,
                        number,
                        f"the line is longer than {max_line} bytes, more than a checkpoint "
                        "within CHECKPOINTS['MAX_CHECKPOINT_BYTES'] takes; the import reads "
                        "no further",
                    )
                if end < 0:
                    partial += piece
                    break
                line = bytes(partial + piece) if partial else piece
                partial.clear()
                if line[:1] not in b" \t\r" or line.strip():
                    yield number, line
                number += 1
                start = end + 1
        if partial.strip():
            yield number, bytes(partial)
    finally:
        raw.close()


def read_export(
    path: str, serde, *, max_bytes: int | None = None
) -> Iterator[ThreadRecord | TransferFormatError]:
    """The threads of an export file, one at a time (memory holds one thread).

    A thread with a bad record comes out as the TransferFormatError naming the line
    (none of its records are given); reading goes on at the next thread record. A line
    or a file over the bounds (see the module's docstring) ends the reading with a
    refusal naming the line.
    """
    lines = _input_lines(path, DEFAULT_MAX_IMPORT_BYTES if max_bytes is None else max_bytes)
    try:
        first = next(lines, None)
    except _StopReading as exc:
        raise TransferFormatError(exc.message) from None
    if first is None:
        raise TransferFormatError(f"{path}: the file is empty; it holds no export header")
    try:
        head = json.loads(first[1])
    except ValueError:
        head = None
    if first[0] != 1 or type(head) is not dict or head.get("format") != FORMAT_NAME:
        raise TransferFormatError(f"{path}:1: not a checkpoint-store export (no header line)")
    if head.get("version") != FORMAT_VERSION:
        raise TransferFormatError(
            f"{path}:1: export format version {head.get('version')!r}; this version reads "
            f"{FORMAT_VERSION}"
        )
    current: ThreadRecord | None = None
    broken: TransferFormatError | None = None
    seen: set[str] = set()
    try:
        for number, line in lines:
            try:
                rec = json.loads(line)
                if type(rec) is not dict:
                    raise ValueError("the line is not a JSON object")
                kind = rec.get("kind")
                if kind == "thread":
                    if current is not None or broken is not None:
                        yield broken or refuse(
                            "the thread has no end record",
                            thread_id=current.thread_id,
                            path=path,
                            line=current.line,
                        )
                    current, broken = None, None
                    thread_id = rec.get("thread_id")
                    if not isinstance(thread_id, str) or not thread_id:
                        raise ValueError("the thread record has no thread_id")
                    if thread_id in seen:
                        raise ValueError(f"thread {thread_id!r} appears a second time")
                    seen.add(thread_id)
                    owner = rec.get("owner")
                    current = ThreadRecord(
                        thread_id=thread_id,
                        checkpoints=[],
                        owner="" if owner is None else owner,
                        retention=rec.get("retention"),
                        finished=rec.get("finished"),
                        extras=rec.get("extras", {}),
                        line=number,
                        path=path,
                    )
                    continue
                if broken is not None:
                    continue  # the rest of a refused thread
                if current is None:
                    raise ValueError(f"a {kind!r} record outside any thread")
                if kind == "checkpoint":
                    current.checkpoints.append(_checkpoint(serde, rec, number))
                elif kind == "end":
                    if rec.get("thread_id") != current.thread_id:
                        raise ValueError("the end record names another thread")
                    if (
                        rec.get("checkpoints") != len(current.checkpoints)
                        or rec.get("writes") != current.writes
                    ):
                        raise ValueError(
                            f"the end record counts {rec.get('checkpoints')} checkpoint(s) and "
                            f"{rec.get('writes')} write(s); the thread holds "
                            f"{len(current.checkpoints)} and {current.writes}"
                        )
                    yield current
                    current = None
                else:
                    raise ValueError(f"unknown record kind {kind!r}")
            except Exception as exc:  # noqa: BLE001 - any bad record refuses its thread
                thread_id = current.thread_id if current is not None else None
                broken = refuse(
                    f"bad record{'' if thread_id is None else f' of thread {thread_id!r}'}: {exc}",
                    path=path,
                    line=number,
                )
                broken.thread_id = thread_id
                current = None
    except _StopReading as stop:
        if broken is not None and broken.thread_id is not None:
            yield broken
        thread_id = current.thread_id if current is not None else None
        cut = TransferFormatError(
            f"{path}:{stop.line}: {stop.why}"
            + ("" if thread_id is None else f"; thread {thread_id!r} was not imported")
            + "; nothing after this line was read"
        )
        cut.thread_id = thread_id
        yield cut
        return
    if broken is not None:
        yield broken
    elif current is not None:
        yield refuse(
            "the thread has no end record",
            thread_id=current.thread_id,
            path=path,
            line=current.line,
        )
