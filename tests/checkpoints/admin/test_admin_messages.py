"""A 10,000-message thread in the admin: pages show the last messages, the total and the rest."""

from __future__ import annotations

import re

import pytest

from checkpoints.models import Checkpoint
from tests.admin_fixtures import PAGE, TOTAL, long_thread

pytestmark = pytest.mark.django_db(transaction=True)

CHECKPOINTS = "/admin/checkpoints/checkpoint/"


def rows(thread_id: str) -> list[Checkpoint]:
    return list(Checkpoint.objects.filter(thread__thread_id=thread_id).order_by("-checkpoint_id"))


@pytest.fixture
def admin_client(client, superuser):
    client.force_login(superuser)
    return client


@pytest.fixture
def big(saver):
    long_thread(saver, "big")
    return rows("big")


def said(page: str) -> list[int]:
    """The message numbers the page's transcript shows, in order."""
    return [int(n) for n in re.findall(r'<div class="cs-said">said #(\d+)\.</div>', page)]


def test_checkpoint_page_shows_the_last_messages_the_total_and_a_link_back(admin_client, big):
    page = admin_client.get(f"{CHECKPOINTS}{big[0].pk}/change/").content.decode()
    assert said(page) == list(range(TOTAL - PAGE, TOTAL))
    assert "messages 9951–10000 of 10000" in page
    assert f'href="?messages_before={TOTAL - PAGE}"' in page
    # The JSON beside the transcript is the same page, not the whole list.
    assert page.count("said #") == 2 * PAGE


def test_the_older_messages_are_reachable_page_by_page(admin_client, big):
    url = f"{CHECKPOINTS}{big[0].pk}/change/"
    older = admin_client.get(url, {"messages_before": TOTAL - PAGE}).content.decode()
    assert said(older) == list(range(TOTAL - 2 * PAGE, TOTAL - PAGE))
    assert f'href="?messages_before={TOTAL - 2 * PAGE}"' in older
    assert f'href="?messages_before={TOTAL}"' in older  # back to the newer page
    first = admin_client.get(url, {"messages_before": PAGE}).content.decode()
    assert said(first) == list(range(PAGE))
    assert "messages 1–50 of 10000" in first and "cs-msgs-older" not in first


def test_a_chosen_store_is_kept_in_the_paging_links(admin_client, big):
    url = f"{CHECKPOINTS}{big[0].pk}/change/"
    page = admin_client.get(url, {"provider": "default"}).content.decode()
    assert f'href="?provider=default&amp;messages_before={TOTAL - PAGE}"' in page


def test_a_bad_messages_before_is_a_400_naming_it(admin_client, big):
    for bad in ("x", "-1", "1.5"):
        response = admin_client.get(f"{CHECKPOINTS}{big[0].pk}/change/", {"messages_before": bad})
        assert response.status_code == 400, bad
        assert b"messages_before" in response.content


def test_diff_page_shows_only_the_appended_message(admin_client, big):
    page = admin_client.get(f"{CHECKPOINTS}{big[0].pk}/changes/").content.decode()
    assert "1 item(s) added" in page
    assert page.count("said #") == 1 and "said #9999." in page


def test_diff_of_the_first_checkpoint_pages_its_new_messages(admin_client, big):
    first = big[-1]
    url = f"{CHECKPOINTS}{first.pk}/changes/"
    page = admin_client.get(url).content.decode()
    held = TOTAL - 2
    assert "first checkpoint: every value is new" in page
    assert page.count("said #") == PAGE and f"said #{held - 1}." in page
    assert f"messages {held - PAGE + 1}–{held} of {held}" in page
    assert f'href="?messages_before={held - PAGE}"' in page
    older = admin_client.get(url, {"messages_before": held - PAGE}).content.decode()
    assert older.count("said #") == PAGE and f"said #{held - PAGE - 1}." in older
    assert f"said #{held - PAGE}." not in older
