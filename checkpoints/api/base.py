"""The base every store API view shares: auth, the saver, thread access, body limits."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.utils.functional import cached_property
from rest_framework.authentication import SessionAuthentication, TokenAuthentication
from rest_framework.generics import GenericAPIView
from rest_framework.parsers import JSONParser
from rest_framework.permissions import IsAuthenticated
from rest_framework.renderers import JSONRenderer

from checkpoints.api.pagination import StrictLimitOffsetPagination
from checkpoints.selectors import ThreadInfo, thread_get
from checkpoints.store.contract import StoreSaver
from checkpoints.store.planning import check_thread_id as store_check_thread_id
from checkpoints.store.registry import get_saver


class StoreAPIView(GenericAPIView):
    """Token first, so an anonymous caller gets 401 with ``WWW-Authenticate: Token``."""

    authentication_classes = [TokenAuthentication, SessionAuthentication]
    permission_classes = [IsAuthenticated]
    renderer_classes = [JSONRenderer]
    parser_classes = [JSONParser]
    pagination_class = StrictLimitOffsetPagination
    # No OPTIONS introspection: it would answer with DRF's form metadata, not our schema.
    metadata_class = None

    @cached_property
    def saver(self) -> StoreSaver:
        return get_saver()

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
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

    def thread(self, thread_id: str) -> ThreadInfo:
        """The thread named in the URL, when the requester may see it."""
        check_thread_id(thread_id)
        return thread_get(saver=self.saver, user=self.request.user, thread_id=thread_id)


def check_thread_id(thread_id: str, field: str = "thread_id") -> str:
    """The store's own rule, so every thread a graph can write is reachable here."""
    return store_check_thread_id(thread_id, field=field)
