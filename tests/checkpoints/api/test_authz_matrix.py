"""Who may do what: every API endpoint and admin page or action for six roles, each cell's
status asserted from the tables below, with a check that refused (and read-only) cells
change nothing, that admin and session POSTs need a CSRF token, and that GET never acts."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from checkpoints.models import Checkpoint, FinishedMark, Thread
from checkpoints.savers import get_saver
from checkpoints.savers.base import utcnow
from retention.models import SweepRun
from tests.reliability_fixtures import put_value

pytestmark = pytest.mark.django_db(transaction=True)

ROLES = ("anonymous", "owner", "other", "staff", "staff_perm", "superuser")
TOKEN = "s" * 32  # a CSRF secret we set as the cookie and send back in the form

# -- the API: (method, path, body) and the status per role ----------------------------------
READ = dict(zip(ROLES, (401, 200, 404, 200, 200, 200), strict=True))
SWEEPING = dict(zip(ROLES, (401, 403, 403, 403, 200, 200), strict=True))


def _row(*statuses):
    return dict(zip(ROLES, statuses, strict=True))


# name: (method, path template, body, writes?, statuses)
API = {
    "list": ("get", "/api/threads/", None, False, READ | {"other": 200}),
    "detail": ("get", "/api/threads/{t}/", None, False, READ),
    "history": ("get", "/api/threads/{t}/history/", None, False, READ),
    "state": ("get", "/api/threads/{t}/state/", None, False, READ),
    "delete": ("delete", "/api/threads/{t}/", None, True, _row(401, 204, 404, 204, 204, 204)),
    "rollback": ("post", "/api/threads/{t}/rollback/", "target", True, READ),
    "fork": ("post", "/api/threads/{t}/fork/", "target", True, _row(401, 201, 404, 201, 201, 201)),
    "bulk-update": (
        "post",
        "/api/threads/{t}/bulk-update/",
        {"supersteps": [[{"channel": "n", "value": 99}]]},
        True,
        READ,
    ),
    "finish": ("post", "/api/threads/{t}/finish/", None, True, READ),
    "unfinish": ("delete", "/api/threads/{t}/finish/", None, True, READ),
    "retention": ("post", "/api/threads/{t}/retention/", {"waiting_minutes": 60}, True, READ),
    "sweep": ("post", "/api/checkpoints/sweep/", {}, True, SWEEPING),
    "sweep-dry-run": ("post", "/api/checkpoints/sweep/", {"dry_run": True}, False, SWEEPING),
    "sweeps": ("get", "/api/checkpoints/sweeps/", None, False, SWEEPING),
}

# -- the admin: (method, path builder, form, writes?, statuses) -----------------------------
LOGIN = 302  # anonymous and non-staff users are sent to the login page
ADMIN_READ = _row(LOGIN, LOGIN, LOGIN, 403, 200, 200)
ADMIN_POST = _row(LOGIN, LOGIN, LOGIN, 403, 302, 302)


def _action(name, pk_of):
    return lambda ids: {"action": name, "_selected_action": [pk_of(ids)], "index": "0"}


ADMIN = {
    "threads": ("get", lambda ids: "/admin/checkpoints/thread/", None, False, ADMIN_READ),
    "thread": (
        "get",
        lambda ids: f"/admin/checkpoints/thread/{ids['thread']}/change/",
        None,
        False,
        ADMIN_READ,
    ),
    "checkpoints": ("get", lambda ids: "/admin/checkpoints/checkpoint/", None, False, ADMIN_READ),
    "checkpoint": (
        "get",
        lambda ids: f"/admin/checkpoints/checkpoint/{ids['target']}/change/",
        None,
        False,
        ADMIN_READ,
    ),
    "changes": (
        "get",
        lambda ids: f"/admin/checkpoints/checkpoint/{ids['head']}/changes/",
        None,
        False,
        ADMIN_READ,
    ),
    "rollback-confirm": (
        "get",
        lambda ids: f"/admin/checkpoints/checkpoint/{ids['target']}/rollback/",
        None,
        False,
        ADMIN_READ,
    ),
    "rollback": (
        "post",
        lambda ids: f"/admin/checkpoints/checkpoint/{ids['target']}/rollback/",
        lambda ids: {"post": "yes"},
        True,
        ADMIN_POST,
    ),
    "fork-confirm": (
        "get",
        lambda ids: f"/admin/checkpoints/checkpoint/{ids['target']}/fork/",
        None,
        False,
        ADMIN_READ,
    ),
    "fork": (
        "post",
        lambda ids: f"/admin/checkpoints/checkpoint/{ids['target']}/fork/",
        lambda ids: {"post": "yes", "new_thread_id": "forked"},
        True,
        ADMIN_POST,
    ),
    "rollback-action": (
        "post",
        lambda ids: "/admin/checkpoints/checkpoint/",
        _action("rollback_selected", lambda ids: ids["target"]),
        False,  # an action only leads to the confirmation page
        _row(LOGIN, LOGIN, LOGIN, 403, 200, 200),
    ),
    "mark-action": (
        "post",
        lambda ids: "/admin/checkpoints/thread/",
        _action("mark_finished_selected", lambda ids: ids["thread"]),
        True,
        ADMIN_POST,
    ),
    "unmark-action": (
        "post",
        lambda ids: "/admin/checkpoints/thread/",
        _action("unmark_finished_selected", lambda ids: ids["thread"]),
        True,
        ADMIN_POST,
    ),
    "marks": ("get", lambda ids: "/admin/checkpoints/finishedmark/", None, False, ADMIN_READ),
    "unmark-mark-action": (
        "post",
        lambda ids: "/admin/checkpoints/finishedmark/",
        _action("unmark_selected", lambda ids: ids["mark"]),
        True,
        ADMIN_POST,
    ),
    "sweep-page": ("get", lambda ids: "/admin/retention/sweeprun/sweep/", None, False, ADMIN_READ),
    "sweep": (
        "post",
        lambda ids: "/admin/retention/sweeprun/sweep/",
        lambda ids: {"post": "yes"},
        True,
        _row(LOGIN, LOGIN, LOGIN, 403, 200, 200),
    ),
    "sweeps": ("get", lambda ids: "/admin/retention/sweeprun/", None, False, ADMIN_READ),
}
STAFF_PERMISSIONS = [
    ("checkpoints", "view_thread"),
    ("checkpoints", "change_thread"),
    ("checkpoints", "view_checkpoint"),
    ("checkpoints", "change_checkpoint"),
    ("checkpoints", "add_checkpoint"),
    ("checkpoints", "view_finishedmark"),
    ("checkpoints", "delete_finishedmark"),
    ("retention", "run_sweep"),
    ("retention", "view_sweeprun"),
]


@pytest.fixture
def users(transactional_db):
    made = {
        "owner": User.objects.create_user("alice", password="pw"),
        "other": User.objects.create_user("bob", password="pw"),
        "staff": User.objects.create_user("staff", password="pw", is_staff=True),
        "staff_perm": User.objects.create_user("ops", password="pw", is_staff=True),
        "superuser": User.objects.create_superuser("root", "root@example.com", "pw"),
    }
    for app, codename in STAFF_PERMISSIONS:
        made["staff_perm"].user_permissions.add(
            Permission.objects.get(content_type__app_label=app, codename=codename)
        )
    return made


def seed(users) -> dict:
    """A fresh store: alice's thread (two checkpoints, marked, not due) and one past due."""
    saver = get_saver()
    saver.reset_store()
    owned = {
        "configurable": {"thread_id": "owned", "checkpoint_ns": "", "user_id": users["owner"].pk}
    }
    first = put_value(saver, "owned", owned, {"n": 1})
    second = put_value(saver, "owned", first, {"n": 2})
    saver.mark_finished("owned", utcnow() + timedelta(days=1), "alice")
    put_value(saver, "due", None, {"n": 0})
    saver.mark_finished("due", utcnow() - timedelta(minutes=1), "bob")
    rows = Checkpoint.objects.filter(thread__thread_id="owned")
    return {
        "target_id": first["configurable"]["checkpoint_id"],
        "thread": Thread.objects.get(thread_id="owned").pk,
        "target": rows.get(checkpoint_id=first["configurable"]["checkpoint_id"]).pk,
        "head": rows.get(checkpoint_id=second["configurable"]["checkpoint_id"]).pk,
        "mark": FinishedMark.objects.get(thread_id="owned").pk,
    }


