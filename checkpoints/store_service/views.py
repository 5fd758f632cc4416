"""`/store/v1/<call>`: the remote saver's calls, each through the deployment's saver.

One view, one POST per saver call (`checkpoints.remote.wire` has the format). Everything
goes through the same store contract as an in-process saver (`get_saver()`), with the
serializer swapped for `WireSerde` so values are stored and read back as the client's
bytes. Access is `access.Caller`'s; errors are the API's typed JSON (never a 500 for bad
input); destructive calls are audited as the API's.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from typing import Any

from django.apps import apps
from django.core.exceptions import RequestDataTooBig
from django.core.signals import setting_changed
from django.http import HttpResponse
from django.utils.module_loading import import_string
from rest_framework import exceptions
from rest_framework.parsers import BaseParser

from checkpoints import audit, threads
from checkpoints.api.base import StoreAPIView
from checkpoints.codec.compression import refuse_large_checkpoint
from checkpoints.codec.serde import blocked_types_raise, configured_msgpack_allowlist
from checkpoints.conf import setting
from checkpoints.errors import CheckpointConfigError, CheckpointStoreError, InvalidCheckpointInput
from checkpoints.models import Thread
from checkpoints.remote.wire import (
    CONTENT_TYPE,
    ENVELOPE_BYTES,
    WireFormatError,
    field,
    pack,
    unpack_whole,
)
from checkpoints.store.planning import config_keys
from checkpoints.store.registry import get_saver
from checkpoints.store_service.access import Caller
from checkpoints.store_service.auth import StoreServiceAuthentication, StoreServiceThrottle
from checkpoints.store_service.values import check_value, service_serde, value_pair

# The attributes of the store's typed errors an answer carries besides code, message, field.
ERROR_DETAILS = ("limit", "size", "where")

_savers: dict[str, Any] = {}
_savers_lock = threading.Lock()


def service_saver() -> Any:
    """The deployment's saver with `WireSerde`, one per process (its caches are shared)."""
    saver = _savers.get("saver")
    if saver is None:
        with _savers_lock:
            saver = _savers.get("saver")
            if saver is None:
                base = get_saver()
                saver = copy.copy(base)
                saver.serde = service_serde(base.serde)
                _savers["saver"] = saver
    return saver


def forget_service_saver() -> None:
    """Build the service's saver afresh at the next call (its store was reset, or its
    settings changed): a new saver checks the store's format generation again."""
    _savers.clear()


def _forget(*, setting: str, **kwargs: Any) -> None:
    if setting in ("CHECKPOINTS", "DATABASES"):
        forget_service_saver()


setting_changed.connect(_forget)


def body_limit() -> int | None:
    """The largest request body: one checkpoint's values plus the envelope around them."""
    most = setting("MAX_CHECKPOINT_BYTES")
    return None if most is None else most + ENVELOPE_BYTES


def codec_policy() -> dict[str, Any]:
    """What a worker's reader follows, as this service's in-process reader does: the object
    budget's limits, the size limits of a put, the msgpack allowlist the deployment set (None:
    LangGraph's default of the worker's own process, as of this one's) and BLOCKED_TYPES."""
    configured = setting("ALLOWED_MSGPACK_MODULES")
    return {
        "CODEC_MAX_BYTES": setting("CODEC_MAX_BYTES"),
        "MAX_CHECKPOINT_BYTES": setting("MAX_CHECKPOINT_BYTES"),
        "ALLOWED_MSGPACK_MODULES": (
            configured
            if configured is None or configured is True
            else [list(entry) for entry in configured_msgpack_allowlist(configured)]
        ),
        "BLOCKED_TYPES": "raise" if blocked_types_raise() else "warn",
    }


class MsgpackParser(BaseParser):
    """The wire's body, read whole up to `body_limit` and held to one msgpack document."""

    media_type = CONTENT_TYPE

    def parse(self, stream, media_type=None, parser_context=None):
        request = (parser_context or {}).get("request")
        encoding = request.META.get("HTTP_CONTENT_ENCODING", "identity") if request else ""
        if encoding.strip().lower() not in ("", "identity"):
            raise exceptions.UnsupportedMediaType(
                f"content-encoding {encoding}: /store/v1/ takes identity bodies only"
            )
        limit = body_limit()
        raw = stream.read(limit + 1) if limit is not None else stream.read()
        if limit is not None and len(raw) > limit:
            raise RequestDataTooBig(
                f"the body is over {limit} bytes: MAX_CHECKPOINT_BYTES plus the envelope"
            )
        body = unpack_whole(raw or b"")
        if type(body) is not dict:
            raise WireFormatError("the request body is not a map", field="body")
        return body


