"""The admin sign-in's lockout (django-axes, project.auth), through the login form."""

from __future__ import annotations

import pytest
from axes.models import AccessAttempt, AccessFailureLog
from django.conf import settings
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client, override_settings

from tests.services import need_service
from tests.standalone import service_setting

pytestmark = pytest.mark.django_db(databases=["default", "pg"])

PASSWORD = "the-right-password"
ATTACKER = "203.0.113.66"
OPERATOR = "198.51.100.7"


class AxesOnPostgres:
    """Route django-axes's records to the PostgreSQL alias: a service on DATABASE_URL=postgres."""

    def db_for_read(self, model, **hints):
        return "pg" if model._meta.app_label == "axes" else None

    db_for_write = db_for_read


@pytest.fixture(params=["sqlite", "postgres"])
def records(request):
    """The database django-axes records failures in: the service's SQLite, or PostgreSQL."""
    if request.param == "sqlite":
        yield "default"
        return
    need_service(settings.POSTGRES_UNAVAILABLE)
    with override_settings(DATABASE_ROUTERS=[AxesOnPostgres()]):
        yield "pg"


@pytest.fixture
def admin_user(records):
    return User.objects.create_superuser("admin", "admin@example.com", PASSWORD)


def sign_in(client: Client, password: str, username: str = "admin"):
    return client.post("/admin/login/?next=/admin/", {"username": username, "password": password})


def signed_in(client: Client) -> bool:
    return client.get("/admin/").status_code == 200


def lock_out(client: Client) -> None:
    """Wrong passwords until the lockout: the form answers each, the last one is refused."""
    limit = settings.AXES_FAILURE_LIMIT
    for attempt in range(1, limit):
        response = sign_in(client, f"guess-{attempt}")
        assert response.status_code == 200, attempt
        assert b"Please enter the correct username and password" in response.content
    locked = sign_in(client, f"guess-{limit}")
    assert locked.status_code == 429, locked.content[:500]


def test_wrong_passwords_lock_the_user_from_that_address_even_for_the_right_one(admin_user):
    attacker = Client(REMOTE_ADDR=ATTACKER)
    lock_out(attacker)
    refused = sign_in(attacker, PASSWORD)
    assert refused.status_code == 429
    page = refused.content.decode()
    assert "Sign-in locked" in page and "“admin”" in page
    assert f"for {settings.AXES_COOLOFF_TIME.seconds // 60} minutes" in page
    assert int(refused["Retry-After"]) == settings.AXES_COOLOFF_TIME.seconds
    assert "script-src 'self'" in refused["Content-Security-Policy"]
    assert not signed_in(attacker)
    # The failures are on record, with the address and user name they came from.
    attempt = AccessAttempt.objects.get(username="admin", ip_address=ATTACKER)
    assert attempt.failures_since_start >= settings.AXES_FAILURE_LIMIT
    failures = AccessFailureLog.objects.filter(username="admin", ip_address=ATTACKER)
    assert failures.count() >= settings.AXES_FAILURE_LIMIT
    # The guesses themselves are not kept.
    assert "guess-" not in attempt.post_data and PASSWORD not in attempt.post_data


def test_the_lock_holds_the_pair_only_so_the_operator_still_signs_in(admin_user):
    lock_out(Client(REMOTE_ADDR=ATTACKER))
    operator = Client(REMOTE_ADDR=OPERATOR)
    assert sign_in(operator, PASSWORD).status_code == 302
    assert signed_in(operator)
    # Another user name from the locked address is not locked either.
    User.objects.create_user("alice", password="pw-alice", is_staff=True)
    alice = Client(REMOTE_ADDR=ATTACKER)
    assert sign_in(alice, "pw-alice", username="alice").status_code == 302


def test_a_forwarded_for_header_does_not_choose_the_address(admin_user):
    attacker = Client(REMOTE_ADDR=ATTACKER)
    for attempt in range(settings.AXES_FAILURE_LIMIT):
        attacker.post(
            "/admin/login/",
            {"username": "admin", "password": f"guess-{attempt}"},
            HTTP_X_FORWARDED_FOR=f"192.0.2.{attempt}",
        )
    assert sign_in(attacker, PASSWORD).status_code == 429
    assert set(AccessAttempt.objects.values_list("ip_address", flat=True)) == {ATTACKER}


