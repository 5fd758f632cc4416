"""Request and response shapes of the thread API (they also feed the OpenAPI schema)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema_field
from rest_framework import serializers

from checkpoints.codec.render import MESSAGES_BEFORE, paged_values, plain_mapping, to_plain
from checkpoints.errors import InvalidCheckpointInput
from checkpoints.status import KINDS

# --- text fields ----------------------------------------------------------------------

NO_NUL = r"^[^\u0000]+$"
# LangGraph reserves channel names starting "__" (__start__, __pregel_tasks...).
CHANNEL_NAME = r"^([^_\u0000][^\u0000]*|_[^_\u0000][^\u0000]*|_)$"


class StrictText(serializers.RegexField):
    """A JSON string only, kept exactly: no number coercion, no whitespace trimming."""

    def __init__(self, regex, **kwargs):
        kwargs.setdefault("trim_whitespace", False)
        super().__init__(regex, **kwargs)

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictInteger(serializers.IntegerField):
    """A JSON integer only: "5", 5.0 and true are refused."""

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictBoolean(serializers.BooleanField):
    """A JSON boolean only: "yes" and 1 are refused."""

    default_error_messages = {"invalid": "Must be true or false."}

    def to_internal_value(self, data):
        if not isinstance(data, bool):
            self.fail("invalid")
        return data


def text(max_length: int = 512, **kwargs) -> StrictText:
    """A non-empty string without NUL (documented as such, so clients can know)."""
    return StrictText(NO_NUL, min_length=1, max_length=max_length, **kwargs)


def read_query(serializer_class, query) -> dict:
    """Validate query parameters; an empty value is an error, not "absent"."""
    fields = serializer_class().fields
    for name in fields:
        if query.get(name) == "":
            raise InvalidCheckpointInput(f"{name} must not be empty when given", field=name)
    reader = serializer_class(data=query)
    reader.is_valid(raise_exception=True)
    return reader.validated_data


# --- errors ---------------------------------------------------------------------------


class ErrorDetailSerializer(serializers.Serializer):
    code = serializers.CharField(help_text="Stable machine-readable code, e.g. thread_not_found.")
    message = serializers.CharField(help_text="What went wrong, naming the values involved.")
    field = serializers.CharField(required=False, help_text="The input at fault, when one is.")


class ErrorSerializer(serializers.Serializer):
    error = ErrorDetailSerializer()


_ERROR_TEXT = {
    400: "Bad input; `field` names it.",
    401: "Not authenticated (send a session cookie or `Authorization: Token <key>`).",
    403: "Authenticated but not allowed.",
    404: "No such thread or checkpoint, or one owned by another user.",
    405: "Method not allowed.",
    406: "Only JSON responses are offered.",
    409: "Conflict with the thread's current state.",
    413: "Request body larger than the server accepts.",
    415: "Request body must be JSON.",
}
READ_ERRORS = (400, 401, 403, 404, 405, 406)
WRITE_ERRORS = (*READ_ERRORS, 413, 415)


def error_responses(*codes: int) -> dict[int, OpenApiResponse]:
    return {c: OpenApiResponse(ErrorSerializer, description=_ERROR_TEXT[c]) for c in codes}


# --- threads --------------------------------------------------------------------------


class OwnerSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    username = serializers.CharField()


class OneOf(serializers.ChoiceField):
    """A string from a fixed list (an enum in the schema); another is refused naming every
    allowed value."""

    def __init__(self, values, **kwargs):
        self.values = tuple(values)
        kwargs.setdefault("help_text", "One of: " + ", ".join(self.values) + ".")
        super().__init__(choices=self.values, **kwargs)

    def to_internal_value(self, data):
        value = data if isinstance(data, str) else None
        if value not in self.values:
            raise serializers.ValidationError(
                f"{data!r} is not one of {', '.join(self.values)}", code="invalid_choice"
            )
        return value


def status_kinds() -> dict[str, str]:
    return KINDS


class ThreadSerializer(serializers.Serializer):
    """Reads a ``ThreadInfo``."""

    thread_id = serializers.CharField()
    owner = serializers.SerializerMethodField()
    status = serializers.ChoiceField(
        choices=list(status_kinds()),
        source="status.kind",
        help_text="What the next sweep does with it first (the status rule): due for "
        "deletion, else what claims it or needs a person (held, waiting on a human, failed, "
        "parked), else finished, recently written or idle.",
    )
    status_label = serializers.CharField(source="status.label")
    status_detail = serializers.CharField(
        source="status.detail",
        help_text="The status in words: when it is due, who holds it and why, what it asks.",
    )
    state = serializers.ChoiceField(
        choices=["waiting", "finished"], help_text="Whether it is marked finished."
    )
    version = serializers.IntegerField(help_text="Bumped by rollback; send it back in If-Match.")
    created_at = serializers.DateTimeField(allow_null=True)
    last_write_at = serializers.DateTimeField(allow_null=True)
    waiting_minutes = serializers.IntegerField(allow_null=True)
    finished_minutes = serializers.IntegerField(allow_null=True)
    finished_marked_at = serializers.DateTimeField(allow_null=True)
    finished_due_at = serializers.DateTimeField(allow_null=True)
    written_since_finished = serializers.BooleanField(
        help_text="Finished, written since: marked finished, then written again. The sweep "
        "spares it until it is marked again or idles past its waiting horizon."
    )

    def get_owner(self, info) -> OwnerSerializer(allow_null=True):  # type: ignore[valid-type]
        if info.owner is None:
            return None
        return {"id": info.owner.pk, "username": info.owner_name}


class ThreadDetailSerializer(ThreadSerializer):
    """One thread, with its checkpoint namespaces."""

    namespaces = serializers.ListField(
        child=serializers.CharField(allow_blank=True),
        help_text='"" is the root; each other one holds a subgraph\'s checkpoints.',
    )


# --- state snapshots ------------------------------------------------------------------


class SnapshotMetadataSerializer(serializers.Serializer):
    step = serializers.IntegerField(allow_null=True)
    timestamp = serializers.CharField(allow_null=True)
    source = serializers.CharField(allow_null=True)
    written_by = serializers.ListField(child=serializers.CharField())
    parents = serializers.ListField(child=serializers.CharField())
    last_event_sequence = serializers.IntegerField(allow_null=True, required=False)
    forked_from = serializers.DictField(
        required=False, help_text="On a fork's first checkpoint: {thread_id, checkpoint_id}."
    )
    rollback = serializers.DictField(
        required=False, help_text="On a rollback checkpoint: {target, replaced_head}."
    )


class DurabilitySerializer(serializers.Serializer):
    level = serializers.CharField()
    at = serializers.CharField(allow_null=True)


class MessagePageSerializer(serializers.Serializer):
    total = serializers.IntegerField(help_text="Messages the list holds.")
    start = serializers.IntegerField(help_text="Position of the first one shown (from 0).")
    end = serializers.IntegerField(help_text="Position after the last one shown.")
    next_before = serializers.IntegerField(
        allow_null=True,
        help_text=f"Pass as `{MESSAGES_BEFORE}` to read the older messages; null at the first.",
    )


# A snapshot's fields, in the order an answer lists them; `select` on the history names some.
SNAPSHOT_FIELDS = (
    "values",
    "pending_tasks",
    "pending_writes",
    "metadata",
    "config",
    "next",
    "channel_versions",
    "interrupts",
    "durability",
)
# `values` comes with the message pages that say how much of each message list it holds.
_WITH = {"values": ("values", "message_pages")}


class StateSnapshotSerializer(serializers.Serializer):
    """Reads a ``StateSnapshot``; every value is rendered as plain JSON.

    Context: ``select``, the fields to answer with (all by default); ``messages_before``,
    where each message list's page ends (its end by default).
    """

    values = serializers.DictField(
        help_text="Channel values as plain JSON (see API docs). A message list holds one page "
        "of its messages, the last ones unless `messages_before` says otherwise; "
        "`message_pages` says which."
    )
    message_pages = serializers.DictField(
        child=MessagePageSerializer(),
        help_text="Per message-list channel: how many messages it holds and which are shown.",
    )
    pending_tasks = serializers.ListField(child=serializers.DictField())
    pending_writes = serializers.ListField(child=serializers.DictField())
    metadata = SnapshotMetadataSerializer()
    config = serializers.DictField()
    next = serializers.ListField(child=serializers.CharField())
    channel_versions = serializers.DictField()
    interrupts = serializers.ListField(
        child=serializers.DictField(),
        help_text="Interrupts stored at this checkpoint: {value, id, node}.",
    )
    durability = DurabilitySerializer(
        allow_null=True,
        help_text="What the store guaranteed when it committed this checkpoint: "
        "level (memory, os, disk or replicated) and the time it was stamped.",
    )

    def to_representation(self, snapshot):
        # Read, not copied (StateSnapshot.as_dict deep-copies every message): rendering
        # changes nothing.
        if isinstance(snapshot, dict):
            data = snapshot
        else:
            data = {name: getattr(snapshot, name, None) for name in SNAPSHOT_FIELDS}
        wanted = self.context.get("select") or SNAPSHOT_FIELDS
        out: dict = {}
        for name in wanted:
            for key, value in zip(_WITH.get(name, (name,)), self._field(name, data), strict=True):
                out[key] = value
        return out

    def _field(self, name: str, data: dict) -> tuple:
        """The answer's entries for the snapshot field ``name`` (two for ``values``)."""
        if name == "values":
            shown, pages = paged_values(data.get("values"), self.context.get("messages_before"))
            return (
                plain_mapping(shown, path="values"),
                {str(channel): page.as_dict() for channel, page in pages.items()},
            )
        return (self._plain_fields(name, data),)

    def _plain_fields(self, name: str, data: dict):
        meta = data.get("metadata") or {}
        if name == "pending_tasks":
            return to_plain(list(data.get("pending_tasks") or []), path="pending_tasks")
        if name == "pending_writes":
            return to_plain(list(data.get("pending_writes") or []), path="pending_writes")
        if name == "metadata":
            return {
                "step": meta.get("step"),
                "timestamp": _text(meta.get("timestamp")),
                "source": meta.get("source"),
                "written_by": [str(w) for w in meta.get("written_by") or []],
                "parents": [str(p) for p in meta.get("parents") or []],
                "last_event_sequence": meta.get("last_event_sequence"),
                **{
                    key: to_plain(meta[key], path=f"metadata.{key}")
                    for key in ("forked_from", "rollback")
                    if key in meta
                },
            }
        if name == "config":
            return to_plain(data.get("config") or {}, path="config")
        if name == "next":
            return [str(n) for n in data.get("next") or []]
        if name == "channel_versions":
            return {str(k): str(v) for k, v in (data.get("channel_versions") or {}).items()}
        if name == "interrupts":
            return to_plain(list(data.get("interrupts") or []), path="interrupts")
        durability = data.get("durability")
        if not durability:
            return None
        return {"level": str(durability.get("level")), "at": _text(durability.get("at"))}


