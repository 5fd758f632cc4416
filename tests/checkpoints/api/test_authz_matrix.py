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
from checkpoints.store.planning import utcnow
from checkpoints.store.registry import get_saver
from retention.models import SweepRun
from tests.admin_fixtures import staff_user
from tests.reliability_fixtures import put_value

pytestmark = pytest.mark.django_db(transaction=True)

ROLES = ("anonymous", "owner", "other", "staff", "staff_perm", "superuser")
TOKEN = "s" * 32  # a CSRF secret we set as the cookie and send back in the form

# -- the API: (method, path, body) and the status per role ----------------------------------
READ = dict(zip(ROLES, (401, 200, 404, 200, 200, 200), strict=True))
# Staff act on others' threads only with the model permission; owners on their own.
WRITE = dict(zip(ROLES, (401, 200, 404, 403, 200, 200), strict=True))
SWEEPING = dict(zip(ROLES, (401, 403, 403, 403, 200, 200), strict=True))


def _row(*statuses):
    return dict(zip(ROLES, statuses, strict=True))


# name: (method, path template, body, writes?, statuses)
API = {
    "list": ("get", "/api/threads/", None, False, READ | {"other": 200}),
    "detail": ("get", "/api/threads/{t}/", None, False, READ),
    "history": ("get", "/api/threads/{t}/history/", None, False, READ),
    "state": ("get", "/api/threads/{t}/state/", None, False, READ),
    "delete": ("delete", "/api/threads/{t}/", None, True, _row(401, 204, 404, 403, 204, 204)),
    "rollback": ("post", "/api/threads/{t}/rollback/", "target", True, WRITE),
    "fork": ("post", "/api/threads/{t}/fork/", "target", True, _row(401, 201, 404, 403, 201, 201)),
    "bulk-update": (
        "post",
        "/api/threads/{t}/bulk-update/",
        {"supersteps": [[{"channel": "n", "value": 99}]]},
        True,
        WRITE,
    ),
    "finish": ("post", "/api/threads/{t}/finish/", None, True, WRITE),
    "unfinish": ("delete", "/api/threads/{t}/finish/", None, True, WRITE),
    "retention": ("post", "/api/threads/{t}/retention/", {"waiting_minutes": 60}, True, WRITE),
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
        # The head the confirmation showed, as the page's form carries it.
        lambda ids: {"post": "yes", "expected_head": ids["head_id"]},
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
        lambda ids: {"post": "yes", "new_thread_id": "forked", "expected_head": ids["head_id"]},
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
    ("checkpoints", "delete_thread"),
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
        "head_id": second["configurable"]["checkpoint_id"],
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


def call_api(endpoint, user, ids):
    method, template, body, _, _ = API[endpoint]
    payload = {"checkpoint_id": ids["target_id"]} if body == "target" else body
    return getattr(api_client(user), method)(template.format(t="owned"), payload, format="json")


def call_admin(page, user, ids):
    method, path, form, _, _ = ADMIN[page]
    client = admin_client(user)
    if method == "get":
        return client.get(path(ids))
    return client.post(path(ids), {**form(ids), "csrfmiddlewaretoken": TOKEN})


def _check(label, response, wanted, acted, before) -> None:
    """The status is the table's; the store changed exactly when the cell may act."""
    assert response.status_code == wanted, (label, response.status_code, response.content[:300])
    changed = fingerprint() != before
    assert changed == acted, (label, "changed" if changed else "unchanged")


@pytest.mark.parametrize("endpoint", sorted(API))
def test_api_matrix(users, endpoint):
    _, _, _, writes, statuses = API[endpoint]
    for role in ROLES:
        ids = seed(users)
        before = fingerprint()
        response = call_api(endpoint, users.get(role), ids)
        acted = writes and statuses[role] < 400
        _check((endpoint, role), response, statuses[role], acted, before)
        if endpoint == "list" and role == "other":
            assert response.json()["results"] == []


@pytest.mark.parametrize("page", sorted(ADMIN))
def test_admin_matrix(users, page):
    _, _, _, writes, statuses = ADMIN[page]
    for role in ROLES:
        ids = seed(users)
        before = fingerprint()
        response = call_admin(page, users.get(role), ids)
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


# -- admin and API side by side: one verdict per action and kind of user --------------------
# action: (API endpoint, admin page or None where the admin has none, permission staff need).
# The permissions are written out here, not read from checkpoints.permissions, so a change
# to the rule shows up as a failure to look at.
SIDE_BY_SIDE = {
    "delete": ("delete", None, "checkpoints.delete_thread"),
    "rollback": ("rollback", "rollback", "checkpoints.change_checkpoint"),
    "fork": ("fork", "fork", "checkpoints.add_checkpoint"),
    "bulk-update": ("bulk-update", None, "checkpoints.change_checkpoint"),
    "finish": ("finish", "mark-action", "checkpoints.change_thread"),
    "unfinish": ("unfinish", "unmark-action", "checkpoints.change_thread"),
    "unfinish-by-mark": ("unfinish", "unmark-mark-action", "checkpoints.delete_finishedmark"),
    "retention": ("retention", None, "checkpoints.change_thread"),
    "sweep": ("sweep", "sweep", "retention.run_sweep"),
}
# What an admin page needs before it can refuse for the action's own reason.
VIEW_PERMS = (
    "checkpoints.view_thread",
    "checkpoints.view_checkpoint",
    "checkpoints.view_finishedmark",
    "retention.view_sweeprun",
)
STAFF_KINDS = ("superuser", "staff_with", "staff_viewer", "staff")
KINDS = (*STAFF_KINDS, "owner", "other")


def _allowed(response) -> bool:
    return response.status_code < 400 and not response.get("Location", "").startswith(
        "/admin/login/"
    )


@pytest.mark.parametrize("action", sorted(SIDE_BY_SIDE))
def test_admin_and_api_agree(users, action):
    """Staff need the same permission on both sides; a refusal changes nothing."""
    endpoint, page, perm = SIDE_BY_SIDE[action]
    kinds = {
        "superuser": users["superuser"],
        "staff_with": staff_user("with-perm", *VIEW_PERMS, perm),
        "staff_viewer": staff_user("viewer", *VIEW_PERMS),
        "staff": users["staff"],
        "owner": users["owner"],
        "other": users["other"],
    }
    for kind in KINDS:
        may = kind in ("superuser", "staff_with") or (kind == "owner" and action != "sweep")
        ids = seed(users)
        before = fingerprint()
        response = call_api(endpoint, kinds[kind], ids)
        label = (action, kind, "api")
        assert _allowed(response) == may, (label, response.status_code, response.content[:300])
        assert (fingerprint() != before) == (may and API[endpoint][3]), label
        if not may and kind in STAFF_KINDS:
            error = response.json()["error"]
            assert response.status_code == 403 and error["code"] == "permission_denied", label
            assert repr(perm) in error["message"], (label, error)
        if kind == "other" and action != "sweep":
            # Another user's thread stays hidden: 404, as for a missing one.
            assert response.status_code == 404, label
        if page is None:
            continue
        ids = seed(users)
        before = fingerprint()
        response = call_admin(page, kinds[kind], ids)
        label = (action, kind, "admin")
        # Every page here writes: whether it acted is whether the store changed.
        assert (fingerprint() != before) == (may and kind in STAFF_KINDS), label
        if kind not in STAFF_KINDS:
            # The admin is for staff: owners act on their own threads through the API only.
            assert response["Location"].startswith("/admin/login/"), label
        elif not may and not page.endswith("-action"):
            # A page refuses with 403; a list action the user is not offered is ignored and
            # the list shown again (the unchanged store above is that refusal).
            assert response.status_code == 403, (label, response.status_code)


def test_admin_offers_no_thread_delete_to_anyone(users):
    """The API's delete has no admin twin: deleting there is the sweep's job."""
    ids = seed(users)
    before = fingerprint()
    client = admin_client(users["superuser"])
    url = f"/admin/checkpoints/thread/{ids['thread']}/delete/"
    response = client.post(url, {"post": "yes", "csrfmiddlewaretoken": TOKEN})
    _check(("admin thread delete", "superuser"), response, 403, False, before)


def test_api_unfinish_takes_either_permission_the_admin_takes(users):
    for perm in ("checkpoints.change_thread", "checkpoints.delete_finishedmark"):
        ids = seed(users)
        response = call_api("unfinish", staff_user(perm.split(".")[1], perm), ids)
        assert response.status_code == 200, (perm, response.content)
