"""Acting on a thread from its page (issue 54 item 7): edit a channel's value as a new
checkpoint, answer a waiting thread, switch between its branches.

The edit runs through the state-update service the APIs use
(:func:`checkpoints.timetravel.updates.update_state`), so LangGraph's ``update_state``
applies it (reducers, ``as_node``) with the thread's registered graph, and the service
writes the audit event. This server keeps checkpoints and does not run graphs: a waiting
thread is answered by the deployment that runs its graph (``GRAPH_SERVER_URL``), so the
page gives the resume call to make there, ready to copy.
"""

from __future__ import annotations

import json
from functools import partial
from typing import Any

from django.contrib import messages
from django.http import Http404, HttpResponseRedirect
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html
from langgraph.types import StateUpdate

from checkpoints import audit, permissions
from checkpoints.admin import branches, queries
from checkpoints.admin.base import checkpoint_change_url, thread_change_url
from checkpoints.admin.display import is_internal
from checkpoints.admin.refusals import refused
from checkpoints.admin.store_choice import keep_store, store_alias, store_saver
from checkpoints.admin.threads import ThreadAdmin, ThreadAdminExtension
from checkpoints.channels import INTERRUPT, RESUME
from checkpoints.codec.render import readable
from checkpoints.conf import setting
from checkpoints.errors import CheckpointStoreError, InvalidCheckpointInput
from checkpoints.graph_sources import GRAPHS_ENV
from checkpoints.graphs import graph_name_of, load_graph, registered
from checkpoints.timetravel.snapshot import thread_config
from checkpoints.timetravel.updates import update_state

URL_SETTING = "GRAPH_SERVER_URL"
URL_PLACEHOLDER = "https://<your LangGraph deployment>"
ANSWER_PARAM = "resume_answer"
ANSWER_PLACEHOLDER = "<your answer>"
EDIT_TEMPLATE = "admin/checkpoints/act_edit_state.html"
PANEL_TEMPLATE = "admin/checkpoints/act_panel.html"


class BadEdit(InvalidCheckpointInput):
    """An edit the form cannot send: its value is not JSON, or the graph has no such
    channel or node. The message names the channel (or node) and what was wrong."""


def server_url() -> str | None:
    url = (setting(URL_SETTING) or "").strip()
    return url or None


def python_literal(value: Any) -> str:
    """JSON data as Python source (``true`` -> ``True``), for the copied call."""
    return repr(value)


def resume_calls(
    *, thread_id: str, assistant_id: str | None, answer: Any = None, answered: bool = False
) -> dict[str, str]:
    """The Python (``Command(resume=...)``) and SDK (``runs.create``) calls that answer the
    thread's interrupt with ``answer`` on the deployment running its graph."""
    url = server_url() or URL_PLACEHOLDER
    graph = assistant_id or "<assistant id or graph name>"
    said = python_literal(answer) if answered else repr(ANSWER_PLACEHOLDER)
    python = (
        "from langgraph.pregel.remote import RemoteGraph\n"
        "from langgraph.types import Command\n\n"
        f"graph = RemoteGraph({graph!r}, url={url!r})\n"
        f'config = {{"configurable": {{"thread_id": {thread_id!r}}}}}\n'
        f"graph.invoke(Command(resume={said}), config)\n"
    )
    sdk = (
        "from langgraph_sdk import get_sync_client\n\n"
        f"client = get_sync_client(url={url!r})\n"
        f"client.runs.create({thread_id!r}, {graph!r}, "
        f'command={{"resume": {said}}})\n'
    )
    return {"python": python, "sdk": sdk, "url": url}


def waiting_on(thread, head_row) -> list[Any]:
    """The interrupt values the thread's head asks and no resume has answered ([] when
    none), read from the head's writes alone: the page never decodes the whole head here."""
    if head_row is None:
        return []
    alias, heads = store_alias(), {thread.pk: head_row.checkpoint_id}
    if queries.head_writes(alias=alias, heads=heads, channel=RESUME).exists():
        return []
    saver = store_saver()
    asked = []
    for _pk, task_id, idx, _path, type_, blob in queries.head_writes(
        alias=alias, heads=heads, channel=INTERRUPT
    ):
        value = saver.decode_write(
            thread.thread_id, "", head_row.checkpoint_id, task_id, idx, INTERRUPT, type_, blob
        )
        for item in value if isinstance(value, (list, tuple)) else [value]:
            asked.append(getattr(item, "value", item))
    return asked


