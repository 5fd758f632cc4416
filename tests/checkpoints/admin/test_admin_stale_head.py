"""Issue 33: the admin's rollback and fork act on the head they showed, or on nothing.

Threads are written by a real LangGraph graph on the saver; the "concurrent" turn is the
same graph invoked again between showing the confirmation and posting it.
"""

from __future__ import annotations

import re
from html import unescape

import pytest

from checkpoints.errors import InvalidCheckpointInput, ThreadVersionConflict
from checkpoints.models import Checkpoint, Thread
from checkpoints.timetravel import TimeTravel
from tests.admin_fixtures import chat_graph, run_chat

pytestmark = pytest.mark.django_db(transaction=True)

CHECKPOINTS = "/admin/checkpoints/checkpoint/"
THREAD = "long-chat"
GARBLED = ["\x00", "x" * 5000]
# Strings the API's schema admits (no NUL, at most 1024 characters) that no head has.
NEVER_HEADS = ["not-an-id", " ", "\n\t", "abc\x07def"]


@pytest.fixture
def admin_client(client, superuser):
    client.force_login(superuser)
    return client


def stored(thread_id: str = THREAD) -> list[tuple[str, str]]:
    """Every checkpoint of the thread as (id, source), oldest first: "nothing written"."""
    return list(
        Checkpoint.objects.filter(thread__thread_id=thread_id)
        .order_by("checkpoint_id")
        .values_list("checkpoint_id", "source")
    )


def head_of(thread_id: str = THREAD) -> Checkpoint:
    return Checkpoint.objects.filter(thread__thread_id=thread_id).order_by("-checkpoint_id")[0]


def end_of_turn(saver, thread_id: str, turn: int) -> Checkpoint:
    """The checkpoint where the graph finished turn ``turn`` (nothing left to run)."""
    config = {"configurable": {"thread_id": thread_id}}
    for snapshot in chat_graph(saver).get_state_history(config):
        if snapshot.values.get("turn") == turn and not snapshot.next:
            wanted = snapshot.config["configurable"]["checkpoint_id"]
            return Checkpoint.objects.get(thread__thread_id=thread_id, checkpoint_id=wanted)
    raise AssertionError(f"turn {turn} of {thread_id} never finished")


def form_fields(page: str) -> dict[str, str]:
    """The hidden inputs of the confirmation form, as the browser would post them."""
    form = page[page.index('<form method="post"') :]
    form = form[: form.index("</form>")]
    return {
        name: unescape(value)
        for name, value in re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', form)
    }


@pytest.fixture
def ten_turns(saver):
    """A chat of ten turns (twenty messages); the target is the end of turn one (two)."""
    run_chat(saver, THREAD, turns=10)
    return end_of_turn(saver, THREAD, 1)


# -- the confirmation shows the head it will replace, and what goes -------------------------
def test_rollback_confirmation_carries_the_head_and_previews_what_goes(admin_client, ten_turns):
    head = head_of()
    page = admin_client.get(f"{CHECKPOINTS}{ten_turns.pk}/rollback/").content.decode()
    fields = form_fields(page)
    assert fields["expected_head"] == head.checkpoint_id
    assert fields["post"] == "yes" and fields["expected_version"] == "1"
    counts = re.sub(r"\s+", " ", re.search(r'id="discard-counts">(.*?)</p>', page).group(1))
    assert re.sub(r"<[^>]+>", "", counts) == (
        "18 messages discarded; channels changed: notes, turn"
    )
    # Each discarded message is listed (turns 2 to 10: the question and the answer).
    listed = page[page.index('class="cs-discarded-messages"') :]
    assert all(f"question {n}" in listed and f"answer {n}" in listed for n in range(2, 11))
    assert "question 1<" not in listed
    channels = dict(re.findall(r'<tr data-channel="([^"]+)" data-fate="([^"]+)"', page))
    assert channels == {"notes": "changed", "turn": "changed"}
    assert "9 key(s) removed" in page and "value replaced" in page


