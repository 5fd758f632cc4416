"""The base every store API view shares: auth, the saver, thread access, body limits."""

from __future__ import annotations

from django.apps import apps
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.utils.functional import cached_property
from drf_spectacular.openapi import AutoSchema
from rest_framework.authentication import SessionAuthentication, TokenAuthentication
from rest_framework.generics import GenericAPIView
from rest_framework.permissions import IsAuthenticated
from rest_framework.renderers import JSONRenderer

from checkpoints import audit, permissions
from checkpoints.api.errors import exception_handler
from checkpoints.api.limits import BoundedJSONParser, StrictTokenAuthentication
from checkpoints.api.pagination import StrictLimitOffsetPagination
from checkpoints.api.throttles import DestructiveRateThrottle
from checkpoints.codec.compression import reading_response
from checkpoints.errors import InvalidCheckpointInput
from checkpoints.selectors import ThreadInfo, thread_get
from checkpoints.store.contract import StoreSaver
from checkpoints.store.planning import check_key
from checkpoints.store.planning import check_thread_id as store_check_thread_id
from checkpoints.store.registry import get_saver
from checkpoints.timetravel.planning import STORE_WRITTEN_KEYS


class StoreAPIView(GenericAPIView):
    """Token first, so an anonymous caller gets 401 with ``WWW-Authenticate: Token``."""

    # Everything a view needs is set here, not in the project's REST_FRAMEWORK settings (the
    # docstring above is the schema's text for views without their own), so a host project
    # that includes ``checkpoints.urls`` gets the same API with none of them.

    authentication_classes = [StrictTokenAuthentication, SessionAuthentication]
    permission_classes = [IsAuthenticated]
    renderer_classes = [JSONRenderer]
    parser_classes = [BoundedJSONParser]
    pagination_class = StrictLimitOffsetPagination
    # Destructive views name a throttle_scope; its rate is the host's (none: no limit).
    throttle_classes = [DestructiveRateThrottle]
    # No OPTIONS introspection: it would answer with DRF's form metadata, not our schema.
    metadata_class = None
    # drf-spectacular's, whatever the host's DEFAULT_SCHEMA_CLASS is.
    schema = AutoSchema()

    def get_exception_handler(self):
        return exception_handler

    def get_authenticators(self):
        # Token auth reads rest_framework.authtoken's table; a host without that app gets
        # session auth only instead of a crash on every "Authorization: Token" header.
        return [
            auth()
            for auth in self.authentication_classes
            if not issubclass(auth, TokenAuthentication)
            or apps.is_installed("rest_framework.authtoken")
        ]

    @cached_property
    def saver(self) -> StoreSaver:
        return get_saver()

    def _check_body_size(self, request) -> None:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        # DRF's JSON parser reads the raw stream, skipping Django's body limit; check it here.
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        if limit is not None and length > limit:
            raise RequestDataTooBig(
                f"{length} bytes is over DATA_UPLOAD_MAX_MEMORY_SIZE ({limit} bytes)"
            )

    def dispatch(self, request, *args, **kwargs):
        # What the request's reads may decompress, all checkpoints together (a history page).
        with reading_response():
            return super().dispatch(request, *args, **kwargs)

    def initial(self, request, *args, **kwargs):
        # Every change this request makes is recorded as the API's, by the caller.
        self._audit_token = audit.bind(
            audit.Actor(
                origin="api",
                remote_addr=audit.client_address(request),
                resolve_user=lambda: request.user,
            )
        )
        super().initial(request, *args, **kwargs)
        self._check_body_size(request)

    def finalize_response(self, request, response, *args, **kwargs):
        token = getattr(self, "_audit_token", None)
        if token is not None:
            audit.unbind(token)
            self._audit_token = None
        return super().finalize_response(request, response, *args, **kwargs)

    def thread(self, thread_id: str, action: str | None = None) -> ThreadInfo:
        """The thread named in the URL, when the requester may see it (and do ``action``).

        Seeing comes first: a thread the requester may not see is a 404 whatever the action.
        """
        check_thread_id(thread_id)
        info = thread_get(saver=self.saver, user=self.request.user, thread_id=thread_id)
        if action is not None:
            owner_pk = info.owner.pk if info.owner is not None else None
            permissions.require(self.request.user, action, owner_pk=owner_pk)
        return info


def check_thread_id(thread_id: str, field: str = "thread_id") -> str:
    """The store's own rule, so every thread a graph can write is reachable here."""
    return store_check_thread_id(thread_id, field=field)


# Metadata keys the service writes itself and reads back as facts: the owner a thread is
# imported with (``user_id``), the durability stamp, what a rollback, a fork or a bulk update
# records. An HTTP client's metadata never holds them; LangGraph's own keys (run_id, step,
# source, parents, writes, thread_id...) are a graph's data and pass.
STORE_METADATA_KEYS = ("user_id", *STORE_WRITTEN_KEYS)


def client_metadata(value, field: str = "metadata") -> dict:
    """Metadata an HTTP client sends, checked: an object whose keys are none of
    `STORE_METADATA_KEYS` and whose keys and strings, at any depth, are text every store
    and every JSON answer can hold (no NUL, no lone surrogate); InvalidCheckpointInput
    naming the key otherwise."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidCheckpointInput(f"{field} must be an object", field=field)
    for key in value:
        # A NUL is stripped from keys by some stores: "user_id\x00" would land as user_id.
        if isinstance(key, str) and key.replace("\x00", "") in STORE_METADATA_KEYS:
            raise InvalidCheckpointInput(
                f"{field} key {key!r} is the service's own and is not taken from clients "
                f"(reserved: {', '.join(STORE_METADATA_KEYS)}); a thread's owner is the "
                "user who made it",
                field=f"{field}.{key.replace(chr(0), '')}",
            )
    # Walked without recursion (the body parser bounds the depth); paths quote keys with
    # repr, so a refused key shows escaped, never raw in the answer.
    pending: list[tuple[str, object]] = [(field, value)]
    while pending:
        path, item = pending.pop()
        if isinstance(item, str):
            check_key(item, path)
        elif isinstance(item, dict):
            for key, child in item.items():
                check_key(key, f"{path} key {key!r}")
                pending.append((f"{path}[{key!r}]", child))
        elif isinstance(item, list):
            pending.extend((f"{path}[{i}]", child) for i, child in enumerate(item))
    return value
