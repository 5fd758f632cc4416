"""The Platform's paging headers on a search's answer.

langgraph-api's rule (``utils.get_pagination_headers`` over its stores' search): when
more match than the page reaches, ``X-Pagination-Next`` is the next page's offset and
``X-Pagination-Total`` that offset plus one (a lower bound, all a paged store query
knows); on the last page, ``X-Pagination-Total`` is the offset plus the page's length and
there is no ``X-Pagination-Next``. Nothing here imports Django or DRF: the project's
settings read ``EXPOSED``.
"""

from __future__ import annotations

TOTAL = "X-Pagination-Total"
NEXT = "X-Pagination-Next"
# What a browser client may read of an answer from another origin (CORS_EXPOSE_HEADERS).
EXPOSED = (TOTAL, NEXT, "content-location")


def paging_headers(shown: int, offset: int, limit: int, matched: int) -> dict[str, str]:
    """The headers of a page of ``shown`` items from ``offset``, ``matched`` being how
    many the search found."""
    end = offset + limit
    if matched > end:
        return {TOTAL: str(end + 1), NEXT: str(end)}
    return {TOTAL: str(offset + shown)}