def test_fork_confirmation_previews_what_the_new_thread_leaves_out(admin_client, ten_turns):
    page = admin_client.get(f"{CHECKPOINTS}{ten_turns.pk}/fork/").content.decode()
    assert form_fields(page)["expected_head"] == head_of().checkpoint_id
    assert "Source thread's current head" in page
    counts = re.search(r'id="discard-counts">(.*?)</p>', page, re.S).group(1)
    assert re.sub(r"<[^>]+>", "", counts).startswith("18 messages left out")


def test_a_channel_the_target_lacks_is_named_as_removed(admin_client, saver):
    run_chat(saver, THREAD, turns=1)
    first = Checkpoint.objects.filter(thread__thread_id=THREAD).order_by("checkpoint_id")[0]
    page = admin_client.get(f"{CHECKPOINTS}{first.pk}/rollback/").content.decode()
    channels = dict(re.findall(r'<tr data-channel="([^"]+)" data-fate="([^"]+)"', page))
    # The input checkpoint holds the question in LangGraph's own input channel, which is
    # not listed: the turn's messages, notes and turn all go with the rollback.
    assert channels == {"notes": "removed", "turn": "removed"}
    counts = re.search(r'id="discard-counts">(.*?)</p>', page).group(1)
    assert re.sub(r"<[^>]+>", "", counts) == "2 messages discarded; channels removed: notes, turn"


# -- a head that moved is refused, and the new one shown ------------------------------------
def test_a_rollback_confirmed_against_a_stale_head_is_refused_and_shows_the_new_head(
    admin_client, saver, ten_turns
):
    url = f"{CHECKPOINTS}{ten_turns.pk}/rollback/"
    fields = form_fields(admin_client.get(url).content.decode())
    seen = fields["expected_head"]
    run_chat(saver, THREAD, turns=1)  # the agent's turn the operator never saw
    written = stored()
    new_head = head_of().checkpoint_id
    assert new_head != seen
    response = admin_client.post(url, fields)
    assert response.status_code == 409
    page = response.content.decode()
    assert "Nothing was rolled back: the head moved since this page was shown." in page
    # In words: what the page showed and when, what was written since, when, by which
    # node, and what to do; no raw pair of ids.
    words = re.sub(r"<[^>]+>", "", page[page.index('id="head-moved"') :])
    assert re.search(
        rf"This page showed checkpoint {seen}, written \d{{4}}-\d\d-\d\d [\d:]+ UTC, as the "
        rf"head\. Since then 4 checkpoint\(s\) were written: the head is now checkpoint "
        rf"{new_head}, written [\d: -]+UTC by node review at step \d+\.\s+"
        r"The page below shows the thread as it is now",
        words,
    ), words[:800]
    # The page is the confirmation again, for the head there is now.
    again = form_fields(page)
    assert again["expected_head"] == new_head
    current = page[page.index('id="current-head"') :]
    assert new_head in current[: current.index("</div>")]
    assert "20 messages discarded" in re.sub(r"<[^>]+>", "", page)
    assert stored() == written
    assert Thread.objects.get(thread_id=THREAD).version == 1
    # Confirming what is shown now goes through.
    done = admin_client.post(url, again)
    assert done.status_code == 302
    rolled = head_of()
    assert rolled.source == "rollback"
    assert rolled.metadata["rollback"]["replaced_head"] == new_head


def test_a_rollback_confirmed_against_the_current_head_proceeds(admin_client, ten_turns):
    url = f"{CHECKPOINTS}{ten_turns.pk}/rollback/"
    fields = form_fields(admin_client.get(url).content.decode())
    response = admin_client.post(url, fields, follow=True)
    assert response.status_code == 200
    rolled = head_of()
    assert rolled.source == "rollback"
    assert rolled.metadata["rollback"] == {
        "target": ten_turns.checkpoint_id,
        "replaced_head": fields["expected_head"],
    }
    assert f"rolled back to {ten_turns.checkpoint_id}" in response.content.decode()