class HistoryItemSerializer(StateSnapshotSerializer):
    """One history item: the fields `select` names (all but `values` by default)."""

    def get_fields(self):
        fields = super().get_fields()
        for field in fields.values():
            field.required = False
        return fields


HISTORY_DEFAULT = tuple(name for name in SNAPSHOT_FIELDS if name != "values")
_SELECT_HELP = (
    "Comma-separated snapshot fields each item carries: "
    + ", ".join(f"`{n}`" for n in SNAPSHOT_FIELDS)
    + ". Default: all but `values` (a page of 100 checkpoints of a long thread holds its "
    "message list 100 times); `values` brings `message_pages` with it."
)
_NAME = "(" + "|".join(SNAPSHOT_FIELDS) + ")"


@extend_schema_field(
    {"type": "string", "pattern": f"^{_NAME}(,{_NAME})*$", "description": _SELECT_HELP}
)
class SelectField(serializers.CharField):
    """``select=values,metadata``: the snapshot fields to answer with, in that order."""

    def to_internal_value(self, data):
        names = [n.strip() for n in str(super().to_internal_value(data)).split(",")]
        unknown = [n for n in names if n not in SNAPSHOT_FIELDS]
        if unknown:
            raise InvalidCheckpointInput(
                f"select names {', '.join(repr(n) for n in unknown)}, not a snapshot field; "
                f"choose from {', '.join(SNAPSHOT_FIELDS)}",
                field="select",
            )
        return tuple(dict.fromkeys(names))


