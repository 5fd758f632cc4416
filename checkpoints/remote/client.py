"""`RemoteSaver`: LangGraph's BaseCheckpointSaver over the store service's `/store/v1/`.

One subject: `RemoteSaver`, one class; its sync and async twins side by side, each one
call of the wire, so they cannot drift apart.

A worker holds no database connection: each saver call is one HTTP round trip to the
service, which runs it through the same store contract as the in-process saver (owners,
sealing, durability, ``max_checkpoints``, retention). Loads neither Django nor psycopg
nor redis.

One keep-alive pool per saver (httpx; the async one per event loop), a bounded timeout on
every call. Calls that are idempotent (reads, a put under its checkpoint id, writes by task
and index, deletes, marks) are retried on connection errors and 502/503/504 with backoff
until ``retry_seconds`` have passed (longer than a service restart by default), then
`StoreUnavailable` names the URL; a call that is not (a copy) is tried once. A 429 is
waited out (the service did nothing) within the same budget. Never a silent drop: every
failure raises.
"""

from __future__ import annotations

import asyncio
import copy
import json
import random
import socket
import threading
import time
import weakref
from collections.abc import AsyncIterator, Iterator, Sequence
from datetime import datetime
from typing import Any

import ormsgpack
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.serde import jsonplus

from checkpoints import errors
from checkpoints.codec.failures import decode_at, refuse_checkpoint_over, refuse_value_over
from checkpoints.codec.serde import StoreSerializer
from checkpoints.remote.wire import (
    API_PATH,
    CONTENT_TYPE,
    WireFormatError,
    pack,
    stored_pair,
    typed_pair,
    unpack_whole,
    wire_config,
)
from checkpoints.surrogates import lone_surrogate_path, lone_surrogate_refusal
from checkpoints.versions import next_version

SCHEMES = {"checkpoints+http": "http", "checkpoints+https": "https"}
DEFAULT_TIMEOUT = 30.0
DEFAULT_RETRY_SECONDS = 30.0
RETRY_STATUSES = frozenset({502, 503, 504})
_BACKOFF_FIRST, _BACKOFF_MOST = 0.1, 2.0
# A request's headers and body go out as two writes: with Nagle's algorithm the body waits
# for the server's delayed ACK of the headers (40 ms on Linux), on every call.
NO_DELAY = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
# LangGraph's msgpack options less OPT_REPLACE_SURROGATES: a lone surrogate raises.
_STRICT_MSGPACK = jsonplus._option & ~ormsgpack.OPT_REPLACE_SURROGATES
_lg_default = jsonplus._msgpack_default


class RemoteStoreError(errors.CheckpointStoreError):
    """A refusal of the store service whose code this client has no class for; carries
    the service's ``code`` and ``status``."""

    def __init__(self, message: str, *, code: str, status: int, field: str | None = None):
        super().__init__(message, field=field)
        self.code = code
        self.status = status


def _error_classes() -> dict[tuple[str, int], type]:
    found: dict[tuple[str, int], type] = {}
    pending = [errors.CheckpointStoreError]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if cls is not RemoteStoreError:
            found.setdefault((cls.code, cls.status), cls)
    return found


def is_remote_url(conn_string: Any) -> bool:
    """Whether ``conn_string`` names a store service (``checkpoints+http(s)://...``)."""
    return (
        isinstance(conn_string, str)
        and conn_string.split("://", 1)[0].lower() in SCHEMES
        and "://" in conn_string
    )


def service_url(conn_string: str) -> str:
    """``checkpoints+https://host[:port][/prefix]`` (or the service's own ``https://...``)
    as the base URL of its `/store/v1/`."""
    if isinstance(conn_string, str) and conn_string.split("://", 1)[0].lower() in (
        "http",
        "https",
    ):
        conn_string = "checkpoints+" + conn_string
    if not is_remote_url(conn_string):
        raise errors.CheckpointConfigError(
            f"{conn_string!r} is not a store service URL; use checkpoints+https://host[/prefix]"
            " or checkpoints+http://host:port[/prefix]",
            field="conn_string",
        )
    scheme, rest = conn_string.split("://", 1)
    rest = rest.split("?", 1)[0].split("#", 1)[0]
    host = rest.split("/", 1)[0]
    if not host or "@" in host:
        raise errors.CheckpointConfigError(
            f"{conn_string!r} names no host (and credentials go in api_key, never the URL)",
            field="conn_string",
        )
    base = f"{SCHEMES[scheme.lower()]}://{rest.rstrip('/')}/"
    return base + API_PATH


