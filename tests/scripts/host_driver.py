"""Drive a fresh `django-admin startproject` host that installed the wheel.

Run inside the host's own virtualenv, from the host's folder, with
DJANGO_SETTINGS_MODULE=host.settings. Prints one JSON summary line; each check that fails is
listed in it rather than stopping the walk, so one run shows every problem.
"""

from __future__ import annotations

import io
import json
import operator
import traceback
from typing import Annotated, TypedDict

import django

django.setup()

from django.contrib import admin  # noqa: E402
from django.contrib.admin.utils import quote  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import setup_test_environment  # noqa: E402
from django.urls import reverse  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.types import Command, interrupt  # noqa: E402

PREFIX = "/checkpoints/api"
summary: dict = {"problems": [], "admin_pages": {}, "api": {}}


def problem(text: str) -> None:
    summary["problems"].append(text)


class State(TypedDict):
    log: Annotated[list[str], operator.add]


def approve(state: State) -> dict:
    return {"log": [f"approved:{interrupt('publish?')}"]}


def graph_with_interrupt(saver):
    builder = StateGraph(State)
    builder.add_node("draft", lambda state: {"log": ["drafted"]})
    builder.add_node("approve", approve)
    builder.add_edge(START, "draft")
    builder.add_edge("draft", "approve")
    builder.add_edge("approve", END)
    return builder.compile(checkpointer=saver)


def run_graphs(user) -> None:
    """The interrupt/resume graph on the host's store, twice: get_saver and from_conn_string."""
    from django.conf import settings

    from checkpoints import from_conn_string
    from checkpoints.demo import build_demo_graph
    from checkpoints.store.registry import get_saver

    saver = get_saver()
    graph = graph_with_interrupt(saver)
    config = {"configurable": {"thread_id": "host-interrupt", "user_id": user.pk}}
    first = graph.invoke({"log": ["asked"]}, config)
    second = graph.invoke(Command(resume="yes"), config)
    summary["graph"] = {
        "provider": saver.provider,
        "interrupted": "__interrupt__" in first,
        "log": second["log"],
    }
    url = f"sqlite:///{settings.DATABASES['default']['NAME']}"
    with from_conn_string(url) as same_store:
        resumed = same_store.get_tuple({"configurable": {"thread_id": "host-interrupt"}})
        summary["from_conn_string"] = {
            "alias": same_store.using,
            "log": resumed.checkpoint["channel_values"]["log"],
        }
    demo = build_demo_graph(saver)
    for index, topic in enumerate(["retention", "needs approval: sweep"], start=1):
        demo.invoke(
            {"topic": topic, "messages": [f"user: {topic}"]},
            {"configurable": {"thread_id": f"host-demo-{index}", "user_id": user.pk}},
        )
    # SQLite cannot hold a parked run (parks are for postgres and redis); the row a redis
    # store's park records in the default database gives the parks pages one to open.
    from datetime import timedelta

    from checkpoints.store.planning import utcnow
    from retention.models import Park

    Park.objects.create(
        thread_id="host-parked",
        deadline=utcnow() + timedelta(days=1),
        created_at=utcnow(),
        provider="redis",
    )
    # A hold, as an operator places one, so the holds pages have a row to open.
    from retention.holds import hold_thread

    hold_thread(saver, "host-demo-2", reason="kept for the host walk", by=user.get_username())


