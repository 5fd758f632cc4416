"""What a transfer moves, and the export file that holds it (format version 1).

An export is UTF-8 JSON, one record a line (zstd-compressed when the name ends in .zst):

- line 1, the header: ``{"format": "checkpoint-store-export", "version": 1, ...}``;
- per thread, a ``{"kind": "thread", "thread_id", "owner", "retention", "finished"}``
  record, then its checkpoints oldest first (``"kind": "checkpoint"``: ns, id, parent,
  metadata, the body's v/ts/channel_versions/versions_seen/updated_channels, ``values``
  and its ``writes`` in read order), then ``{"kind": "end", "thread_id", "checkpoints",
  "writes"}``: a thread without its end record (a truncated file) is refused.

Values keep their types: each is ``{"type": tag, "data": base64}``, the serializer's own
(type, bytes) pair (LangGraph's JsonPlusSerializer tags, which every store here and
LangGraph's savers read), never a JSON rendering that would turn a message into a dict.
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from checkpoints.errors import InvalidCheckpointInput

FORMAT_NAME = "checkpoint-store-export"
FORMAT_VERSION = 1
# Body fields kept as JSON; anything else in a body (pre-v4 pending_sends) goes typed.
BODY_JSON = ("v", "ts", "channel_versions", "versions_seen", "updated_channels")


class TransferFormatError(InvalidCheckpointInput):
    """An export file, or one record in it, that cannot be read; names the line."""

    code = "transfer_format"


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

    @property
    def checkpoint_id(self) -> str:
        return str(self.checkpoint["id"])


@dataclass
class ThreadRecord:
    """One thread as a transfer moves it: its checkpoints oldest first per namespace."""

    thread_id: str
    checkpoints: list[CheckpointRecord]
    owner: str = ""
    retention: dict[str, int | None] | None = None
    # {"due_at": ISO, "owner": str} when the source marked the thread finished.
    finished: dict[str, str] | None = None
    # The export line the thread's record starts at (files only), for refusals.
    line: int | None = None

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
    return serde.loads_typed((entry["type"], data))


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


def _checkpoint(serde, rec: dict[str, Any]) -> CheckpointRecord:
    for name, kinds in (("ns", str), ("id", str), ("metadata", dict), ("values", dict)):
        if not isinstance(rec.get(name), kinds):
            raise ValueError(f"its {name!r} is missing or not a {kinds.__name__}")
    if rec.get("parent") is not None and not isinstance(rec["parent"], str):
        raise ValueError("its 'parent' is not text")
    if not isinstance(rec.get("channel_versions", {}), dict):
        raise ValueError("its 'channel_versions' is not an object")
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
    return CheckpointRecord(rec["ns"], body, rec["metadata"], rec.get("parent"), writes)


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


def _input_lines(path: str) -> Iterator[bytes]:
    raw = open(path, "rb")  # noqa: SIM115 - closed below
    try:
        if path.endswith(".zst"):
            import zstandard

            stream = io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(raw))
        else:
            stream = raw
        yield from stream
    finally:
        raw.close()


def read_export(path: str, serde) -> Iterator[ThreadRecord | TransferFormatError]:
    """The threads of an export file, one at a time (memory holds one thread).

    A thread with a bad record comes out as the TransferFormatError naming the line
    (none of its records are given); reading goes on at the next thread record.
    """
    lines = enumerate(_input_lines(path), start=1)
    try:
        first = next(lines, None)
    except Exception as exc:  # noqa: BLE001 - a file zstd or the disk cannot read
        raise TransferFormatError(f"{path}: cannot be read: {exc}") from exc
    if first is None:
        raise TransferFormatError(f"{path}: the file is empty; it holds no export header")
    try:
        head = json.loads(first[1])
    except ValueError:
        head = None
    if type(head) is not dict or head.get("format") != FORMAT_NAME:
        raise TransferFormatError(f"{path}:1: not a checkpoint-store export (no header line)")
    if head.get("version") != FORMAT_VERSION:
        raise TransferFormatError(
            f"{path}:1: export format version {head.get('version')!r}; this version reads "
            f"{FORMAT_VERSION}"
        )
    current: ThreadRecord | None = None
    broken: TransferFormatError | None = None
    seen: set[str] = set()
    for number, line in lines:
        try:
            rec = json.loads(line)
            if type(rec) is not dict:
                raise ValueError("the line is not a JSON object")
            kind = rec.get("kind")
            if kind == "thread":
                if current is not None or broken is not None:
                    yield broken or _refuse(path, current.line, "the thread has no end record")
                current, broken = None, None
                thread_id = rec.get("thread_id")
                if not isinstance(thread_id, str) or not thread_id:
                    raise ValueError("the thread record has no thread_id")
                if thread_id in seen:
                    raise ValueError(f"thread {thread_id!r} appears a second time")
                seen.add(thread_id)
                current = ThreadRecord(
                    thread_id=thread_id,
                    checkpoints=[],
                    owner=str(rec.get("owner") or ""),
                    retention=rec.get("retention"),
                    finished=rec.get("finished"),
                    line=number,
                )
                continue
            if broken is not None:
                continue  # the rest of a refused thread
            if current is None:
                raise ValueError(f"a {kind!r} record outside any thread")
            if kind == "checkpoint":
                current.checkpoints.append(_checkpoint(serde, rec))
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
            where = f" of thread {current.thread_id!r}" if current is not None else ""
            broken = _refuse(path, number, f"bad record{where}: {exc}")
            if current is not None:
                broken.thread_id = current.thread_id
            current = None
    if broken is not None:
        yield broken
    elif current is not None:
        yield _refuse(path, current.line, f"thread {current.thread_id!r} has no end record")


def _refuse(path: str, line: int | None, why: str) -> TransferFormatError:
    err = TransferFormatError(f"{path}:{line}: {why}; nothing of this thread was imported")
    err.thread_id = None
    return err
