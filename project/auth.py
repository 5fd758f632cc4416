"""The admin sign-in's lockout (django-axes): its backend and the page a locked sign-in gets."""

from __future__ import annotations

from axes.backends import AxesStandaloneBackend
from axes.helpers import get_client_username, get_cool_off, get_failure_limit
from django.conf import settings
from django.contrib import admin
from django.template.response import TemplateResponse


class LoginLockoutBackend(AxesStandaloneBackend):
    """Refuse a locked-out user name and address; a call without a request is let through.

    Every sign-in over HTTP passes its request (the admin's form does); a call without one
    (``Client.login``, a management command) has no address to lock and no caller to guess.
    """

    def authenticate(self, request, username=None, password=None, **kwargs):
        if request is None:
            return None
        return super().authenticate(request, username, password, **kwargs)


# AccessAttempt.username's length; Django's sign-in form does not bound what it passes on.
USERNAME_MAX = 255


def lockout_username(request, credentials=None) -> str | None:
    """AXES_USERNAME_CALLABLE: the name tried, cut to what axes's tables hold (no NUL).

    A longer name is no user's (Django's are 150 at most), so the cut merges only names that
    cannot sign in; uncut, PostgreSQL refuses the record and the sign-in answers 500.
    """
    field = str(settings.AXES_USERNAME_FORM_FIELD)
    name = credentials.get(field) if credentials else request.POST.get(field)
    if name is None:
        return None
    return str(name).replace("\x00", "0x00")[:USERNAME_MAX]


def lockout_response(request, original_response=None, credentials=None):
    """AXES_LOCKOUT_CALLABLE: a page that says why and for how long, 429 with Retry-After."""
    if not isinstance(credentials, dict):
        # Axes's async middleware passes the credentials where the response belongs.
        credentials = original_response if isinstance(original_response, dict) else None
    cool_off = get_cool_off(request)
    seconds = int(cool_off.total_seconds()) if cool_off else 0
    context = {
        **admin.site.each_context(request),
        "username": get_client_username(request, credentials) or "",
        "failure_limit": get_failure_limit(request, credentials),
        "cooloff_minutes": seconds // 60,
    }
    response = TemplateResponse(
        request, "admin/locked_out.html", context, status=settings.AXES_HTTP_RESPONSE_CODE
    )
    if seconds:
        response["Retry-After"] = str(seconds)
    return response.render()