class RemoteSaver(BaseCheckpointSaver[str]):
    """A checkpoint saver whose store is the checkpoint store service at ``url``."""

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        retry_seconds: float = DEFAULT_RETRY_SECONDS,
        max_connections: int = 32,
        serde: Any = None,
        transport: Any = None,
        atransport: Any = None,
    ) -> None:
        # The store's strict reader (nothing imported or called that the bytes name, the object
        # budget before anything is built, BLOCKED_TYPES), under the service's policy once its
        # `info` is in (`_set_info`, before the first read or size check). A caller's own
        # serializer is used as given.
        self._own_serde = serde is None
        self._extra_allowlist: frozenset = frozenset()
        super().__init__(serde=serde or StoreSerializer(policy=_UNTIL_INFO))
        self.url = service_url(url)
        if not isinstance(timeout, (int, float)) or timeout <= 0:
            raise errors.CheckpointConfigError(
                f"timeout must be a positive number of seconds, got {timeout!r}", field="timeout"
            )
        if not isinstance(retry_seconds, (int, float)) or retry_seconds < 0:
            raise errors.CheckpointConfigError(
                f"retry_seconds must be a number >= 0, got {retry_seconds!r}",
                field="retry_seconds",
            )
        self.timeout = float(timeout)
        self.retry_seconds = float(retry_seconds)
        if type(max_connections) is not int or max_connections < 1:
            raise errors.CheckpointConfigError(
                f"max_connections must be a whole number of 1 or more, got {max_connections!r}",
                field="max_connections",
            )
        self.max_connections = max_connections
        # At most max_connections calls in flight, so none waits inside httpx's pool: httpcore
        # rescans every queued request and connection at each request's start and end, which
        # cost 212 ms of client CPU a graph turn at 32 concurrent runs against 76 behind a gate.
        self._gate = threading.BoundedSemaphore(max_connections)
        self._agates: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        # Answers are msgpack, refusals JSON.
        self._headers = {
            "content-type": CONTENT_TYPE,
            "accept": f"{CONTENT_TYPE}, application/json",
        }
        if api_key:
            self._headers["x-api-key"] = api_key
        self._transport = transport
        self._atransport = atransport
        self._client = None
        self._client_lock = threading.Lock()
        # One async pool per event loop: an httpx.AsyncClient is bound to the loop it ran on.
        self._aclients: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._info: dict[str, Any] | None = None
        self._errors = _error_classes()

    # -- the service's facts, asked once ----------------------------------------------------
    def info(self) -> dict[str, Any]:
        """The service's provider, durability, capabilities and codec policy (asked once per
        saver, before its first other call)."""
        if self._info is None:
            self._set_info(self._call("info", {}, idempotent=True))
        return self._info

    async def ainfo(self) -> dict[str, Any]:
        if self._info is None:
            self._set_info(await self._acall("info", {}, idempotent=True))
        return self._info

    def _set_info(self, info: Any) -> None:
        """Take the service's answer to ``info``: values are read, and puts held to size
        limits, under the service's codec policy, as its in-process saver reads and holds
        them."""
        policy = info.get("codec") if type(info) is dict else None
        if type(policy) is not dict or not _POLICY_KEYS <= policy.keys():
            raise WireFormatError(
                f"the service at {self.url} answers info without its codec policy "
                f"({', '.join(sorted(_POLICY_KEYS))}): it is older than this client",
                field="info",
            )
        if self._own_serde:
            serde = StoreSerializer(policy=policy)
            if self._extra_allowlist:
                serde = serde.with_msgpack_allowlist(self._extra_allowlist)
            self.serde = serde
        self._codec_limits = {k: policy[k] for k in ("CODEC_MAX_BYTES", "MAX_CHECKPOINT_BYTES")}
        self._info = info

    def with_allowlist(self, extra_allowlist: Any) -> RemoteSaver:
        """A shallow clone whose reader also revives ``extra_allowlist`` (LangGraph passes the
        graph's schema types when it compiles a graph): kept, so a reader made afresh from the
        service's policy keeps them too."""
        if not self._own_serde:
            return super().with_allowlist(extra_allowlist)
        extra = frozenset(tuple(entry) for entry in extra_allowlist)
        if extra <= self._extra_allowlist:
            return self
        clone = copy.copy(self)
        clone._extra_allowlist = self._extra_allowlist | extra
        clone.serde = self.serde.with_msgpack_allowlist(extra)
        return clone

    @property
    def provider(self) -> str:
        return self.info()["provider"]

    @property
    def durability(self) -> str:
        return self.info()["durability"]

    @property
    def capabilities(self) -> dict[str, Any]:
        return self.info()["capabilities"]

    # -- the pools ---------------------------------------------------------------------------
    def _limits(self):
        import httpx  # a process that opens no remote saver never loads it

        return httpx.Limits(
            max_connections=self.max_connections, max_keepalive_connections=self.max_connections
        )

    def _transport_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {"limits": self._limits(), "socket_options": NO_DELAY}
        if self.url.startswith("http://"):
            # No TLS to verify: building the default context loads the CA bundle, 30-80 ms
            # of a worker's first call (LangGraph's stream timing test saw it).
            options["verify"] = False
        return options

    def _sync_client(self):
        if self._client is None:
            import httpx

            with self._client_lock:
                if self._client is None:
                    self._client = httpx.Client(
                        base_url=self.url,
                        headers=self._headers,
                        timeout=self.timeout,
                        transport=self._transport
                        or httpx.HTTPTransport(**self._transport_options()),
                    )
        return self._client

    def _async_client(self):
        import httpx

        loop = asyncio.get_running_loop()
        client = self._aclients.get(loop)
        if client is None:
            client = self._aclients[loop] = httpx.AsyncClient(
                base_url=self.url,
                headers=self._headers,
                timeout=self.timeout,
                transport=self._atransport or httpx.AsyncHTTPTransport(**self._transport_options()),
            )
        return client

    def _async_gate(self) -> asyncio.Semaphore:
        # One per event loop, as the pools: a semaphore's waiters belong to one loop.
        loop = asyncio.get_running_loop()
        gate = self._agates.get(loop)
        if gate is None:
            gate = self._agates[loop] = asyncio.Semaphore(self.max_connections)
        return gate

    def close(self) -> None:
        """Close the sync pool (the async pools close with `aclose` on their loop)."""
        if self._client is not None:
            self._client.close()
            self._client = None

    async def aclose(self) -> None:
        client = self._aclients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.aclose()
        self.close()

    def __enter__(self) -> RemoteSaver:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    async def __aenter__(self) -> RemoteSaver:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.aclose()

    # -- one call: retries, errors ------------------------------------------------------------
    def _call(self, op: str, body: dict[str, Any], *, idempotent: bool) -> Any:
        import httpx

        if self._info is None and op in _READS_VALUES:
            self.info()
        data = _packed(op, body)
        deadline = time.monotonic() + self.retry_seconds
        attempt = 0
        while True:
            attempt += 1
            try:
                with self._gate:
                    response = self._sync_client().post(op, content=data)
            except httpx.TransportError as exc:
                wait = self._retry_wait(op, exc, attempt, deadline, idempotent)
                time.sleep(wait)
                continue
            wait = self._wait_for(response.status_code, response.headers, attempt, deadline)
            if wait is not None and (idempotent or response.status_code == 429):
                time.sleep(wait)
                continue
            return self._answer(op, response.status_code, response.headers, response.content)

    async def _acall(self, op: str, body: dict[str, Any], *, idempotent: bool) -> Any:
        import httpx

        if self._info is None and op in _READS_VALUES:
            await self.ainfo()
        data = _packed(op, body)
        deadline = time.monotonic() + self.retry_seconds
        attempt = 0
        while True:
            attempt += 1
            try:
                async with self._async_gate():
                    response = await self._async_client().post(op, content=data)
            except httpx.TransportError as exc:
                wait = self._retry_wait(op, exc, attempt, deadline, idempotent)
                await asyncio.sleep(wait)
                continue
            wait = self._wait_for(response.status_code, response.headers, attempt, deadline)
            if wait is not None and (idempotent or response.status_code == 429):
                await asyncio.sleep(wait)
                continue
            return self._answer(op, response.status_code, response.headers, response.content)

    def _retry_wait(
        self, op: str, exc: Exception, attempt: int, deadline: float, idempotent: bool
    ) -> float:
        """How long to wait before trying ``op`` again; StoreUnavailable when it may not be."""
        wait = _backoff(attempt)
        if not idempotent or time.monotonic() + wait > deadline:
            tried = (
                f"after {attempt} attempts over {self.retry_seconds:g} s"
                if idempotent
                else "once (it is not safe to repeat)"
            )
            raise errors.StoreUnavailable(
                f"the checkpoint store service at {self.url} did not answer {op} {tried}: "
                f"{type(exc).__name__}: {exc}",
                field="url",
            ) from exc
        return wait

    def _wait_for(self, status: int, headers: Any, attempt: int, deadline: float) -> float | None:
        """The wait before a retry of an answer that asks for one, None when it is final."""
        if status not in RETRY_STATUSES and status != 429:
            return None
        wait = _backoff(attempt)
        after = headers.get("retry-after")
        if after is not None:
            try:
                wait = max(wait, min(float(after), self.retry_seconds))
            except ValueError:
                pass
        if time.monotonic() + wait > deadline:
            return None
        return wait

    def _answer(self, op: str, status: int, headers: Any, content: bytes) -> Any:
        kind = (headers.get("content-type") or "").split(";", 1)[0].strip()
        if status == 200 and kind == CONTENT_TYPE:
            body = unpack_whole(content, f"the answer to {op}")
            if type(body) is not dict or "r" not in body:
                raise WireFormatError(f"the answer to {op} holds no result", field=op)
            return body["r"]
        raise self._error(op, status, kind, content)

    def _error(self, op: str, status: int, kind: str, content: bytes) -> Exception:
        error: dict[str, Any] = {}
        if kind == "application/json":
            try:
                error = (json.loads(content) or {}).get("error") or {}
            except (ValueError, AttributeError):
                error = {}
        code = str(error.get("code") or "")
        message = str(error.get("message") or "")
        field = error.get("field")
        if status in RETRY_STATUSES and not code:
            return errors.StoreUnavailable(
                f"the checkpoint store service at {self.url} answered {op} with {status} "
                f"for {self.retry_seconds:g} s",
                field="url",
            )
        if not code:
            return RemoteStoreError(
                f"the checkpoint store service at {self.url} answered {op} with {status} "
                f"{content[:200]!r}",
                code="unexpected_answer",
                status=status,
            )
        cls = self._errors.get((code, status))
        if cls is None:
            return RemoteStoreError(message, code=code, status=status, field=field)
        # What the store's typed error carries besides its message (a limit and size, where
        # an unreadable value is), when the service sent it.
        details = {k: error[k] for k in ("limit", "size", "where") if k in error}
        try:
            return cls(message, field=field, **details)
        except TypeError:
            return RemoteStoreError(message, code=code, status=status, field=field)

    # -- values ------------------------------------------------------------------------------
    def _dump(self, value: Any, where: str) -> list:
        """The serializer's pair for ``value``; a refusal names where the value was, as the
        store's savers do (and a lone surrogate, which LangGraph's msgpack would store as
        "?", is refused as it is there)."""
        try:
            type_, data = self.serde.dumps_typed(value)
            if type_ == "msgpack" and b"?" in data:
                ormsgpack.packb(value, default=_lg_default, option=_STRICT_MSGPACK)
                # Sets, dataclasses and named tuples reach LangGraph's encoder through its
                # default hook, which replaces a lone surrogate with "?": the walk finds it.
                if lone_surrogate_path(value) is not None:
                    raise ValueError("string contains surrogates")
        except (TypeError, ValueError, OverflowError) as exc:
            if where == "metadata":
                _refuse_as_the_store({"metadata": value})
            if "surrogates" in str(exc):
                # Worded as the store's savers word it, naming the place inside the value.
                reason = lone_surrogate_refusal(lone_surrogate_path(value))
                raise errors.CheckpointCodecError(
                    f"{where} holds a {type(value).__name__} the serializer cannot store: {reason}",
                    field=where,
                ) from exc
            raise errors.CheckpointCodecError(
                f"{where} holds a {type(value).__name__} the serializer cannot store: {exc}",
                field=where,
            ) from exc
        return [type_, data]

    def _load(self, pair: Any, what: str) -> Any:
        return self.serde.loads_typed(typed_pair(pair, what))

    def _tuple(self, raw: Any) -> CheckpointTuple | None:
        if raw is None:
            return None
        if type(raw) is not dict:
            raise WireFormatError("a checkpoint tuple is not a map", field="tuple")
        configurable = (raw.get("config") or {}).get("configurable") or {}
        # A stored value this reader refuses is named as the in-process saver names it.
        at = {
            "thread_id": str(configurable.get("thread_id")),
            "ns": configurable.get("checkpoint_ns") or "",
            "checkpoint_id": str(configurable.get("checkpoint_id")),
        }
        loads = self.serde.loads_typed
        checkpoint = dict(raw["checkpoint"])
        checkpoint["channel_values"] = {
            channel: decode_at(
                lambda p=stored_pair(pair, f"channel {channel!r}"): loads(p),
                part=("channel", channel),
                **at,
            )
            for channel, pair in (checkpoint.get("channel_values") or {}).items()
        }
        writes = [
            (
                task_id,
                channel,
                decode_at(
                    lambda p=stored_pair(pair, f"write to {channel!r}"): loads(p),
                    part=lambda c=channel, t=task_id: f"pending write {c!r} of task {t!r}",
                    **at,
                ),
            )
            for task_id, channel, pair in raw.get("pending_writes") or ()
        ]
        return CheckpointTuple(
            config=raw["config"],
            checkpoint=checkpoint,
            metadata=raw["metadata"],
            parent_config=raw.get("parent_config"),
            pending_writes=writes,
        )

    def _put_body(self, config, checkpoint, metadata, new_versions) -> dict[str, Any]:
        values = checkpoint.get("channel_values") or {}
        body = {k: v for k, v in checkpoint.items() if k != "channel_values"}
        body["channel_values"] = {
            channel: self._dump(values[channel], f"channel {channel!r}")
            for channel in new_versions
            if channel in values
        }
        return {
            "config": wire_config(config),
            "checkpoint": body,
            "metadata": self._dump(metadata, "metadata"),
            "new_versions": dict(new_versions),
        }

    def _writes_body(self, config, writes, task_id, task_path) -> dict[str, Any]:
        return {
            "config": wire_config(config),
            "writes": [
                [channel, self._dump(value, f"write to channel {channel!r}")]
                for channel, value in writes
            ],
            "task_id": task_id,
            "task_path": task_path,
        }

    def _sized(self, config: Any, body: dict[str, Any]) -> None:
        """Hold a put's or put_writes' encoded values to the service's CODEC_MAX_BYTES each
        and MAX_CHECKPOINT_BYTES together, as the store holds them: refused here, naming the
        limit and where, rather than sent to be refused as a body too large to read."""
        configurable = (config or {}).get("configurable") or {}
        if "writes" in body:
            pairs = body["writes"]
            checkpoint_id = configurable.get("checkpoint_id")
            what = f"the writes of task {body['task_id']!r}"
        else:
            pairs = list(body["checkpoint"]["channel_values"].items())
            checkpoint_id = body["checkpoint"].get("id")
            what = "this put's values"
        at = (
            str(configurable.get("thread_id")),
            configurable.get("checkpoint_ns") or "",
            str(checkpoint_id),
        )
        per_value = self._codec_limits["CODEC_MAX_BYTES"]
        per_checkpoint = self._codec_limits["MAX_CHECKPOINT_BYTES"]
        total = 0
        for channel, pair in pairs:
            size = len(pair[1])
            refuse_value_over(size, ("channel", channel), per_value)
            total += size
            refuse_checkpoint_over(total, ("channel", channel), at, per_checkpoint, what)

    @staticmethod
    def _list_body(config, filter, before, limit) -> dict[str, Any]:
        return {
            "config": wire_config(config),
            "filter": filter,
            "before": wire_config(before),
            "limit": limit,
        }

    def _history(self, raw: Any) -> dict[str, Any]:
        out = {}
        for channel, entry in (raw or {}).items():
            item: dict[str, Any] = {
                "writes": [
                    (task_id, ch, self._load(pair, f"write to {ch!r}"))
                    for task_id, ch, pair in entry.get("writes") or ()
                ]
            }
            if "seed" in entry:
                item["seed"] = self._load(entry["seed"], f"channel {channel!r}")
            out[channel] = item
        return out

    # -- LangGraph's interface, sync ----------------------------------------------------------
    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self._tuple(
            self._call("get_tuple", {"config": wire_config(config)}, idempotent=True)
        )

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        found = self._call("list", self._list_body(config, filter, before, limit), idempotent=True)
        for raw in found:
            yield self._tuple(raw)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        body = self._put_body(config, checkpoint, metadata, new_versions)
        self.info()  # its limits, once the values are encoded (a refusal there sends nothing)
        self._sized(config, body)
        return self._call("put", body, idempotent=True)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        body = self._writes_body(config, writes, task_id, task_path)
        self.info()
        self._sized(config, body)
        self._call("put_writes", body, idempotent=True)

    def delete_thread(self, thread_id: str) -> None:
        self._call("delete_thread", {"thread_id": thread_id}, idempotent=True)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self._call("delete_for_runs", {"run_ids": [str(r) for r in run_ids]}, idempotent=True)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        body = {"source": source_thread_id, "target": target_thread_id}
        self._call("copy_thread", body, idempotent=False)

    def prune(
        self, thread_ids: Sequence[str], *, strategy: str = "keep_latest", keep_last=None
    ) -> int:
        body = {"thread_ids": _id_list(thread_ids), "strategy": strategy, "keep_last": keep_last}
        return self._call("prune", body, idempotent=True)

    def get_delta_channel_history(self, *, config: RunnableConfig, channels: Sequence[str]):
        body = {"config": wire_config(config), "channels": list(channels)}
        return self._history(self._call("delta_history", body, idempotent=True))

    def get_durability(self, config: RunnableConfig) -> dict[str, str] | None:
        """``{"level", "at"}`` the store stamped the checkpoint with (see StoreSaver)."""
        return self._call("durability", {"config": wire_config(config)}, idempotent=True)

    def write_slots(self, thread_id: str) -> list[tuple] | None:
        """``(checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel)`` of each of the
        thread's pending writes, what ``pending_writes`` leaves out: an import's verify
        compares the task paths and indexes it wrote (`transfer.sources`). None when the
        service's store cannot say."""
        rows = self._call("write_slots", {"thread_id": thread_id}, idempotent=True)
        return None if rows is None else [tuple(row) for row in rows]

    # -- the store's extras a worker uses -----------------------------------------------------
    def mark_finished(self, thread_id: str) -> datetime:
        """Mark the thread finished (due its finished retention in force); its due time."""
        due = self._call("mark_finished", {"thread_id": thread_id}, idempotent=True)
        return datetime.fromisoformat(due)

    def unmark_finished(self, thread_id: str) -> bool:
        """Take the thread out of the finished set; True when it was there."""
        return self._call("unmark_finished", {"thread_id": thread_id}, idempotent=True)

    def declare_retention(
        self,
        thread_id: str,
        *,
        waiting_minutes: int | None = None,
        finished_minutes: int | None = None,
    ) -> dict[str, int | None]:
        """Record the thread's own (shorter) retention; the declaration as recorded."""
        body = {
            "thread_id": thread_id,
            "waiting_minutes": waiting_minutes,
            "finished_minutes": finished_minutes,
        }
        return self._call("retention", body, idempotent=True)

    # -- async twins --------------------------------------------------------------------------
    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        found = await self._acall("get_tuple", {"config": wire_config(config)}, idempotent=True)
        return self._tuple(found)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        body = self._list_body(config, filter, before, limit)
        for raw in await self._acall("list", body, idempotent=True):
            yield self._tuple(raw)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        body = self._put_body(config, checkpoint, metadata, new_versions)
        await self.ainfo()
        self._sized(config, body)
        return await self._acall("put", body, idempotent=True)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        body = self._writes_body(config, writes, task_id, task_path)
        await self.ainfo()
        self._sized(config, body)
        await self._acall("put_writes", body, idempotent=True)

    async def adelete_thread(self, thread_id: str) -> None:
        await self._acall("delete_thread", {"thread_id": thread_id}, idempotent=True)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        body = {"run_ids": [str(r) for r in run_ids]}
        await self._acall("delete_for_runs", body, idempotent=True)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        body = {"source": source_thread_id, "target": target_thread_id}
        await self._acall("copy_thread", body, idempotent=False)

    async def aprune(
        self, thread_ids: Sequence[str], *, strategy: str = "keep_latest", keep_last=None
    ) -> int:
        body = {"thread_ids": _id_list(thread_ids), "strategy": strategy, "keep_last": keep_last}
        return await self._acall("prune", body, idempotent=True)

    async def aget_delta_channel_history(self, *, config: RunnableConfig, channels: Sequence[str]):
        body = {"config": wire_config(config), "channels": list(channels)}
        return self._history(await self._acall("delta_history", body, idempotent=True))

    async def aget_durability(self, config: RunnableConfig) -> dict[str, str] | None:
        return await self._acall("durability", {"config": wire_config(config)}, idempotent=True)

    async def amark_finished(self, thread_id: str) -> datetime:
        due = await self._acall("mark_finished", {"thread_id": thread_id}, idempotent=True)
        return datetime.fromisoformat(due)

    async def aunmark_finished(self, thread_id: str) -> bool:
        return await self._acall("unmark_finished", {"thread_id": thread_id}, idempotent=True)

    # -- versions: the store's rule, computed here (no round trip) ----------------------------
    def get_next_version(self, current: str | int | float | None, channel: None = None) -> str:
        """As the store's savers: a zero-padded counter and a random tail, in write order."""
        return next_version(current)


