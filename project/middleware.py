"""The store service's calls on a short path through the service's middleware.

`/store/v1/<call>` is a machine API (the remote saver's: token-authenticated msgpack, a few
calls per graph step), and the service's whole stack cost it about as much as the call's own
work. First in ``MIDDLEWARE``, `StoreServicePath` hands those requests to a chain of their
own and every other path to the rest of the stack, unchanged.

Kept on the short path: SecurityMiddleware (the https redirect and its headers behind
``DJANGO_HTTPS``), CommonMiddleware (``ALLOWED_HOSTS``, refused user agents), Prometheus's
request metrics, and everything the view does itself: token auth with the token-guessing
lockout, the per-token throttle, the body limits, the typed JSON errors, the audit of
destructive calls. Django still logs every 4xx and 5xx answer (``django.request``).

Left out, each for a reason that holds on this path:

* sessions, authentication, messages, CSRF: the view authenticates a token only (no session
  is read), is exempt from CSRF as every DRF view, and sends no messages;
* CORS: the service answers cross-origin requests on ``/langgraph/`` only
  (``CORS_URLS_REGEX``);
* WhiteNoise: it serves ``STATIC_URL`` only;
* X-Frame-Options and the CSP: headers for pages a browser renders, and the answers here are
  msgpack or JSON;
* django-structlog's request lines: two log records a call (at thousands of calls a second);
  the call's refusals are still logged by Django, and destructive calls audited;
* django-axes: it acts on the admin's sign-in only (tokens have their own lockout).
"""

from __future__ import annotations

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.core.handlers.exception import convert_exception_to_response
from django.urls import resolve
from django.utils.module_loading import import_string

PREFIX = "/store/v1/"
# Outermost first, as in MIDDLEWARE.
CHAIN = (
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django_prometheus.middleware.PrometheusAfterMiddleware",
)


def _view(request):
    match = resolve(request.path_info)
    request.resolver_match = match
    response = match.func(request, *match.args, **match.kwargs)
    # DRF's refusals are template-style responses, rendered by Django's handler after the
    # view: here too, before any middleware reads the content.
    render = getattr(response, "render", None)
    if callable(render):
        response = render()
    return response


def short_chain():
    """The sync handler `/store/v1/` requests take: `CHAIN` around the URL's view, each
    layer turning an exception into Django's answer for it, as the full stack does."""
    handler = convert_exception_to_response(_view)
    for path in reversed(CHAIN):
        handler = convert_exception_to_response(import_string(path)(handler))
    return handler


class StoreServicePath:
    """`/store/v1/` through `short_chain`, everything else through the rest of MIDDLEWARE."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        self.short = short_chain()
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request):
        if self.is_async:
            return self.__acall__(request)
        if request.path_info.startswith(PREFIX):
            return self.short(request)
        return self.get_response(request)

    async def __acall__(self, request):
        if request.path_info.startswith(PREFIX):
            # The view is sync: one hop to a thread, as Django makes for a sync view.
            return await sync_to_async(self.short, thread_sensitive=True)(request)
        return await self.get_response(request)
