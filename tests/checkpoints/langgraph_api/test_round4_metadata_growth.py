"""PATCH /langgraph/threads/{id} merges metadata into the thread's row: the merged whole is
bounded by what one request may carry (DATA_UPLOAD_MAX_MEMORY_SIZE).

Before: each PATCH added up to a request's worth (10 MB) to the row, unthrottled; after 13
the row held ~117 MB, each PATCH took over 5 s, and every search listing the thread read it
whole."""

from __future__ import annotations

import pytest

from tests.checkpoints.langgraph_api.calls import call

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


@pytest.mark.parametrize("lg", ["sqlite", "postgres"], indirect=True)
def test_merged_metadata_is_bounded(lg, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100_000
    who = lg.owner()
    lg.run_graph("grow")
    first = {f"a{j}": "x" * 1000 for j in range(60)}
    assert call(lg, who, "PATCH", "/threads/grow", {"metadata": first}).status_code == 200
    more = {f"b{j}": "y" * 1000 for j in range(60)}
    over = call(lg, who, "PATCH", "/threads/grow", {"metadata": more})
    assert over.status_code == 413, over.text
    assert "DATA_UPLOAD_MAX_MEMORY_SIZE (100000 bytes)" in over.json()["detail"]
    kept = call(lg, who, "GET", "/threads/grow").json()["metadata"]
    assert set(kept) == set(first)
    # Replacing keys within the bound still works.
    again = {f"a{j}": "z" * 1000 for j in range(60)}
    assert call(lg, who, "PATCH", "/threads/grow", {"metadata": again}).status_code == 200