# The calls whose answers hold stored values: the service's codec policy is asked first.
_READS_VALUES = frozenset({"get_tuple", "list", "delta_history"})
# The service's `info` answer's codec policy (`store_service.views.codec_policy`).
_POLICY_KEYS = frozenset(
    {"CODEC_MAX_BYTES", "MAX_CHECKPOINT_BYTES", "ALLOWED_MSGPACK_MODULES", "BLOCKED_TYPES"}
)
# Until the service has said, the serializer only encodes (a read asks first): LangGraph's
# default allowlist, and no object budget on a write, which the service checks each value
# against with its own settings.
_UNTIL_INFO = {
    "ALLOWED_MSGPACK_MODULES": None,
    "BLOCKED_TYPES": "warn",
    "CODEC_MAX_BYTES": None,
    "MAX_CHECKPOINT_BYTES": None,
}


def _packed(op: str, body: dict[str, Any]) -> bytes:
    """The request body; what the wire cannot carry (a lone surrogate in a thread id, a
    namespace, a channel or task name; an integer past 64 bits) is the caller's bad input,
    refused before any call, as the store's savers refuse it."""
    try:
        return pack(body)
    except (TypeError, ValueError, OverflowError) as exc:
        _refuse_as_the_store(body)
        where = lone_surrogate_path(body) if "surrogates" in str(exc) else None
        if where is not None:
            field = where.rsplit(".", 1)[-1].split("[", 1)[0] or op
            raise errors.InvalidCheckpointInput(
                f"{op}: {where.lstrip('.')} holds a lone surrogate, which is not UTF-8: "
                "no store can keep it",
                field=field,
            ) from None
        raise errors.InvalidCheckpointInput(
            f"{op}: the call's arguments cannot be sent: {exc}", field=op
        ) from None