def fingerprint() -> tuple:
    """Everything an endpoint could change: checkpoints, marks, versions, retention, sweeps."""
    saver = get_saver()
    threads = []
    for thread_id in sorted(saver.threads()):
        ids = [
            t.config["configurable"]["checkpoint_id"]
            for t in saver.list({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}})
        ]
        mark = saver.finished_mark(thread_id)
        threads.append(
            (
                thread_id,
                tuple(ids),
                (mark.marked_at, mark.due_at) if mark else None,
                saver.thread_version(thread_id),
                saver.thread_retention(thread_id),
            )
        )
    return tuple(threads), SweepRun.objects.count()


def api_client(user) -> APIClient:
    client = APIClient()
    if user is not None:
        token, _ = Token.objects.get_or_create(user=user)
        client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


def admin_client(user) -> Client:
    client = Client(enforce_csrf_checks=True)
    if user is not None:
        client.force_login(user)
    client.cookies["csrftoken"] = TOKEN
    return client


def _check(label, response, wanted, acted, before) -> None:
    """The status is the table's; the store changed exactly when the cell may act."""
    assert response.status_code == wanted, (label, response.status_code, response.content[:300])
    changed = fingerprint() != before
    assert changed == acted, (label, "changed" if changed else "unchanged")


@pytest.mark.parametrize("endpoint", sorted(API))
def test_api_matrix(users, endpoint):
    method, template, body, writes, statuses = API[endpoint]
    for role in ROLES:
        ids = seed(users)
        before = fingerprint()
        client = api_client(users.get(role))
        payload = {"checkpoint_id": ids["target_id"]} if body == "target" else body
        response = getattr(client, method)(template.format(t="owned"), payload, format="json")
        acted = writes and statuses[role] < 400
        _check((endpoint, role), response, statuses[role], acted, before)
        if endpoint == "list" and role == "other":
            assert response.json()["results"] == []