def _text(value):
    if value is None:
        return None
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


class HistoryPageSerializer(serializers.Serializer):
    results = HistoryItemSerializer(many=True)
    next_before = serializers.CharField(
        allow_null=True,
        help_text="Pass as `before` to read the next (older) page; null on the last page.",
    )
    next = serializers.URLField(
        allow_null=True, help_text="The next (older) page's URL; null on the last page."
    )


# --- time travel requests -------------------------------------------------------------

_THREAD_ID_HELP = "Any characters except NUL; at most 1024 bytes of UTF-8."


_NS_HELP = "A subgraph's checkpoint namespace (see the thread's `namespaces`); the root if absent."


def namespace_field() -> StrictText:
    return text(required=False, help_text=_NS_HELP)


_EXPECTED_HEAD_HELP = (
    "The head checkpoint id you read (the state endpoint's checkpoint_id): refused with 409 "
    "version_conflict when the thread's head has moved since, for instance by a graph's turn, "
    "which If-Match's version does not see."
)


class RollbackRequestSerializer(serializers.Serializer):
    checkpoint_id = text()
    checkpoint_ns = namespace_field()
    expected_head = text(1024, required=False, help_text=_EXPECTED_HEAD_HELP)


class ForkRequestSerializer(serializers.Serializer):
    checkpoint_id = text()
    checkpoint_ns = namespace_field()
    expected_head = text(1024, required=False, help_text=_EXPECTED_HEAD_HELP)
    new_thread_id = text(1024, required=False, allow_null=True, help_text=_THREAD_ID_HELP)


