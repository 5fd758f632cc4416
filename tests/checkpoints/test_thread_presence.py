"""Where a thread id is already taken is asked of the store, then of every check an app
registered (`checkpoints.threads.register_presence_check`): checkpoints knows no parks;
retention registers its own."""

from __future__ import annotations

from datetime import timedelta

import pytest

from checkpoints.errors import ThreadExists
from checkpoints.store.planning import utcnow
from checkpoints.threads import refuse_existing, register_presence_check, thread_presence
from retention.models import Park
from tests.retention_fixtures import write

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def registered(monkeypatch):
    """The registered checks, restored after the test."""
    from checkpoints import threads

    checks = dict(threads._presence_checks)
    monkeypatch.setattr(threads, "_presence_checks", checks)
    return checks


def test_a_registered_check_is_asked_after_the_store(saver, registered):
    asked = []

    def booked(saver, thread_id):
        asked.append(thread_id)
        return "a booking" if thread_id == "booked" else None

    register_presence_check("tests.bookings", booked)
    write(saver, "written")
    assert thread_presence(saver=saver, thread_id="written") == "1 checkpoint(s)"
    assert thread_presence(saver=saver, thread_id="booked") == "a booking"
    assert thread_presence(saver=saver, thread_id="free") is None
    assert asked == ["booked", "free"]
    with pytest.raises(ThreadExists, match=r"it already exists \(a booking\)"):
        refuse_existing(saver=saver, thread_id="booked", doing="fork 'x' at 'y'")


def test_retention_registers_its_parks(redis_url, registered):
    from checkpoints.store.registry import get_saver
    from retention.runs import park_presence

    assert registered["retention.parks"] is park_presence
    saver = get_saver("redis", conn_string=redis_url)
    now = utcnow()
    Park.objects.create(
        thread_id="parked", deadline=now + timedelta(hours=1), created_at=now, provider="redis"
    )
    assert thread_presence(saver=saver, thread_id="parked") == "a park"
    # Without retention's check, checkpoints sees nothing there.
    del registered["retention.parks"]
    assert thread_presence(saver=saver, thread_id="parked") is None