def _config(body: dict, name: str = "config", *, optional: bool = False) -> dict | None:
    config = field(body, name, dict, optional=optional)
    if config is None:
        return None
    configurable = config.get("configurable")
    if configurable is not None and type(configurable) is not dict:
        raise WireFormatError(f"{name}.configurable is not a map", field=name)
    return config


def _thread_of(config: dict | None, name: str = "config") -> str:
    thread_id = ((config or {}).get("configurable") or {}).get("thread_id")
    if thread_id is None:
        raise InvalidCheckpointInput(
            f"{name}['configurable']['thread_id'] is required", field="thread_id"
        )
    return str(thread_id) if isinstance(thread_id, int) else thread_id


def _tuple(tup: Any, serde: Any) -> dict | None:
    if tup is None:
        return None
    checkpoint = dict(tup.checkpoint)
    checkpoint["channel_values"] = {
        channel: value_pair(value, serde, channel)
        for channel, value in (checkpoint.get("channel_values") or {}).items()
    }
    return {
        "config": tup.config,
        "checkpoint": checkpoint,
        "metadata": tup.metadata,
        "parent_config": tup.parent_config,
        "pending_writes": [
            [task_id, channel, value_pair(value, serde, channel)]
            for task_id, channel, value in tup.pending_writes or ()
        ],
    }


def _ids(body: dict, name: str) -> list[str]:
    ids = body.get(name)
    if isinstance(ids, (str, bytes)):
        raise InvalidCheckpointInput(
            f"{name} must be a list of ids, not a str ({ids!r})", field=name
        )
    if type(ids) is not list or not all(isinstance(i, str) for i in ids):
        raise WireFormatError(f"{name} is not a list of strings", field=name)
    return ids


def _retention_call(path: str) -> Callable[..., Any]:
    # Retention is an app of its own that uses this one: its rules are named, not imported.
    if not apps.is_installed("retention"):
        raise CheckpointConfigError(
            "the retention app is not installed: finish marks and declared retention are its",
            field="retention",
        )
    return import_string(path)


