"""Which checkpoint store an admin page reads: the deployment's, or another ORM database.

The choice is made once per request (`with_store_choice`, around each admin view and its
rendering) and read by every query and link of the page (`store_alias`, `store_saver`,
`keep_store`), so no page mixes rows of two databases.
"""

from __future__ import annotations

import functools
import threading
from contextvars import ContextVar
from urllib.parse import parse_qs, urlencode

from django.conf import settings
from django.db import connections
from django.http import Http404

from checkpoints.admin.value_cut import page_previews
from checkpoints.codec.compression import reading_response
from checkpoints.errors import CheckpointConfigError
from checkpoints.models import Thread
from checkpoints.store.registry import dialect_saver, get_saver

PROVIDER_PARAM = "provider"

# The store the current admin request reads (a database alias), set by `with_store_choice`
# around each admin view and its rendering; None means the deployment's own store.
_chosen: ContextVar[str | None] = ContextVar("checkpoints_admin_store", default=None)
_tables_seen: dict[tuple[str, str], bool] = {}
_tables_lock = threading.Lock()


def deployment_alias() -> str:
    """The database alias the deployment's ORM saver uses ("default" for other providers)."""
    return get_saver().db_alias or "default"


def store_alias() -> str:
    """The alias the current admin page reads: the chosen store, else the deployment's."""
    return _chosen.get() or deployment_alias()


def store_saver():
    """The saver for `store_alias()`, so decoded values come from the store the rows did."""
    chosen = _chosen.get()
    if chosen is None or chosen == deployment_alias():
        return get_saver()
    return get_saver(dialect_saver(chosen).provider, using=chosen)


def _has_tables(alias: str) -> bool:
    key = (alias, str(connections[alias].settings_dict.get("NAME")))
    if key in _tables_seen:
        return _tables_seen[key]
    try:
        with connections[alias].cursor() as cursor:
            found = Thread._meta.db_table in connections[alias].introspection.table_names(cursor)
    except Exception:  # noqa: BLE001 - a database that cannot answer is simply not offered
        # Not remembered: it may answer on the next page load.
        return False
    with _tables_lock:
        _tables_seen[key] = found
    return found


def store_choices() -> list[tuple[str, str]]:
    """(alias, label) of every ORM database holding the checkpoint tables, deployment's first.

    The deployment's own ORM store is offered without asking its database (its saver already
    relies on the tables); other aliases are asked once whether they hold the tables.
    """
    own = get_saver().db_alias
    aliases = ([own] if own else []) + [a for a in settings.DATABASES if a != own]
    choices = []
    for alias in aliases:
        try:
            provider = dialect_saver(alias).provider
        except CheckpointConfigError:
            continue  # a database no ORM saver speaks holds no store
        if alias != own and not _has_tables(alias):
            continue
        choices.append((alias, f"{provider} ({alias})"))
    return choices


def requested_store(request) -> str | None:
    """The alias named by ``provider`` in the query, directly or in the preserved filters."""
    named = request.GET.get(PROVIDER_PARAM)
    if named is None:
        preserved = parse_qs(request.GET.get("_changelist_filters", ""))
        named = (preserved.get(PROVIDER_PARAM) or [None])[-1]
    return named


def with_store_choice(view, *, lenient: bool = False):
    """Run an admin view (and render its page) against the store the request names.

    An unknown store is a 404, except where ``lenient`` (the change lists, whose provider
    filter turns it into Django's invalid-filter redirect).
    """

    @functools.wraps(view)
    def wrapped(request, *args, **kwargs):
        named = requested_store(request)
        chosen = None
        if named is not None:
            if named in dict(store_choices()):
                chosen = named
            elif not lenient:
                raise Http404(f"no checkpoint store {named!r} is available to this admin")
        token = _chosen.set(chosen)
        try:
            # One page's reads share a budget of decompressed bytes (MAX_RESPONSE_BYTES), and
            # its values one allowance of characters shown.
            with reading_response(), page_previews():
                response = view(request, *args, **kwargs)
                # Read-only fields are computed while the page renders: do that here, in scope.
                if hasattr(response, "render") and not getattr(response, "is_rendered", True):
                    response.render()
            return response
        finally:
            _chosen.reset(token)

    return wrapped


def keep_store(url: str, *, changelist: bool = False) -> str:
    """``url`` carrying the chosen store, so the next page reads the same database."""
    chosen = _chosen.get()
    if chosen is None:
        return url
    if changelist:
        query = urlencode({PROVIDER_PARAM: chosen})
    else:
        query = urlencode({"_changelist_filters": urlencode({PROVIDER_PARAM: chosen})})
    return f"{url}{'&' if '?' in url else '?'}{query}"
