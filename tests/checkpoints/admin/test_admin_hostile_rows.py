"""The admin under hostile rows, on SQLite and PostgreSQL: a tampered sealed value is said in
words on its pages (never a 500), and a value over the preview size is shown cut, with a
download of the whole value that only those who may see the page get."""

from __future__ import annotations

import base64
import json
import os
import re
from html import unescape
from urllib.parse import urlencode

import pytest
from django.conf import settings
from django.test import override_settings
from langchain_core.messages import AIMessage, HumanMessage

from checkpoints.conf import store_settings
from checkpoints.errors import CheckpointConfigError
from checkpoints.models import ChannelBlob, Checkpoint, PendingWrite
from tests.admin_fixtures import staff_user
from tests.store_helpers import make_saver, put_chain

pytestmark = pytest.mark.django_db(
    transaction=True,
    databases=["default", "pg"] if "pg" in settings.DATABASES else ["default"],
)

KEY = base64.urlsafe_b64encode(os.urandom(32)).decode()
SECRET = "the launch code is 0000"
PAGE = "/admin/checkpoints/checkpoint/{}/{}"
MiB = 1024 * 1024


@pytest.fixture(params=["sqlite", "postgres"])
def orm_store(request):
    return make_saver(request, request.param)


@pytest.fixture
def admin_client(client, superuser):
    client.force_login(superuser)
    return client


def on_store(saver, path: str, **query) -> str:
    """``path`` reading ``saver``'s database, as the admin's own links carry the choice."""
    if saver.db_alias != "default":
        query["_changelist_filters"] = urlencode({"provider": saver.db_alias})
    return f"{path}?{urlencode(query)}" if query else path


def head_row(saver, thread_id: str) -> Checkpoint:
    rows = Checkpoint.objects.using(saver.db_alias).filter(thread__thread_id=thread_id)
    return rows.order_by("-checkpoint_id")[0]


# -- 1. a tampered sealed row ----------------------------------------------------------------
TAMPERS = {
    # The authentication tag no longer matches: AES-GCM refuses the bytes.
    "flipped": lambda b: b[:-1] + bytes([b[-1] ^ 1]),
    # Too short to hold a nonce: the cipher itself refuses them (a ValueError underneath).
    "cut short": lambda b: b[:12],
}
PARTS = {
    "channel": "channel 'secret'",
    "write": "pending write 'secret' of task 'task-1'",
}


@pytest.fixture
def sealing():
    with override_settings(CHECKPOINTS={**store_settings(), "ENCRYPTION_KEYS": [KEY]}):
        yield


def tamper(saver, kind: str, how: str) -> None:
    model = ChannelBlob if kind == "channel" else PendingWrite
    rows = model.objects.using(saver.db_alias).filter(channel="secret")
    row = rows.order_by("-pk")[0]
    assert row.type.endswith("+aesgcm")
    rows.filter(pk=row.pk).update(blob=TAMPERS[how](bytes(row.blob)))


def sealed_thread(saver, kind: str, how: str) -> Checkpoint:
    config = put_chain(saver, "sealed", {"secret": SECRET, "plain": "visible"}, steps=2)
    saver.put_writes(config, [("secret", SECRET)], "task-1")
    tamper(saver, kind, how)
    return head_row(saver, "sealed")


@pytest.mark.parametrize("how", list(TAMPERS))
@pytest.mark.parametrize("kind", list(PARTS))
def test_a_tampered_sealed_value_is_said_in_words_on_its_page(
    admin_client, orm_store, sealing, kind, how
):
    row = sealed_thread(orm_store, kind, how)
    response = admin_client.get(on_store(orm_store, PAGE.format(row.pk, "change/")))
    assert response.status_code == 200
    page = unescape(response.content.decode())
    assert 'id="container"' in page  # inside the admin's chrome
    assert "Cannot decode this checkpoint" in page
    # Which part, that it did not open, and what the operator can do.
    part = PARTS[kind]
    if how == "flipped":
        assert f"The sealed {part} failed to open." in page.replace("<code>", "").replace(
            "</code>", ""
        )
        assert "failed authentication: it was tampered with or corrupted" in page
        assert 'any entry of CHECKPOINTS["ENCRYPTION_KEYS"] opens it' in page
    else:
        assert f"cannot decode {part} of checkpoint" in page
    assert "What you can do:" in page and "restore the row from a backup" in page
    assert "in thread 'sealed'" in page and row.checkpoint_id in page
    assert SECRET not in page
    # The lineage and metadata above the refusal are still shown.
    assert "Lineage" in page and '"step": 2' in page