@pytest.mark.parametrize("page", sorted(ADMIN))
def test_admin_matrix(users, page):
    method, path, form, writes, statuses = ADMIN[page]
    for role in ROLES:
        ids = seed(users)
        before = fingerprint()
        client = admin_client(users.get(role))
        if method == "get":
            response = client.get(path(ids))
        else:
            response = client.post(path(ids), {**form(ids), "csrfmiddlewaretoken": TOKEN})
        acted = writes and role in ("staff_perm", "superuser")
        _check((page, role), response, statuses[role], acted, before)
        if role in ("anonymous", "owner", "other"):
            assert response["Location"].startswith("/admin/login/"), (page, role)


@pytest.mark.parametrize("page", sorted(k for k, v in ADMIN.items() if v[0] == "post"))
def test_admin_posts_without_csrf_token_are_refused(users, page):
    _, path, form, _, _ = ADMIN[page]
    ids = seed(users)
    before = fingerprint()
    client = Client(enforce_csrf_checks=True)
    client.force_login(users["superuser"])
    response = client.post(path(ids), form(ids))
    _check((page, "superuser without CSRF token"), response, 403, False, before)


@pytest.mark.parametrize("endpoint", sorted(k for k, v in API.items() if v[0] != "get"))
def test_api_session_writes_without_csrf_token_are_refused(users, endpoint):
    method, template, body, _, _ = API[endpoint]
    ids = seed(users)
    before = fingerprint()
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(users["superuser"])
    payload = {"checkpoint_id": ids["target_id"]} if body == "target" else body
    response = getattr(client, method)(template.format(t="owned"), payload, format="json")
    _check((endpoint, "session without CSRF token"), response, 403, False, before)


@pytest.mark.parametrize("endpoint", sorted(k for k, v in API.items() if v[0] != "get"))
def test_get_on_destructive_api_urls_changes_nothing(users, endpoint):
    _, template, _, _, _ = API[endpoint]
    seed(users)
    before = fingerprint()
    response = api_client(users["superuser"]).get(template.format(t="owned"))
    # The thread detail answers GET by reading; every action URL refuses the method.
    wanted = 200 if endpoint == "delete" else 405
    _check((endpoint, "GET"), response, wanted, False, before)


def test_get_on_admin_action_urls_changes_nothing(users):
    ids = seed(users)
    before = fingerprint()
    client = admin_client(users["superuser"])
    for page in ("rollback", "fork", "sweep"):
        _, path, form, _, _ = ADMIN[page]
        response = client.get(path(ids), form(ids))
        _check((page, "GET with the POST's fields"), response, 200, False, before)
    for page in ("mark-action", "unmark-action", "unmark-mark-action"):
        _, path, form, _, _ = ADMIN[page]
        response = client.get(path(ids), form(ids))
        assert response.status_code in (200, 302), (page, response.status_code)
        _check(
            (page, "GET with the action's fields"), response, response.status_code, False, before
        )