class ChannelWriteSerializer(serializers.Serializer):
    channel = StrictText(
        CHANNEL_NAME,
        max_length=512,
        help_text="A state channel; names starting with '__' are LangGraph's own.",
    )
    value = serializers.JSONField(
        allow_null=True, help_text="Any JSON value; stored as the channel's new value."
    )


MAX_SUPERSTEPS = 1000
_CHANNEL_WRITE_SCHEMA = {
    "type": "object",
    "properties": {
        "channel": {
            "type": "string",
            "maxLength": 512,
            "pattern": CHANNEL_NAME,
            "description": "A state channel; names starting with '__' are LangGraph's own.",
        },
        "value": {"description": "Any JSON value; becomes the channel's value."},
    },
    "required": ["channel", "value"],
}


@extend_schema_field(
    {
        "type": "array",
        "minItems": 1,
        "maxItems": MAX_SUPERSTEPS,
        "items": {"type": "array", "maxItems": MAX_SUPERSTEPS, "items": _CHANNEL_WRITE_SCHEMA},
        "description": (
            "Each superstep is a list of channel writes. With a registered graph they run "
            "as LangGraph's update_state (one update per superstep, through its reducers, "
            "one `update` checkpoint each); without one every write is applied as a "
            "last-value update (the channel holds the written value; when one superstep "
            "writes a channel twice, the later write wins), channels with a reducer are "
            "refused, and one `bulk_update` checkpoint is persisted at the end."
        ),
    }
)
class SuperstepsField(serializers.ListField):
    child = serializers.ListField(child=ChannelWriteSerializer(), max_length=MAX_SUPERSTEPS)


class BulkUpdateRequestSerializer(serializers.Serializer):
    supersteps = SuperstepsField(allow_empty=False, max_length=MAX_SUPERSTEPS)
    graph = serializers.CharField(
        required=False,
        max_length=200,
        help_text='A graph registered in CHECKPOINTS["GRAPHS"] whose reducers apply the writes.',
    )
    as_node = serializers.CharField(
        required=False,
        max_length=200,
        help_text="With the graph: the node the writes come from (LangGraph's as_node).",
    )