@pytest.mark.parametrize("how", list(TAMPERS))
def test_every_page_of_a_tampered_checkpoint_answers_in_words(
    admin_client, orm_store, sealing, how
):
    row = sealed_thread(orm_store, "channel", how)
    older = Checkpoint.objects.using(orm_store.db_alias).exclude(pk=row.pk).get()
    refused = {
        on_store(orm_store, PAGE.format(row.pk, "changes/")): "Cannot show what checkpoint",
        on_store(orm_store, PAGE.format(row.pk, "value/"), channel="secret"): (
            "Cannot download channel secret of checkpoint"
        ),
    }
    for url, said in refused.items():
        response = admin_client.get(url, follow=True)
        assert response.status_code == 200, url
        page = unescape(response.content.decode())
        assert said in page and "in thread 'sealed'" in page, url
        assert SECRET not in page
    compare = admin_client.get(
        on_store(orm_store, "/admin/checkpoints/checkpoint/compare/", a=older.pk, b=row.pk),
        follow=True,
    )
    assert compare.status_code == 200
    compared = unescape(compare.content.decode())
    assert f"Cannot compare checkpoint {older.checkpoint_id} with {row.checkpoint_id}" in compared
    thread = admin_client.get(
        on_store(orm_store, f"/admin/checkpoints/thread/{row.thread_id}/change/")
    )
    assert thread.status_code == 200
    said = unescape(thread.content.decode())
    assert "Cannot read the head checkpoint" in said and "What you can do:" in said
    assert "channel 'secret'" in said and SECRET not in said
    for listing in ("/admin/checkpoints/thread/", "/admin/checkpoints/checkpoint/"):
        query = {"provider": orm_store.db_alias} if orm_store.db_alias != "default" else {}
        assert admin_client.get(listing, query).status_code == 200, listing


@pytest.mark.parametrize("metadata", [["not", "an", "object"], "text", 7])
def test_a_checkpoint_row_whose_metadata_is_not_an_object_still_shows(
    admin_client, orm_store, metadata
):
    put_chain(orm_store, "odd-meta", {"plain": "visible"}, steps=2)
    row = head_row(orm_store, "odd-meta")
    Checkpoint.objects.using(orm_store.db_alias).filter(pk=row.pk).update(metadata=metadata)
    query = {"provider": orm_store.db_alias} if orm_store.db_alias != "default" else {}
    history = admin_client.get(
        "/admin/checkpoints/checkpoint/", {**query, "thread__id__exact": row.thread_id}
    )
    assert history.status_code == 200
    assert row.checkpoint_id in history.content.decode()
    page = admin_client.get(on_store(orm_store, PAGE.format(row.pk, "change/")))
    assert page.status_code == 200
    assert "The stored <code>the metadata</code> cannot be read." in page.content.decode()


# -- 2. values over the preview size ---------------------------------------------------------
PREVIEW = 256 * 1024
# Two values of 3 MiB and a 3 MiB pending write show at most a preview each; what else the
# page holds (the admin's chrome, the small values, the escaping of the cut JSON) is well
# under a MiB.
PAGE_BOUND = 3 * PREVIEW + MiB


