"""Issue 54 item 7: act on a thread from its page. Edit a channel as LangGraph's update_state
would (the same graph run on InMemorySaver is the reference), confirm first, audited, refused
without the permission or with bad input; a waiting thread's question and the calls that
answer it; the branch switcher.

Threads are written by a real LangGraph graph on the deployment's saver."""

from __future__ import annotations

import re
from html import unescape

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from checkpoints.models import AuditEvent, Checkpoint, Thread
from checkpoints.timetravel import TimeTravel
from tests.admin_fixtures import chat_graph, run_chat, staff_user
from tests.checkpoints.langgraph_api import graphs as lg_graphs

pytestmark = pytest.mark.django_db(transaction=True)

GRAPH = "agent"
SPEC = "tests.checkpoints.langgraph_api.graphs:graph"


@pytest.fixture
def registered(settings, saver):
    settings.CHECKPOINTS = {**settings.CHECKPOINTS, "GRAPHS": {GRAPH: SPEC}}
    return saver


@pytest.fixture
def admin_client(client, superuser):
    client.force_login(superuser)
    return client


def config(thread_id: str) -> dict:
    return {"configurable": {"thread_id": thread_id}, "metadata": {"graph_id": GRAPH}}


def run_waiting(checkpointer, thread_id: str):
    """The API tests' graph asks "approve?" at review when the topic is "ask"."""
    graph = lg_graphs.builder.compile(checkpointer=checkpointer)
    graph.invoke({"topic": "ask"}, config(thread_id))
    return graph


def edit_url(thread_id: str) -> str:
    return f"/admin/checkpoints/thread/{Thread.objects.get(thread_id=thread_id).pk}/edit-state/"


def thread_page(client, thread_id: str, query: str = "") -> str:
    pk = Thread.objects.get(thread_id=thread_id).pk
    answer = client.get(f"/admin/checkpoints/thread/{pk}/change/{query}")
    assert answer.status_code == 200
    return answer.content.decode()


def hidden(page: str) -> dict[str, str]:
    return {
        unescape(name): unescape(value)
        for name, value in re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', page)
    }


def stored(thread_id: str) -> list[str]:
    return list(
        Checkpoint.objects.filter(thread__thread_id=thread_id)
        .order_by("checkpoint_id")
        .values_list("checkpoint_id", flat=True)
    )


def test_edit_state_equals_langgraphs_update_state(registered, admin_client, superuser):
    store_graph = run_waiting(registered, "w-1")
    memory = InMemorySaver()
    memory_graph = run_waiting(memory, "w-1")
    form = {"channel": "notes", "as_node": "write", "value": '["edited by hand"]'}

    shown = admin_client.get(edit_url("w-1")).content.decode()
    assert 'option value="notes"' in shown and 'option value="write"' in shown
    before = stored("w-1")
    review = admin_client.post(edit_url("w-1"), form)
    assert review.status_code == 200
    page = review.content.decode()
    assert "Write this update?" in page and "edited by hand" in page
    assert stored("w-1") == before, "the review step writes nothing"
    done = admin_client.post(edit_url("w-1"), hidden(page))
    assert done.status_code == 302

    memory_graph.update_state(config("w-1"), {"notes": ["edited by hand"]}, as_node="write")
    ours = store_graph.get_state(config("w-1"))
    theirs = memory_graph.get_state(config("w-1"))
    assert ours.values == theirs.values
    assert ours.values["notes"][-1] == "edited by hand" and len(ours.values["notes"]) > 1
    assert ours.next == theirs.next == ("review",)
    assert ours.metadata["source"] == "update"

    event = AuditEvent.objects.get(action="bulk_update", thread_id="w-1")
    assert event.origin == "admin" and event.user_id == superuser.pk
    assert event.detail == {
        "supersteps": 1,
        "channels": ["notes"],
        "as_node": ["write"],
        "graph": GRAPH,
        "new_head": ours.config["configurable"]["checkpoint_id"],
    }


def test_a_head_that_moved_is_refused_in_words(registered, admin_client):
    graph = run_waiting(registered, "w-2")
    form = {"channel": "topic", "as_node": "", "value": '"other"'}
    page = admin_client.post(edit_url("w-2"), form).content.decode()
    graph.update_state(config("w-2"), {"topic": "moved"})
    before = stored("w-2")
    refused = admin_client.post(edit_url("w-2"), hidden(page))
    assert refused.status_code == 409
    assert "head moved" in refused.content.decode()
    assert stored("w-2") == before
    assert graph.get_state(config("w-2")).values["topic"] == "moved"