def parse_answer(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise BadEdit(
            f"the answer is not JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); "
            'a text answer is written in quotes: "yes"',
            field=ANSWER_PARAM,
        ) from exc


def panel(request, thread_pk: str) -> str:
    """The thread page's "Act on this thread" card: the question a waiting thread asks with
    the calls that answer it, the edit-state link, and the branch switcher."""
    if not str(thread_pk).isdigit():
        return ""
    alias = store_alias()
    thread = queries.thread_by_pk(alias=alias, pk=int(thread_pk))
    if thread is None:
        return ""
    head_row = queries.head_row(alias=alias, thread_id=thread.thread_id)
    try:
        asked = waiting_on(thread, head_row)
    except CheckpointStoreError:
        asked = []  # the page's current-state card names a head it cannot read
    answer_text = request.GET.get(ANSWER_PARAM)
    answer, answer_error, answered = None, "", False
    if asked and answer_text is not None:
        try:
            answer, answered = parse_answer(answer_text), True
        except BadEdit as exc:
            answer_error = exc.message
    context = {
        "thread": thread,
        "asked": [json.dumps(readable(v), indent=2, ensure_ascii=False) for v in asked],
        "calls": resume_calls(
            thread_id=thread.thread_id,
            assistant_id=graph_name_of(head_row.metadata if head_row else None),
            answer=answer,
            answered=answered,
        )
        if asked
        else None,
        "url_set": server_url() is not None,
        "url_setting": f'CHECKPOINTS["{URL_SETTING}"]',
        "url_env": f"CHECKPOINTS_{URL_SETTING}",
        "answer_param": ANSWER_PARAM,
        # The page's other parameters (the store chosen, the branch shown) survive an answer.
        "kept_query": [
            (name, value)
            for name, values in request.GET.lists()
            if name != ANSWER_PARAM
            for value in values
        ],
        "answer_text": answer_text if answer_text is not None else "",
        "answer_error": answer_error,
        # Offered to those who may use it, as the page's other actions are.
        "edit_url": keep_store(reverse("admin:checkpoints_thread_edit_state", args=[thread.pk]))
        if permissions.staff_may(request.user, "bulk_update")
        else "",
        "switcher": branches.switcher(
            alias=alias,
            thread_pk=thread.pk,
            base=thread_change_url(thread.pk),
            query=request.GET,
            link=checkpoint_change_url,
        ),
    }
    return render_to_string(PANEL_TEMPLATE, context, request=request)


def graph_parts(graph) -> tuple[list[str], list[str]]:
    """The graph's state channels and the nodes an update may be made as."""
    channels = sorted(name for name in graph.channels if not is_internal(str(name)))
    nodes = sorted(name for name in graph.nodes if not str(name).startswith("__"))
    return channels, nodes


def read_edit(post, channels: list[str], nodes: list[str]) -> tuple[str, str | None, Any]:
    """(channel, as_node or None, value) from the form, each checked against the graph."""
    channel = (post.get("channel") or "").strip()
    if channel not in channels:
        raise BadEdit(
            f"channel {channel[:100]!r} is not a channel of this thread's graph "
            f"(its channels: {', '.join(channels)})",
            field="channel",
        )
    as_node = (post.get("as_node") or "").strip() or None
    if as_node is not None and as_node not in nodes:
        raise BadEdit(
            f"node {as_node[:100]!r} is not a node of this thread's graph "
            f"(its nodes: {', '.join(nodes)})",
            field="as_node",
        )
    text = post.get("value", "")
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise BadEdit(
            f"the value for channel {channel!r} is not JSON: {exc.msg} at line {exc.lineno} "
            f'column {exc.colno} (a text value is written in quotes: "hello")',
            field="value",
        ) from exc
    return channel, as_node, value


class EditStateView:
    """GET: the form; POST: the confirmation; POST post=yes: the update, then the thread."""

    def __init__(self, thread_admin) -> None:
        self.thread_admin = thread_admin

    def __call__(self, request, object_id):
        thread = self.thread_admin.get_object(request, object_id)
        saver = store_saver()
        if not permissions.staff_may(request.user, "bulk_update"):
            # The refusal in the admin's chrome naming the permission, audited (refusals).
            return refused(
                request,
                "bulk_update",
                thread_id=thread.thread_id if thread is not None else "",
                provider=saver.provider,
            )
        if thread is None:
            raise Http404(f"no thread with pk {object_id!r} in this store")
        base = {"thread": thread, "thread_url": thread_change_url(thread.pk)}
        try:
            head = saver.get_tuple(thread_config(thread.thread_id))
        except CheckpointStoreError as exc:
            return self.render(
                request, base, error=f"cannot read the thread's head: {exc.message}", status=503
            )
        named = graph_name_of(head.metadata if head else None)
        name = named if named in registered() else None
        base = {
            "thread": thread,
            "thread_url": thread_change_url(thread.pk),
            "action_url": keep_store(
                reverse("admin:checkpoints_thread_edit_state", args=[thread.pk])
            ),
            "named_graph": named,
            "graphs_env": GRAPHS_ENV,
            "head": head.config["configurable"]["checkpoint_id"] if head else "",
        }
        if name is None:
            return self.render(request, base, title=f"Edit the state of thread {thread}")
        try:
            graph = load_graph(name)
        except CheckpointStoreError as exc:
            # A registered graph whose code fails to load: named, as manage.py check names it.
            return self.render(request, base | {"load_error": exc.message}, status=503)
        channels, nodes = graph_parts(graph)
        values = (head.checkpoint.get("channel_values") or {}) if head else {}
        base |= {"graph": name, "channels": channels, "nodes": nodes}
        if request.method != "POST":
            return self.render(request, base, form={"value": ""})
        form = {k: request.POST.get(k, "") for k in ("channel", "as_node", "value")}
        try:
            channel, as_node, value = read_edit(request.POST, channels, nodes)
        except BadEdit as exc:
            return self.render(request, base, form=form, error=exc.message, status=400)
        if request.POST.get("post") != "yes":
            return self.render(
                request,
                base,
                form=form,
                confirm=True,
                current=json.dumps(readable(values.get(channel)), indent=2, ensure_ascii=False),
                new=json.dumps(value, indent=2, ensure_ascii=False),
            )
        shown = request.POST.get("expected_head", "")
        if shown != base["head"]:
            return self.render(
                request,
                base,
                form=form,
                error=(
                    f"nothing was written: the thread's head moved since the confirmation "
                    f"was shown (it showed {shown or 'no head'}, the head is now "
                    f"{base['head'] or 'gone'}); check the state below and confirm again"
                ),
                status=409,
            )
        try:
            with audit.from_request(request, "admin"):
                updated = update_state(
                    saver,
                    thread.thread_id,
                    [[StateUpdate({channel: value}, as_node)]],
                    graph=name,
                )
        except CheckpointStoreError as exc:
            return self.render(
                request, base, form=form, error=f"channel {channel!r}: {exc.message}", status=400
            )
        messages.success(
            request,
            format_html(
                "Channel {} of thread {} updated{}: the new head is {}.",
                channel,
                thread.thread_id,
                f" as node {as_node}" if as_node else "",
                updated.checkpoint_id,
            ),
        )
        return HttpResponseRedirect(thread_change_url(thread.pk))

    def render(self, request, context, *, title="", status=200, **more) -> TemplateResponse:
        thread = context["thread"]
        opts = self.thread_admin.opts
        return TemplateResponse(
            request,
            EDIT_TEMPLATE,
            {
                **self.thread_admin.admin_site.each_context(request),
                "opts": opts,
                "title": title or f"Edit the state of thread {thread.thread_id}",
                **context,
                **more,
            },
            status=status,
        )


class ActThreadExtension(ThreadAdminExtension):
    """The edit-state page and the thread page's act card (question, resume, branches)."""

    def get_urls(self, thread_admin):
        view = thread_admin.admin_site.admin_view(EditStateView(thread_admin))
        return [path("<path:object_id>/edit-state/", view, name="checkpoints_thread_edit_state")]

    def change_context(self, thread_admin, request, object_id):
        # Read when the page renders, after Django has checked the user may see it.
        return {"act_panel": partial(panel, request, object_id)}


ThreadAdmin.extend(ActThreadExtension())