def api_walk(client: Client) -> None:
    def call(name: str, method: str, path: str, body=None, expect=200, **headers):
        kwargs = {"content_type": "application/json"} if body is not None else {}
        response = getattr(client, method)(
            path, json.dumps(body) if body is not None else None, **kwargs, **headers
        )
        summary["api"][name] = response.status_code
        if response.status_code != expect:
            problem(f"API {method.upper()} {path}: {response.status_code} {response.content[:300]}")
            return None
        ctype = response.get("Content-Type", "")
        return response.json() if ctype.startswith("application/json") else response

    thread = f"{PREFIX}/threads/host-demo-1"
    listed = call("threads", "get", f"{PREFIX}/threads/")
    if listed and {"count", "results"} - set(listed):
        problem(f"thread list is not paginated: {sorted(listed)}")
    call("thread", "get", f"{thread}/")
    history = call("history", "get", f"{thread}/history/", expect=200)
    call("state", "get", f"{thread}/state/")
    if history:
        oldest = history["results"][-1]["config"]["configurable"]["checkpoint_id"]
        call("rollback", "post", f"{thread}/rollback/", {"checkpoint_id": oldest})
        call(
            "fork",
            "post",
            f"{thread}/fork/",
            {"checkpoint_id": oldest, "new_thread_id": "host-fork"},
            expect=201,
        )
    call(
        "bulk-update",
        "post",
        f"{thread}/bulk-update/",
        {"supersteps": [[{"channel": "topic", "value": "rewritten"}]]},
    )
    call("retention", "post", f"{thread}/retention/", {"waiting_minutes": 60})
    call("finish", "post", f"{thread}/finish/")
    call("unfinish", "delete", f"{thread}/finish/")
    call("finish-again", "post", f"{thread}/finish/")
    call("sweep-dry-run", "post", f"{PREFIX}/checkpoints/sweep/", {"dry_run": True})
    call("sweep", "post", f"{PREFIX}/checkpoints/sweep/", {})
    call("sweeps", "get", f"{PREFIX}/checkpoints/sweeps/")
    call("delete", "delete", f"{PREFIX}/threads/host-fork/", expect=204)
    missing = call("missing", "get", f"{PREFIX}/threads/nobody/", expect=404)
    if missing and set(missing) != {"error"}:
        problem(f"404 body is not the API's error shape: {missing}")
    schema = call("schema", "get", f"{PREFIX}/schema/", HTTP_ACCEPT="application/json")
    if schema and f"{PREFIX}/threads/{{thread_id}}/rollback/" not in schema["paths"]:
        problem(f"schema paths miss the mounted prefix: {sorted(schema['paths'])[:3]}")
    docs = call("docs", "get", f"{PREFIX}/docs/")
    if docs is not None:
        html = docs.content.decode()
        if "cdn" in html.lower() or "https://" in html:
            problem("API docs load from another server")
        call("docs-asset", "get", f"{PREFIX}/docs/assets/swagger-ui-bundle.js")


def admin_walk(client: Client, user) -> None:
    """Every page the admin site and each registered ModelAdmin route, for its first object.

    Add and delete pages a ModelAdmin refuses to everyone (read-mostly store tables) are
    left out: their 403 is the design, not a failure.
    """
    from django.contrib.auth.models import Group
    from django.test import RequestFactory

    Group.objects.get_or_create(name="operators")
    request = RequestFactory().get("/admin/")
    request.user = user
    pages = [reverse("admin:index")]
    labels = sorted({model._meta.app_label for model in admin.site._registry})
    pages += [reverse("admin:app_list", kwargs={"app_label": label}) for label in labels]
    for model, model_admin in admin.site._registry.items():
        first = model._default_manager.order_by("pk").first()
        refused = set()
        if not model_admin.has_add_permission(request):
            refused.add("add")
        if not model_admin.has_delete_permission(request, first):
            refused.add("delete")
        for pattern in model_admin.get_urls():
            name = getattr(pattern, "name", None)
            params = set(pattern.pattern.converters)
            if not name or not params <= {"object_id"} or name.rsplit("_", 1)[-1] in refused:
                continue
            if params:
                if first is None:
                    problem(f"no {model._meta.label} row to open its {name} page")
                    continue
                url = reverse(f"admin:{name}", kwargs={"object_id": quote(first.pk)})
                if name.endswith("_value"):
                    # A download names its value in the query; bare, it is refused in words.
                    refused_page = client.get(url)
                    summary.setdefault("refused_pages", {})[url] = refused_page.status_code
                    said = refused_page.content.decode(errors="replace")
                    if refused_page.status_code != 400 or "channel" not in said:
                        problem(f"admin page {url} without a value named: {said[:200]}")
                    continue
                pages.append(url)
            else:
                pages.append(reverse(f"admin:{name}"))
    for page in pages:
        # An action route (mark) answers a GET by leading back to its page: follow it.
        response = client.get(page, follow=True)
        summary["admin_pages"][page] = response.status_code
        if response.status_code != 200:
            problem(f"admin page {page}: {response.status_code}")


def main() -> None:
    setup_test_environment()  # what a test runner does: the test client's host is allowed
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw-root")
    client = Client()
    client.force_login(user)
    for step, args in ((run_graphs, (user,)), (api_walk, (client,)), (admin_walk, (client, user))):
        try:
            step(*args)
        except Exception:  # noqa: BLE001 - reported in the summary, the walk goes on
            problem(f"{step.__name__} raised:\n{traceback.format_exc()}")
    try:
        for args in (["--dry-run", "--json"], ["--json"]):
            out = io.StringIO()
            call_command("sweep_checkpoints", *args, stdout=out)
            summary.setdefault("sweep_command", []).append(sorted(json.loads(out.getvalue())))
    except Exception:  # noqa: BLE001
        problem(f"sweep_checkpoints raised:\n{traceback.format_exc()}")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
