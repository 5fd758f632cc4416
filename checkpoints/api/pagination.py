"""Limit/offset pagination that refuses bad numbers instead of silently using defaults."""

from __future__ import annotations

from rest_framework.pagination import LimitOffsetPagination

from checkpoints.errors import InvalidCheckpointInput

MAX_PAGE = 500
DEFAULT_PAGE = 50
# The largest OFFSET the databases take (a signed 64-bit integer).
MAX_OFFSET = 2**63 - 1


class StrictLimitOffsetPagination(LimitOffsetPagination):
    """``limit`` 1..MAX_PAGE and ``offset`` >= 0, else a 400 naming the parameter."""

    max_limit = MAX_PAGE
    # Our own default, so a page is cut even where the host sets no global PAGE_SIZE.
    default_limit = DEFAULT_PAGE

    def _number(self, request, name: str, minimum: int, maximum: int):
        raw = request.query_params.get(name)
        if raw is None:
            return None
        # Length first: int() refuses more than 4300 digits with a ValueError of its own.
        digits = raw.isascii() and raw.isdigit() and len(raw) <= len(str(maximum))
        if not digits or not (minimum <= int(raw) <= maximum):
            raise InvalidCheckpointInput(
                f"{name} must be a whole number {minimum}..{maximum}, got {raw[:100]!r}",
                field=name,
            )
        return int(raw)

    def paginate_queryset(self, queryset, request, view=None):
        # A lazily read page source may read its page and count in one statement.
        read_window = getattr(queryset, "read_window", None)
        if read_window is not None:
            read_window(self.get_offset(request), self.get_limit(request))
        return super().paginate_queryset(queryset, request, view)

    def get_limit(self, request):
        limit = self._number(request, self.limit_query_param, 1, self.max_limit)
        return self.default_limit if limit is None else limit

    def get_offset(self, request):
        return self._number(request, self.offset_query_param, 0, MAX_OFFSET) or 0

    def get_schema_operation_parameters(self, view):
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.limit_query_param:
                parameter["schema"].update({"minimum": 1, "maximum": self.max_limit})
            elif parameter["name"] == self.offset_query_param:
                parameter["schema"].update({"minimum": 0, "maximum": MAX_OFFSET})
        return parameters
