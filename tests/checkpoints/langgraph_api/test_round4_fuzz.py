"""Round-4 review: every /langgraph POST route given each field in each JSON type answers a
4xx or a 2xx, never a 500."""

from __future__ import annotations

import pytest

from tests.checkpoints.langgraph_api.calls import call

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

ODD_VALUES = [None, True, -1, 2**70, 1.5, "", "\ud800", "x\x00", [], [None], {}, {"": None}]
ROUTES = {
    "/threads": ["thread_id", "metadata", "if_exists", "ttl", "supersteps"],
    "/threads/search": [
        "ids",
        "metadata",
        "values",
        "status",
        "limit",
        "offset",
        "sort_by",
        "sort_order",
        "select",
        "extract",
    ],
    "/threads/count": ["ids", "metadata", "values", "status"],
    "/threads/prune": ["thread_ids", "strategy"],
    "/threads/f-1/state": ["values", "as_node", "checkpoint", "checkpoint_id"],
    "/threads/f-1/state/checkpoint": ["checkpoint", "select", "subgraphs"],
    "/threads/f-1/history": ["limit", "before", "metadata", "checkpoint"],
}


@pytest.mark.parametrize("lg", ["sqlite"], indirect=True)
def test_odd_field_types_are_never_a_500(lg):
    who = lg.owner()
    lg.run_graph("f-1")
    failures = []
    for route, fields in ROUTES.items():
        for name in fields:
            for value in ODD_VALUES:
                answer = call(lg, who, "POST", route, {name: value})
                if answer.status_code >= 500:
                    failures.append((route, name, repr(value), answer.text[:200]))
        for body in ([], "x", 5, None):
            answer = call(
                lg,
                who,
                "POST",
                route,
                body if body is not None else None,
                raw=b"null" if body is None else None,
            )
            if answer.status_code >= 500:
                failures.append((route, "<body>", repr(body), answer.text[:200]))
    for value in ("x", "-1", "99999999999999999999", "%00", "%ED%A0%80"):
        for query in (f"limit={value}", f"before={value}", f"select={value}", f"subgraphs={value}"):
            for route in ("/threads/f-1/history", "/threads/f-1/state"):
                answer = call(lg, who, "GET", f"{route}?{query}")
                if answer.status_code >= 500:
                    failures.append((route, query, "", answer.text[:200]))
    assert failures == [], "\n".join(map(str, failures))
