"""A refused action, inside the admin: a 403 page in the admin's chrome that names the
permission the user lacks and who grants it, and an audit event like the one an accepted
attempt writes (same action, ``refused`` in its detail), so a refusal leaves a trace."""

from __future__ import annotations

from django.contrib import admin
from django.template.response import TemplateResponse

from checkpoints import audit, permissions

# The audit action a refused attempt is recorded under, per permissions' action name.
AUDIT_ACTIONS = {
    "rollback": "rollback",
    "fork": "fork",
    "hold": "hold",
    "sweep": "sweep",
    "finish": "mark_finished",
    "unfinish": "unmark_finished",
    "bulk_update": "bulk_update",
}
# What each action is, in the page's words.
WHAT = {
    "rollback": "roll a thread back",
    "fork": "fork a thread",
    "hold": "hold a thread from the sweep",
    "sweep": "run the checkpoint sweep",
    "finish": "mark a thread finished",
    "unfinish": "take a thread out of the finished set",
    "bulk_update": "edit a thread's state",
}


def refused(request, action: str, *, thread_id: str = "", provider: str = "") -> TemplateResponse:
    """The 403 for ``action`` (a `permissions.REQUIRED` key), recorded in the audit trail."""
    needed = permissions.REQUIRED[action]
    with audit.from_request(request, "admin"):
        audit.record(
            AUDIT_ACTIONS[action],
            thread_id=thread_id,
            provider=provider,
            detail={"refused": "missing permission", "needs": list(needed)},
        )
    return TemplateResponse(
        request,
        "admin/checkpoints/refused.html",
        {
            **admin.site.each_context(request),
            "title": "Permission needed",
            "what": WHAT[action],
            "needed": needed,
            "thread_id": thread_id,
        },
        status=403,
    )