@pytest.mark.parametrize(
    ("form", "words"),
    [
        (
            {"channel": "notes", "value": '["a"'},
            "the value for channel &#x27;notes&#x27; is not JSON",
        ),
        ({"channel": "nope", "value": "1"}, "channel &#x27;nope&#x27; is not a channel"),
        ({"channel": "notes", "as_node": "ghost", "value": "[]"}, "node &#x27;ghost&#x27;"),
    ],
)
def test_bad_input_is_named_and_writes_nothing(registered, admin_client, form, words):
    run_waiting(registered, "w-3")
    before = stored("w-3")
    answer = admin_client.post(edit_url("w-3"), {**form, "post": "yes"})
    assert answer.status_code == 400
    assert words in answer.content.decode()
    assert stored("w-3") == before
    assert not AuditEvent.objects.filter(thread_id="w-3").exists()


def test_a_reducer_refusal_names_the_channel(registered, admin_client):
    run_waiting(registered, "w-4")
    page = admin_client.post(edit_url("w-4"), {"channel": "notes", "value": "5"}).content
    answer = admin_client.post(edit_url("w-4"), hidden(page.decode()))
    assert answer.status_code == 400
    assert "channel &#x27;notes&#x27;" in answer.content.decode()


def test_without_the_permission_the_refusal_is_inside_the_admin(registered, client):
    run_waiting(registered, "w-5")
    client.force_login(staff_user("viewer", "checkpoints.view_thread"))
    before = stored("w-5")
    for answer in (
        client.get(edit_url("w-5")),
        client.post(edit_url("w-5"), {"channel": "topic", "value": '"x"', "post": "yes"}),
    ):
        assert answer.status_code == 403
        page = answer.content.decode()
        assert "checkpoints.change_checkpoint" in page
        assert 'id="site-name"' in page and 'class="breadcrumbs"' in page
    assert stored("w-5") == before
    # Each refused attempt is audited as an accepted one would be, marked refused.
    events = AuditEvent.objects.filter(action="bulk_update", thread_id="w-5")
    assert events.count() == 2
    assert all(e.detail["refused"] == "missing permission" for e in events)


def test_without_a_registered_graph_the_form_says_what_registers_one(saver, admin_client):
    run_waiting(saver, "w-6")
    page = admin_client.get(edit_url("w-6")).content.decode()
    assert "No registered graph" in page and "<code>agent</code>" in page
    assert "CHECKPOINTS_GRAPHS" in page and 'CHECKPOINTS["GRAPHS"]' in unescape(page)
    assert "<textarea" not in page


def test_waiting_thread_shows_its_question_and_the_resume_calls(registered, admin_client, settings):
    run_waiting(registered, "w-7")
    page = unescape(thread_page(admin_client, "w-7"))
    assert '"question": "approve?"' in page
    assert "does not run graphs" in page and 'CHECKPOINTS["GRAPH_SERVER_URL"]' in page
    assert (
        "graph = RemoteGraph('agent', url='https://<your LangGraph deployment>')\n"
        'config = {"configurable": {"thread_id": \'w-7\'}}\n'
        "graph.invoke(Command(resume='<your answer>'), config)" in page
    )
    assert (
        "client = get_sync_client(url='https://<your LangGraph deployment>')\n"
        "client.runs.create('w-7', 'agent', command={\"resume\": '<your answer>'})" in page
    )

    settings.CHECKPOINTS = {**settings.CHECKPOINTS, "GRAPH_SERVER_URL": "https://lg.example.com"}
    query = "?resume_answer=" + '{"approved": true, "note": "ok"}'.replace(" ", "%20")
    page = unescape(thread_page(admin_client, "w-7", query))
    assert "<code>https://lg.example.com</code>" in page
    said = "{'approved': True, 'note': 'ok'}"
    assert "RemoteGraph('agent', url='https://lg.example.com')" in page
    assert f"graph.invoke(Command(resume={said}), config)" in page
    assert f"client.runs.create('w-7', 'agent', command={{\"resume\": {said}}})" in page

    page = unescape(thread_page(admin_client, "w-7", "?resume_answer=yes&branch_at=abc"))
    assert "the answer is not JSON" in page
    # The answer's form keeps the page's other parameters (the branch shown, the store).
    assert '<input type="hidden" form="cs-answer-form" name="branch_at" value="abc">' in page
    assert '<form id="cs-answer-form" method="get"' in page