def big_text(size: int, mark: str) -> str:
    line = f"{mark}: the quick brown fox jumps over the lazy dog <&> 0123456789\n"
    return (line * (size // len(line) + 1))[:size]


def big_checkpoint(saver) -> dict:
    values = {
        "doc": big_text(3 * MiB, "doc"),
        "rows": [{"n": i, "text": f"row {i}"} for i in range(120_000)],
        "small": "shown whole",
    }
    config = put_chain(saver, "big", values, steps=1)
    saver.put_writes(config, [("doc", big_text(3 * MiB, "write"))], "task-1")
    return values


def links(page: str) -> list[str]:
    return [unescape(h) for h in re.findall(r'class="cs-download" href="([^"]+)"', page)]


def downloaded(client, url: str):
    response = client.get(url)
    assert response.status_code == 200, response.content[:300]
    assert response["Content-Disposition"].startswith("attachment; filename=")
    assert response["Content-Type"] == "application/json; charset=utf-8"
    return json.loads(b"".join(response.streaming_content))


def test_a_value_over_the_preview_size_is_cut_with_a_download_of_it_whole(admin_client, orm_store):
    values = big_checkpoint(orm_store)
    row = head_row(orm_store, "big")
    response = admin_client.get(on_store(orm_store, PAGE.format(row.pk, "change/")))
    assert response.status_code == 200
    assert len(response.content) < PAGE_BOUND, len(response.content)
    page = response.content.decode()
    assert page.count("Too large to show here whole") == 3
    assert page.count("the first 256.0 KiB of it") == 3
    assert "shown whole" in page
    found = links(page)
    assert len(found) == 3
    by_value = {}
    for url in found:
        assert url.startswith(PAGE.format(row.pk, "value/"))
        by_value[url.split("?", 1)[1].split("&")[0]] = url
    assert set(by_value) == {"channel=doc", "channel=rows", "write=0"}
    assert downloaded(admin_client, by_value["channel=doc"]) == values["doc"]
    assert downloaded(admin_client, by_value["channel=rows"]) == values["rows"]
    assert downloaded(admin_client, by_value["write=0"]) == big_text(3 * MiB, "write")
    # The cut keeps the value's own shape: the first rows, each whole.
    shown = re.search(r'<pre class="cs-json">(\[.*?)</pre>', page, re.S).group(1)
    assert '"n": 0,' in unescape(shown) and '"text": "row 0"' in unescape(shown)
    assert len(unescape(shown)) <= PREVIEW + 1


def test_the_preview_size_is_a_setting(admin_client, orm_store):
    big_checkpoint(orm_store)
    row = head_row(orm_store, "big")
    url = on_store(orm_store, PAGE.format(row.pk, "change/"))
    with override_settings(
        CHECKPOINTS={**store_settings(), "ADMIN_VALUE_PREVIEW_BYTES": 16 * 1024}
    ):
        small = admin_client.get(url)
    assert small.status_code == 200
    assert small.content.decode().count("the first 16.0 KiB of it") == 3
    assert len(small.content) < 3 * 16 * 1024 + MiB


def test_a_long_message_is_cut_in_the_transcript(admin_client, orm_store):
    said = big_text(2 * MiB, "said")
    put_chain(
        orm_store,
        "talk",
        {"messages": [HumanMessage(content="hi", id="m0"), AIMessage(content=said, id="m1")]},
    )
    row = head_row(orm_store, "talk")
    response = admin_client.get(on_store(orm_store, PAGE.format(row.pk, "change/")))
    assert response.status_code == 200
    assert len(response.content) < 2 * PREVIEW * 6 + MiB
    page = response.content.decode()
    assert "Too long to show here whole" in page
    assert downloaded(admin_client, links(page)[0])[1]["content"] == said


def test_the_download_is_for_those_who_may_see_the_page(client, orm_store):
    big_checkpoint(orm_store)
    row = head_row(orm_store, "big")
    url = on_store(orm_store, PAGE.format(row.pk, "value/"), channel="doc")
    client.force_login(staff_user("nosy", "checkpoints.view_thread"))
    assert client.get(url).status_code == 403
    client.force_login(staff_user("viewer", "checkpoints.view_checkpoint"))
    assert downloaded(client, url) == big_text(3 * MiB, "doc")
    client.logout()
    anonymous = client.get(url)
    assert anonymous.status_code == 302 and "/login/" in anonymous["Location"]


@pytest.mark.parametrize(
    ("query", "status", "said"),
    [
        ({}, 400, "name one value"),
        ({"channel": "doc", "write": "0"}, 400, "name one value"),
        ({"write": "first"}, 400, "write must be a pending write's position"),
        ({"write": "9" * 30}, 400, "write must be a pending write's position"),
        ({"write": "5"}, 404, ""),
        ({"channel": "nowhere"}, 404, ""),
    ],
)
def test_a_download_of_no_value_is_refused_by_name(admin_client, saver, query, status, said):
    big_checkpoint(saver)
    row = head_row(saver, "big")
    response = admin_client.get(PAGE.format(row.pk, "value/"), query)
    assert response.status_code == status
    assert said in response.content.decode()


def test_a_page_of_many_values_under_the_size_stays_within_its_allowance(admin_client, orm_store):
    preview = 16 * 1024
    values = {f"v{i:02}": big_text(preview - 1024, f"v{i:02}") for i in range(30)}
    put_chain(orm_store, "many", values)
    row = head_row(orm_store, "many")
    with override_settings(CHECKPOINTS={**store_settings(), "ADMIN_VALUE_PREVIEW_BYTES": preview}):
        response = admin_client.get(on_store(orm_store, PAGE.format(row.pk, "change/")))
    assert response.status_code == 200
    # 30 values of 15 KiB: eight previews' worth are shown, the rest as links.
    assert len(response.content) < 8 * preview * 2 + MiB
    page = response.content.decode()
    assert "none of it, as this page has shown all the values it may" in page
    assert len(links(page)) >= 30 - 8
    assert downloaded(admin_client, links(page)[-1]) == values["v29"]


def test_a_diff_of_many_changed_keys_shows_the_first_and_counts_the_rest(admin_client, orm_store):
    put_chain(orm_store, "keys-a", {"d": {f"k{i:05}": i for i in range(20_000)}})
    put_chain(orm_store, "keys-b", {"d": {f"k{i:05}": -i for i in range(20_000)}})
    a, b = head_row(orm_store, "keys-a"), head_row(orm_store, "keys-b")
    response = admin_client.get(
        on_store(orm_store, "/admin/checkpoints/checkpoint/compare/", a=a.pk, b=b.pk)
    )
    assert response.status_code == 200
    assert len(response.content) < 500 * 1024
    page = response.content.decode()
    assert "19899 more changed keys not shown" in page
    # k00000 is 0 on both sides: the first hundred changed are k00001 to k00100.
    assert "k00100" in page and "k00101" not in page


@pytest.mark.parametrize("size", ["256k", 0, -1, 2.5, True])
def test_a_preview_size_that_is_not_a_size_is_named(admin_client, saver, size):
    put_chain(saver, "conf", {"small": "shown whole"})
    row = head_row(saver, "conf")
    with override_settings(CHECKPOINTS={**store_settings(), "ADMIN_VALUE_PREVIEW_BYTES": size}):
        with pytest.raises(CheckpointConfigError, match="ADMIN_VALUE_PREVIEW_BYTES"):
            admin_client.get(PAGE.format(row.pk, "change/"))
