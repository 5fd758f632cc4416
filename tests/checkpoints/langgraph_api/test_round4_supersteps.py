"""POST /langgraph/threads with supersteps is the REST API's bulk update by another door: the
same bound on supersteps (MAX_SUPERSTEPS) and the same throttle (checkpoints.bulk_update).

Before: a 10 MB body of ~300,000 one-update supersteps wrote that many checkpoints in one
request, and any number of such requests ran unthrottled."""

from __future__ import annotations

import pytest
from django.core.cache import cache

from checkpoints.api.serializers import MAX_SUPERSTEPS
from tests.checkpoints.langgraph_api.calls import call, refused

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


def _steps(n: int) -> list[dict]:
    return [{"updates": [{"values": {"topic": f"t{i}"}, "as_node": "plan"}]} for i in range(n)]


@pytest.mark.parametrize("lg", ["sqlite"], indirect=True)
def test_supersteps_are_bounded_like_the_rest_apis(lg):
    who = lg.owner()
    over = call(
        lg, who, "POST", "/threads", {"thread_id": "s-1", "supersteps": _steps(MAX_SUPERSTEPS + 1)}
    )
    refused(over, "supersteps", str(MAX_SUPERSTEPS))
    assert call(lg, who, "GET", "/threads/s-1").status_code == 404
    wide = [{"updates": [{"values": {"topic": "x"}, "as_node": "plan"}] * (MAX_SUPERSTEPS + 1)}]
    refused(
        call(lg, who, "POST", "/threads", {"thread_id": "s-2", "supersteps": wide}), "supersteps"
    )
    assert (
        call(lg, who, "POST", "/threads", {"thread_id": "s-3", "supersteps": _steps(2)}).status_code
        == 200
    )


@pytest.mark.parametrize("lg", ["sqlite"], indirect=True)
def test_supersteps_share_the_bulk_update_throttle(lg, settings):
    cache.clear()
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"checkpoints.bulk_update": "2/min"},
    }
    try:
        who = lg.owner()
        for i in range(2):
            made = call(
                lg, who, "POST", "/threads", {"thread_id": f"b-{i}", "supersteps": _steps(1)}
            )
            assert made.status_code == 200, made.text
        limited = call(lg, who, "POST", "/threads", {"thread_id": "b-2", "supersteps": _steps(1)})
        assert limited.status_code == 429, limited.text
        assert call(lg, who, "GET", "/threads/b-2").status_code == 404
        # A thread made without supersteps is no bulk update.
        assert call(lg, who, "POST", "/threads", {"thread_id": "plain"}).status_code == 200
    finally:
        cache.clear()