def _refuse_as_the_store(body: dict[str, Any]) -> None:
    """Raise the error the store's savers raise for what the wire could not carry, from the
    store's own argument checks (Django-free), so a refusal names the same field; only on
    that failure's path, so a call that packs pays nothing."""
    from checkpoints.store.planning import check_key, check_step, check_thread_id, list_bounds
    from checkpoints.store.planning.metadata import json_metadata, validate_filter

    config, before = body.get("config"), body.get("before")
    if config is not None or before is not None:
        list_bounds(config, before)
    if "metadata" in body and type(body["metadata"]) is dict:
        check_step(json_metadata({}, body["metadata"]).get("step"), "metadata.step")
    if body.get("filter"):
        validate_filter(body["filter"])
    checkpoint = body.get("checkpoint")
    for versions in (
        body.get("new_versions"),
        checkpoint.get("channel_versions") if type(checkpoint) is dict else None,
    ):
        for channel in versions or ():
            check_key(channel, "channel")
    for write in body.get("writes") or ():
        check_key(write[0], "channel")
    for name in ("task_id", "task_path"):
        if body.get(name):
            check_key(body[name], name)
    if "thread_id" in body:
        check_thread_id(body["thread_id"])


def _id_list(ids: Any, field: str = "thread_ids") -> list[str]:
    """Thread ids as a list; a bare string refused as the store's savers refuse it."""
    if isinstance(ids, (str, bytes)):
        # "ab" is not the ids "a" and "b", nor surely the one id: refused as the store's
        # savers refuse it (a TypeError too), before any call.
        raise errors.InvalidArgumentType(
            f"{field} must be a list of ids, not a {type(ids).__name__} ({ids!r})", field=field
        )
    return [str(i) for i in ids]


def _backoff(attempt: int) -> float:
    step = min(_BACKOFF_MOST, _BACKOFF_FIRST * (2 ** (attempt - 1)))
    return step * (0.5 + random.random() / 2)