def test_a_fork_confirmed_against_a_stale_head_is_refused_and_shows_the_new_head(
    admin_client, saver, ten_turns
):
    url = f"{CHECKPOINTS}{ten_turns.pk}/fork/"
    fields = form_fields(admin_client.get(url).content.decode())
    run_chat(saver, THREAD, turns=1)
    new_head = head_of().checkpoint_id
    written = stored()
    response = admin_client.post(url, {**fields, "new_thread_id": "branch-1"})
    assert response.status_code == 409
    page = response.content.decode()
    assert "Nothing was forked: the source's head moved since this page was shown." in page
    assert form_fields(page)["expected_head"] == new_head
    # The id the operator typed survives the refusal.
    assert 'value="branch-1"' in page
    assert not Thread.objects.filter(thread_id="branch-1").exists()
    assert stored() == written
    done = admin_client.post(url, {**form_fields(page), "new_thread_id": "branch-1"})
    assert done.status_code == 302
    assert [source for _, source in stored("branch-1")] == ["fork"]


# -- the version field is required and checked: 400, never 500 ------------------------------
@pytest.mark.parametrize("op", ["rollback", "fork"])
def test_a_missing_head_field_is_a_400_naming_it(admin_client, ten_turns, op):
    written = stored()
    for data in ({"post": "yes"}, {"post": "yes", "expected_head": ""}):
        response = admin_client.post(
            f"{CHECKPOINTS}{ten_turns.pk}/{op}/", {**data, "new_thread_id": "never"}
        )
        assert response.status_code == 400
        assert response["Content-Type"].startswith("text/plain")
        assert response.content.decode().startswith("expected_head is missing")
    assert stored() == written
    assert not Thread.objects.filter(thread_id="never").exists()


@pytest.mark.parametrize("op", ["rollback", "fork"])
@pytest.mark.parametrize("garbled", GARBLED)
def test_a_garbled_head_field_is_a_400_naming_it(admin_client, ten_turns, op, garbled):
    written = stored()
    response = admin_client.post(
        f"{CHECKPOINTS}{ten_turns.pk}/{op}/",
        {"post": "yes", "expected_head": garbled, "new_thread_id": "never"},
    )
    assert response.status_code == 400
    assert response.content.decode().startswith("expected_head must be the id of the head")
    assert stored() == written
    assert not Thread.objects.filter(thread_id="never").exists()


@pytest.mark.parametrize("never", NEVER_HEADS)
def test_a_head_that_never_was_one_is_refused_as_moved(admin_client, ten_turns, never):
    written = stored()
    response = admin_client.post(
        f"{CHECKPOINTS}{ten_turns.pk}/rollback/", {"post": "yes", "expected_head": never}
    )
    assert response.status_code == 409
    assert "Nothing was rolled back: the head moved" in response.content.decode()
    assert stored() == written


def test_the_list_action_leads_to_a_confirmation_that_carries_the_head(admin_client, ten_turns):
    page = admin_client.post(
        CHECKPOINTS, {"action": "rollback_selected", "_selected_action": [ten_turns.pk]}
    ).content.decode()
    assert form_fields(page)["expected_head"] == head_of().checkpoint_id


# -- the policy lives in the service: every entrance gets the same answer ---------------------
def test_the_service_refuses_a_stale_head_before_writing(saver):
    run_chat(saver, THREAD, turns=2)
    travel = TimeTravel(saver)
    first = stored()[0][0]
    seen = head_of().checkpoint_id
    run_chat(saver, THREAD, turns=1)
    written = stored()
    with pytest.raises(ThreadVersionConflict) as refused:
        travel.rollback(THREAD, first, expected_head=seen)
    assert refused.value.field == "expected_head"
    assert head_of().checkpoint_id in refused.value.message and seen in refused.value.message
    with pytest.raises(ThreadVersionConflict):
        travel.fork(THREAD, first, "never", expected_head=seen)
    assert stored() == written and not Thread.objects.filter(thread_id="never").exists()
    with pytest.raises(InvalidCheckpointInput) as bad:
        travel.rollback(THREAD, first, expected_head="\x00")
    assert bad.value.field == "expected_head"
    travel.rollback(THREAD, first, expected_head=head_of().checkpoint_id)
    assert head_of().source == "rollback"


async def test_the_async_rollback_checks_the_head_too(saver):
    from asgiref.sync import sync_to_async

    await sync_to_async(run_chat)(saver, THREAD, turns=1)
    rows = await sync_to_async(stored)()
    with pytest.raises(ThreadVersionConflict):
        await TimeTravel(saver).arollback(THREAD, rows[0][0], expected_head=rows[0][0])
    assert await sync_to_async(stored)() == rows
