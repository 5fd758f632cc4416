"""Time the console pages of a thread whose graph calls a subgraph (issue 54).

``python -m bench.subgraph_pages sqlite|postgres [--calls 175 1000] [--repeat 5]``

Seeds, through the store's own saver, one thread per ``--calls`` value written by a real
LangGraph agent whose node ``act`` invokes a compiled subgraph once per step (each call a
namespace ``act:<task id>`` under the root step that ran it), then times the thread page,
a later page of its calls, one call's tree, the history and its node filter. The store is a
fresh SQLite file under ``var/bench/`` or a fresh PostgreSQL database
``checkpoint_bench_subgraphs``, set up as the deployment's own store. Each figure is server
time through Django's test Client (no network): the median of ``--repeat`` requests, with
the page's HTML size. The agent graph is also the tests' (tests/admin_fixtures.py).
"""

from __future__ import annotations

import argparse
import json
import operator
import sys
import time
from typing import Annotated, TypedDict

from langchain_core.messages import HumanMessage, ToolMessage
from langgraph.graph import END, START, StateGraph

from bench import messages

PG_DB = "checkpoint_bench_subgraphs"
# The console's page budget (issue 54).
TARGET_MS = 300.0


class Lookup(TypedDict, total=False):
    query: str
    found: Annotated[list, operator.add]


def _plan(state: Lookup) -> Lookup:
    return {"found": [f"planned {state['query']}"]}


def _fetch(state: Lookup) -> Lookup:
    return {"found": [f"fetched {state['query']}"]}


def lookup_subgraph():
    """plan -> fetch: compiled without a checkpointer, so a call inherits its caller's and
    writes its checkpoints under ``act:<task id>``."""
    graph = StateGraph(Lookup)
    graph.add_node("plan", _plan)
    graph.add_node("fetch", _fetch)
    graph.add_edge(START, "plan")
    graph.add_edge("plan", "fetch")
    graph.add_edge("fetch", END)
    return graph.compile()


class Agent(TypedDict, total=False):
    messages: Annotated[list, operator.add]
    calls: int
    goal: int


def agent_graph(saver):
    """A ReAct-like agent whose tool node ``act`` invokes the lookup subgraph once per
    step, looping until the turn's goal of calls is met."""
    lookup = lookup_subgraph()

    def act(state: Agent) -> Agent:
        n = state.get("calls", 0) + 1
        found = lookup.invoke({"query": f"q{n}", "found": []})["found"]
        return {"messages": [ToolMessage(content=found[-1], tool_call_id=f"c{n}")], "calls": n}

    graph = StateGraph(Agent)
    graph.add_node("act", act)
    graph.add_edge(START, "act")
    graph.add_conditional_edges("act", lambda s: "act" if s["calls"] < s["goal"] else END)
    return graph.compile(checkpointer=saver)


def run_subgraph_calls(saver, thread_id: str, calls: int, per_turn: int = 25) -> str:
    """Turns of the agent on one thread until ``act`` has called the subgraph ``calls``
    times: each call is one subgraph namespace under the root step that ran it."""
    graph = agent_graph(saver)
    config = {"configurable": {"thread_id": thread_id}, "recursion_limit": per_turn * 2 + 10}
    done = 0
    while done < calls:
        goal = min(calls, done + per_turn)
        graph.invoke(
            {"messages": [HumanMessage(content=f"look up {goal - done} orders")], "goal": goal},
            config,
        )
        done = goal
    return thread_id


def configure(family: str) -> None:
    """Point the project's settings at a fresh store of ``family`` before Django starts."""
    messages.configure(family, sqlite_name="subgraphs.sqlite3", pg_db=PG_DB)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("family", choices=("sqlite", "postgres"))
    parser.add_argument("--calls", type=int, nargs="+", default=[175, 1000])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    configure(args.family)

    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client

    from bench.messages import median_ms
    from checkpoints.models import Checkpoint, Thread
    from checkpoints.store.registry import get_saver

    call_command("migrate", verbosity=0)
    # DEBUG off serves hashed static names: the admin pages need the manifest.
    call_command("collectstatic", interactive=False, verbosity=0)
    user = get_user_model().objects.create_superuser("bench-admin", "b@example.com", "pw")
    saver = get_saver()
    # DEBUG is off, so the host must be an allowed one (not the test Client's "testserver").
    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(user)
    rows = []
    for calls in args.calls:
        thread_id = f"agent-{calls}"
        start = time.perf_counter()
        run_subgraph_calls(saver, thread_id, calls, per_turn=50)
        seeded_s = time.perf_counter() - start
        thread = Thread.objects.get(thread_id=thread_id)
        count = Checkpoint.objects.filter(thread=thread).count()
        call_ns = (
            Checkpoint.objects.filter(thread=thread)
            .exclude(checkpoint_ns="")
            .order_by("checkpoint_id")
            .values_list("checkpoint_ns", flat=True)
            .first()
        )
        print(
            f"{args.family}: {calls} calls, {count} checkpoints (seeded in {seeded_s:.1f} s)",
            file=sys.stderr,
        )
        page = f"/admin/checkpoints/thread/{thread.pk}/change/"
        history = "/admin/checkpoints/checkpoint/"
        pages = [
            ("thread page", page, {}),
            ("thread page, later calls", page, {"calls": "act", "calls_page": 3}),
            ("thread page, one call's tree", page, {"tree_ns": call_ns}),
            ("history", history, {"thread__id__exact": thread.pk}),
            (
                "history, every act call",
                history,
                {"thread__id__exact": thread.pk, "namespace": "act:*"},
            ),
        ]
        for what, url, params in pages:
            ms, status, runs = median_ms(client, url, params, args.repeat)
            size = len(client.get(url, params).content)
            if status != 200:
                raise SystemExit(f"{what} {url}: answered {status}, not 200")
            rows.append((calls, what, round(ms, 1), size, runs))
            print(f"  {what:<30} {ms:8.1f} ms {size / 1000:7.1f} KB x{runs}", file=sys.stderr)
    slow = [row for row in rows if row[2] > TARGET_MS]
    print(json.dumps({"family": args.family, "target_ms": TARGET_MS, "rows": rows, "slow": slow}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