def test_a_finished_thread_asks_nothing(saver, admin_client):
    run_chat(saver, "done-1", turns=1)
    page = thread_page(admin_client, "done-1")
    assert "Waiting on a human" not in page and "Edit a channel" in page
    assert 'id="cs-branches"' not in page, "a thread that never branched has no switcher"


def test_branch_switcher_links_each_branch_head(saver, admin_client):
    run_chat(saver, "br-1", turns=2)
    graph = chat_graph(saver)
    cfg = {"configurable": {"thread_id": "br-1"}}
    states = list(graph.get_state_history(cfg))
    first_turn_end = next(s for s in states if s.values.get("turn") == 1 and not s.next)
    old_head = states[0].config["configurable"]["checkpoint_id"]
    # An update from an earlier checkpoint starts a second branch there.
    new = graph.update_state(first_turn_end.config, {"turn": 10}, as_node="review")
    new_head = new["configurable"]["checkpoint_id"]
    fork_at = first_turn_end.config["configurable"]["checkpoint_id"]

    page = thread_page(admin_client, "br-1")
    assert f'data-at="{fork_at}"' in page
    assert "branch 2 of 2" in page
    head_pk = Checkpoint.objects.get(checkpoint_id=new_head).pk
    assert f'/admin/checkpoints/checkpoint/{head_pk}/change/">{new_head}</a> (the thread' in page
    prev = re.search(r'class="cs-branch-prev" href="([^"]+)"', page).group(1)
    assert f"branch_at={old_head}" in unescape(prev)

    other = admin_client.get(unescape(prev)).content.decode()
    assert "branch 1 of 2" in other
    # The state card follows the shown branch: its head, not the thread's.
    card = other[other.index('class="cs-card cs-current"') :]
    assert card.index("State of the shown branch") < card.index(f">{old_head}</a>")
    assert f">{new_head}</a>)" in card  # the thread's head, named beside it
    assert "Current state" in page and "State of the shown branch" not in page
    old_pk = Checkpoint.objects.get(checkpoint_id=old_head).pk
    assert f'/admin/checkpoints/checkpoint/{old_pk}/change/">{old_head}</a><' in other
    back = re.search(r'class="cs-branch-next" href="([^"]+)"', other).group(1)
    assert f"branch_at={new_head}" in unescape(back)


def test_a_rollback_is_a_branch_too(saver, admin_client):
    run_chat(saver, "br-2", turns=2)
    cfg = {"configurable": {"thread_id": "br-2"}}
    states = list(chat_graph(saver).get_state_history(cfg))
    target = next(s for s in states if s.values.get("turn") == 1 and not s.next)
    target_id = target.config["configurable"]["checkpoint_id"]
    TimeTravel(saver).rollback("br-2", target_id)
    page = thread_page(admin_client, "br-2")
    assert f'data-at="{target_id}"' in page and "branch 2 of 2" in page


def test_a_question_asked_inside_a_subgraph_is_shown(saver, admin_client):
    graph = lg_graphs.nested_builder.compile(checkpointer=saver)
    graph.invoke({"topic": "news"}, config("nested-1"))
    page = unescape(thread_page(admin_client, "nested-1"))
    assert '"question": "publish news?"' in page
    assert "client.runs.create('nested-1', 'agent'" in page


def test_a_graph_that_fails_to_load_is_named_not_a_500(saver, admin_client, settings):
    run_waiting(saver, "w-8")
    settings.CHECKPOINTS = {**settings.CHECKPOINTS, "GRAPHS": {GRAPH: "tests.no_such_mod:graph"}}
    answer = admin_client.get(edit_url("w-8"))
    assert answer.status_code == 503
    page = unescape(answer.content.decode())
    assert "cannot be loaded" in page and "tests.no_such_mod:graph" in page
    assert "<textarea" not in page


def test_the_edit_button_is_offered_only_to_who_may_use_it(registered, client, admin_client):
    run_waiting(registered, "w-9")
    assert "cs-edit-state" in thread_page(admin_client, "w-9")
    client.force_login(staff_user("looker", "checkpoints.view_thread"))
    page = thread_page(client, "w-9")
    assert "cs-edit-state" not in page and '"question": "approve?"' in unescape(page)