def test_axes_reset_lifts_the_lock(admin_user):
    attacker = Client(REMOTE_ADDR=ATTACKER)
    lock_out(attacker)
    call_command("axes_reset_username", "admin", verbosity=0)
    assert sign_in(attacker, PASSWORD).status_code == 302
    assert signed_in(attacker)


def test_a_right_password_forgives_earlier_typos(admin_user):
    operator = Client(REMOTE_ADDR=OPERATOR)
    for attempt in range(settings.AXES_FAILURE_LIMIT - 1):
        assert sign_in(operator, f"typo-{attempt}").status_code == 200
    assert sign_in(operator, PASSWORD).status_code == 302
    operator.logout()
    # The count started again: as many typos as before still leave the form.
    for attempt in range(settings.AXES_FAILURE_LIMIT - 1):
        assert sign_in(operator, f"typo-{attempt}").status_code == 200


def test_the_failures_are_listed_in_the_admin(admin_user):
    lock_out(Client(REMOTE_ADDR=ATTACKER))
    operator = Client(REMOTE_ADDR=OPERATOR)
    operator.force_login(admin_user)
    for page in ("/admin/axes/accessattempt/", "/admin/axes/accessfailurelog/"):
        response = operator.get(page)
        assert response.status_code == 200, page
        assert ATTACKER in response.content.decode(), page


@pytest.mark.parametrize("username", ["ad\x00min", "a" * 5000, "admin\u202e"])
def test_hostile_user_names_get_the_form_not_an_error(admin_user, username):
    client = Client(REMOTE_ADDR=ATTACKER)
    response = sign_in(client, "whatever", username=username)
    assert response.status_code == 200
    assert b'name="username"' in response.content
    assert not signed_in(client)


def test_hostile_headers_and_query_are_recorded_not_an_error(admin_user, records):
    client = Client(REMOTE_ADDR=ATTACKER, HTTP_USER_AGENT="u\x01" * 3000, HTTP_ACCEPT="a" * 5000)
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        response = client.post(
            "/admin/login/?next=%00&x=" + "q" * 5000, {"username": "admin", "password": "nope"}
        )
        assert response.status_code == 200
    attempt = AccessAttempt.objects.using(records).get(username="admin")
    assert attempt.failures_since_start == settings.AXES_FAILURE_LIMIT - 1
    assert "\x00" not in attempt.get_data and len(attempt.user_agent) <= 255


def test_the_environment_sets_the_limit_and_the_wait(tmp_path):
    done = service_setting(
        tmp_path,
        "AXES_FAILURE_LIMIT, settings.AXES_COOLOFF_TIME",
        CHECKPOINTS_LOGIN_FAILURE_LIMIT="8",
        CHECKPOINTS_LOGIN_COOLOFF_MINUTES="60",
    )
    assert done.stdout.splitlines()[-1] == "8 1:00:00", done.stderr[-2000:]
    refused = service_setting(tmp_path, "AXES_FAILURE_LIMIT", CHECKPOINTS_LOGIN_FAILURE_LIMIT="0")
    assert refused.returncode != 0
    assert "CHECKPOINTS_LOGIN_FAILURE_LIMIT must be a whole number of 1 or more, not '0'" in (
        refused.stderr
    )


def test_the_lockout_page_escapes_the_user_name():
    client = Client(REMOTE_ADDR=ATTACKER)
    name = '<img src=x onerror="alert(1)">'
    for attempt in range(settings.AXES_FAILURE_LIMIT):
        response = sign_in(client, f"guess-{attempt}", username=name)
    assert response.status_code == 429
    assert name.encode() not in response.content
    assert b"&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in response.content


def test_another_users_sign_in_does_not_forgive_the_guesses(admin_user):
    """A guesser holding some account cannot wipe their count on the admin by signing in."""
    User.objects.create_user("mallory", password="pw-mallory", is_staff=True)
    guesser = Client(REMOTE_ADDR=ATTACKER)
    for attempt in range(settings.AXES_FAILURE_LIMIT - 1):
        assert sign_in(guesser, f"guess-{attempt}").status_code == 200
    assert sign_in(guesser, "pw-mallory", username="mallory").status_code == 302
    guesser.logout()
    assert sign_in(guesser, "guess-last").status_code == 429
