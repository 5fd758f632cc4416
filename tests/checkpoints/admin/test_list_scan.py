"""A scannable thread list (issue 54 item 3): the last message as a one-line preview, turns
and last activity per row; sorting by every count shown; search by any part of an id or by
a metadata key=value. The row heights at 1400x900 are measured in
test_browser_list.py."""

from __future__ import annotations

import re

import pytest
from langchain_core.messages import HumanMessage

from checkpoints.admin import ThreadAdmin
from tests.admin_fixtures import chat_graph, run_chat, run_tools

pytestmark = pytest.mark.django_db(databases=["default", "pg"], transaction=True)
THREADS = "/admin/checkpoints/thread/"


def listed(page: str) -> list[str]:
    """The thread ids of the list's rows, top to bottom."""
    return re.findall(r'<th class="field-thread_id"><a href="[^"]+">([^<]+)</a>', page)


def row_of(page: str, thread_id: str) -> str:
    start = page.index(f">{thread_id}</a>")
    return page[start : page.index("</tr>", start)]


def column(name: str) -> int:
    """Django's ``o`` index of a column (0 is the action checkbox)."""
    return 1 + ThreadAdmin.list_display.index(name)


def test_each_row_shows_its_last_message_turns_and_last_activity(admin_client, saver):
    run_chat(saver, "chatty", turns=3)
    run_tools(saver, "tooled")
    page = admin_client.get(THREADS).content.decode()
    chatty = row_of(page, "chatty")
    assert re.search(r'class="cs-role">ai</span> answer 3<', chatty), chatty
    assert re.search(r'<td class="field-turns">3</td>', chatty), chatty
    assert re.search(r'<span title="[^"]+ UTC">(just now|\d+ min ago)</span>', chatty), chatty
    tooled = row_of(page, "tooled")
    assert "Order 42 shipped on Monday." in tooled
    assert re.search(r'<td class="field-turns">1</td>', tooled), tooled


@pytest.mark.parametrize("name", ["checkpoint_count", "turns"])
def test_sorting_by_each_count_orders_the_rows(admin_client, saver, name):
    for thread_id, turns in (("two", 2), ("four", 4), ("one", 1), ("three", 3)):
        run_chat(saver, thread_id, turns=turns)
    up = listed(admin_client.get(THREADS, {"o": str(column(name))}).content.decode())
    down = listed(admin_client.get(THREADS, {"o": f"-{column(name)}"}).content.decode())
    assert up == ["one", "two", "three", "four"]
    assert down == ["four", "three", "two", "one"]


def test_search_finds_any_part_of_an_id(admin_client, saver):
    for thread_id in ("order-1042-refund", "order-2077-refund", "support-1042"):
        run_chat(saver, thread_id, turns=1)
    found = listed(admin_client.get(THREADS, {"q": "1042"}).content.decode())
    assert sorted(found) == ["order-1042-refund", "support-1042"]
    assert listed(admin_client.get(THREADS, {"q": "-refund"}).content.decode()) != []
    assert listed(admin_client.get(THREADS, {"q": "nothing-like-it"}).content.decode()) == []


@pytest.fixture(params=["sqlite", "postgres"])
def store(request, saver, settings):
    from checkpoints.store.registry import get_saver

    if request.param == "sqlite":
        return saver
    if "pg" not in settings.DATABASES:
        pytest.fail("the postgres case needs the pg test database")
    return get_saver("postgres", using="pg")


def test_search_by_a_metadata_key_and_value(admin_client, store):
    graph = chat_graph(store)
    for thread_id, user, tenant in (("a", "u-42", 7), ("b", "u-43", 7), ("c", "u-42", 8)):
        graph.invoke(
            {"messages": [HumanMessage(content="hi")]},
            {
                "configurable": {"thread_id": thread_id, "user_id": user},
                "metadata": {"tenant": tenant},
            },
        )
    provider = {} if store.db_alias in (None, "default") else {"provider": store.db_alias}

    def search(term: str) -> list[str]:
        page = admin_client.get(THREADS, {"q": term, **provider}).content.decode()
        return sorted(listed(page))

    assert search("user_id=u-42") == ["a", "c"]
    # A number is matched as the number metadata keeps, and as text.
    assert search("tenant=7") == ["a", "b"]
    assert search(" tenant = 8 ") == ["c"]
    assert search("user_id=nobody") == []