class StoreServiceView(StoreAPIView):
    """POST ``/store/v1/<call>``: one saver call."""

    # x-api-key or Authorization: Token, cached per process, lockout and throttle counted in
    # one round trip (auth.py says what that keeps and what it bounds).
    authentication_classes = [StoreServiceAuthentication]
    parser_classes = [MsgpackParser]
    throttle_classes = [StoreServiceThrottle]
    pagination_class = None
    schema = None

    def _check_body_size(self, request) -> None:
        limit = body_limit()
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        if limit is not None and length > limit:
            raise RequestDataTooBig(
                f"{length} bytes is over {limit} bytes (MAX_CHECKPOINT_BYTES plus the envelope)"
            )

    def perform_content_negotiation(self, request, force=False):
        # Answers are msgpack (made here), refusals the API's JSON, whatever Accept says.
        return super().perform_content_negotiation(request, force=True)

    def post(self, request, call: str):
        handler = getattr(self, f"call_{call}", None)
        if handler is None:
            raise exceptions.NotFound(f"/store/v1/ has no call {call!r}")
        body = request.data
        saver = service_saver()
        result = handler(saver, Caller(request.user, saver), body)
        return HttpResponse(pack({"r": result}), content_type=CONTENT_TYPE)

    # -- facts ---------------------------------------------------------------------------------
    def call_info(self, saver, caller: Caller, body: dict) -> dict:
        return {
            "provider": saver.provider,
            "durability": saver.durability,
            "capabilities": {
                "records_owners": saver.records_owners,
                "process_local": saver.process_local,
                "can_park": saver.can_park,
                "supports_idle_sweep": saver.supports_idle_sweep,
            },
            "max_body_bytes": body_limit(),
            "codec": codec_policy(),
        }

    # -- reads ---------------------------------------------------------------------------------
    def call_get_tuple(self, saver, caller: Caller, body: dict) -> dict | None:
        config = caller.scrub(_config(body))
        caller.may_read(_thread_of(config), config)
        return _tuple(saver.get_tuple(config), saver.serde.inner)

    def call_list(self, saver, caller: Caller, body: dict) -> list:
        config = caller.scrub(_config(body, optional=True))
        filter_ = field(body, "filter", dict, optional=True)
        before = _config(body, "before", optional=True)
        limit = field(body, "limit", int, optional=True)
        thread_id = ((config or {}).get("configurable") or {}).get("thread_id")
        serde = saver.serde.inner
        if thread_id is not None:
            caller.may_read(str(thread_id), config)
            found = saver.list(config, filter=filter_, before=before, limit=limit)
            return [_tuple(t, serde) for t in found]
        if caller.reads_any:
            found = saver.list(config, filter=filter_, before=before, limit=limit)
            return [_tuple(t, serde) for t in found]
        if not caller.owned:
            return []
        owner_pk = caller.owner_pk(caller.user)
        mine = set(
            Thread.objects.using(saver.db_alias)
            .filter(owner_id=owner_pk)
            .values_list("thread_id", flat=True)
            if owner_pk is not None
            else ()
        )
        out = []
        for tup in saver.list(config, filter=filter_, before=before):
            if tup.config["configurable"]["thread_id"] in mine:
                out.append(_tuple(tup, serde))
                if limit is not None and len(out) >= limit:
                    break
        return out

    def call_delta_history(self, saver, caller: Caller, body: dict) -> dict:
        config = caller.scrub(_config(body))
        channels = field(body, "channels", list)
        caller.may_read(_thread_of(config), config)
        found = saver.get_delta_channel_history(config=config, channels=channels)
        serde = saver.serde.inner
        out = {}
        for channel, entry in found.items():
            item: dict[str, Any] = {
                "writes": [
                    [task_id, ch, value_pair(value, serde, ch)]
                    for task_id, ch, value in entry.get("writes") or ()
                ]
            }
            if "seed" in entry:
                item["seed"] = value_pair(entry["seed"], serde, channel)
            out[channel] = item
        return out

    def call_durability(self, saver, caller: Caller, body: dict) -> dict | None:
        config = caller.scrub(_config(body))
        caller.may_read(_thread_of(config), config)
        return saver.get_durability(config)

    def call_write_slots(self, saver, caller: Caller, body: dict) -> list | None:
        thread_id = field(body, "thread_id", str)
        caller.may_read(thread_id)
        slots = getattr(saver, "write_slots", None)
        return None if slots is None else [list(row) for row in slots(thread_id)]

    # -- writes --------------------------------------------------------------------------------
    def call_put(self, saver, caller: Caller, body: dict) -> dict:
        config = caller.scrub(_config(body))
        checkpoint = dict(field(body, "checkpoint", dict))
        new_versions = field(body, "new_versions", dict)
        values = checkpoint.get("channel_values") or {}
        if type(values) is not dict:
            raise WireFormatError("checkpoint.channel_values is not a map", field="checkpoint")
        checkpoint["channel_values"] = {
            channel: check_value(pair, f"channel {channel!r}") for channel, pair in values.items()
        }
        metadata = saver.serde.sent(check_value(body.get("metadata"), "metadata"))
        thread_id = _thread_of(config)
        # The sizes the put would refuse, refused before the thread is claimed.
        refuse_large_checkpoint(
            sum(len(v.data) for v in checkpoint["channel_values"].values()),
            "channel_values",
            (thread_id, "", str(checkpoint.get("id") or "")),
        )
        # The store's own key checks first: a refused call claims no thread.
        config_keys(config)
        caller.claim(thread_id, config)
        return saver.put(config, checkpoint, metadata, new_versions)

    def call_put_writes(self, saver, caller: Caller, body: dict) -> None:
        config = caller.scrub(_config(body))
        writes = field(body, "writes", list)
        task_id = field(body, "task_id", str)
        task_path = field(body, "task_path", str, optional=True) or ""
        checked = []
        for i, write in enumerate(writes):
            if type(write) is not list or len(write) != 2:
                raise WireFormatError(f"writes[{i}] is not a [channel, value] pair", field="writes")
            checked.append((write[0], check_value(write[1], f"write to channel {write[0]!r}")))
        thread_id = _thread_of(config)
        refuse_large_checkpoint(
            sum(len(v.data) for _, v in checked),
            "writes",
            (thread_id, "", str((config.get("configurable") or {}).get("checkpoint_id") or "")),
            f"the writes of task {task_id!r}",
        )
        # The store's own key checks first: a refused call claims no thread.
        config_keys(config, need_checkpoint=True)
        caller.claim(thread_id, config)
        saver.put_writes(config, checked, task_id, task_path)

    # -- destructive ---------------------------------------------------------------------------
    def call_delete_thread(self, saver, caller: Caller, body: dict) -> None:
        thread_id = field(body, "thread_id", str)
        if caller.may_destroy(thread_id):
            threads.delete_thread(saver=saver, thread_id=thread_id)

    def call_delete_for_runs(self, saver, caller: Caller, body: dict) -> None:
        run_ids = _ids(body, "run_ids")
        caller.require_staff("delete")
        saver.delete_for_runs(run_ids)
        if run_ids:
            audit.record("delete_runs", provider=saver.provider, detail={"run_ids": run_ids})

    def call_copy_thread(self, saver, caller: Caller, body: dict) -> None:
        source = field(body, "source", str)
        target = field(body, "target", str)
        caller.may_destroy(source, "fork")
        caller.may_read(target)
        saver.copy_thread(source, target)
        audit.record(
            "copy_thread", thread_id=target, provider=saver.provider, detail={"source": source}
        )

    def call_prune(self, saver, caller: Caller, body: dict) -> int:
        thread_ids = _ids(body, "thread_ids")
        strategy = field(body, "strategy", str)
        keep_last = field(body, "keep_last", int, optional=True)
        mine = [t for t in thread_ids if caller.may_destroy(t)]
        # The arguments are checked even when no thread is the caller's to prune.
        deleted = saver.prune(mine, strategy=strategy, keep_last=keep_last)
        for thread_id in mine:
            audit.record(
                "prune",
                thread_id=thread_id,
                provider=saver.provider,
                detail={"strategy": strategy, "keep_last": keep_last},
            )
        return deleted

    # -- the store's extras a worker uses ------------------------------------------------------
    def call_mark_finished(self, saver, caller: Caller, body: dict) -> str:
        thread_id = field(body, "thread_id", str)
        caller.claim(thread_id, None)
        mark = _retention_call("retention.runs.mark_finished_by")
        return mark(saver, thread_id, caller.user).due_at.isoformat()

    def call_unmark_finished(self, saver, caller: Caller, body: dict) -> bool:
        thread_id = field(body, "thread_id", str)
        caller.claim(thread_id, None)
        return _retention_call("retention.runs.unmark_finished")(saver, thread_id)

    def call_retention(self, saver, caller: Caller, body: dict) -> dict:
        thread_id = field(body, "thread_id", str)
        waiting = field(body, "waiting_minutes", int, optional=True)
        finished = field(body, "finished_minutes", int, optional=True)
        caller.claim(thread_id, None)
        declared = _retention_call("retention.policy.declare_retention")(
            saver, thread_id, waiting_minutes=waiting, finished_minutes=finished
        )
        return {
            "waiting_minutes": declared.waiting_minutes,
            "finished_minutes": declared.finished_minutes,
        }

    def handle_exception(self, exc):
        response = super().handle_exception(exc)
        # The store's typed errors keep what they carry beyond a message (a limit and size,
        # where an unreadable value is), so the client raises them as the saver would.
        error = response.data.get("error") if isinstance(response.data, dict) else None
        if isinstance(exc, CheckpointStoreError) and isinstance(error, dict):
            for name in ERROR_DETAILS:
                value = getattr(exc, name, None)
                if value:
                    error[name] = value
        return response

    def get_throttles(self):
        # Not the API's scoped throttle: every call of a token counts, reads included.
        return [throttle() for throttle in self.throttle_classes]
