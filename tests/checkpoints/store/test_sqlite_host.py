"""SQLite on a host project's default settings: concurrent graph runs all succeed.

A fresh `startproject` gives SQLite with no OPTIONS. Before the app tuned its connections,
2 of 4 concurrent graph runs failed with "database is locked" in put_writes.
"""

from __future__ import annotations

import json

from django.core.management import call_command

from checkpoints.checks import sqlite_mode_warnings
from tests.standalone import run_python

HOST_GRAPHS = """
import json, operator, sys, threading
from typing import Annotated, TypedDict
import django
from django.conf import settings

settings.configure(
    INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth", "checkpoints",
                    "retention"],
    # Exactly what `django-admin startproject` writes.
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": sys.argv[1]}},
    USE_TZ=True, DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
)
django.setup()
from django.core.management import call_command
from django.db import connection
call_command("migrate", verbosity=0)
with connection.cursor() as cursor:
    cursor.execute("PRAGMA journal_mode")
    journal = cursor.fetchone()[0]
    cursor.execute("PRAGMA busy_timeout")
    busy = cursor.fetchone()[0]
mode = connection.transaction_mode
connection.close()

from langgraph.graph import END, START, StateGraph
from checkpoints.store.registry import get_saver

class State(TypedDict):
    log: Annotated[list, operator.add]

builder = StateGraph(State)
for name in "abcd":
    builder.add_node(name, lambda state, name=name: {"log": [name]})
# a and b run in one superstep, so put_writes come from two threads at once.
builder.add_edge(START, "a"); builder.add_edge(START, "b")
builder.add_edge("a", "c"); builder.add_edge("b", "c"); builder.add_edge("c", "d")
builder.add_edge("d", END)
saver = get_saver("sqlite")
graph = builder.compile(checkpointer=saver)
TURNS = 10
errors = []

def run(index):
    try:
        for turn in range(TURNS):
            graph.invoke({"log": [f"turn{turn}"]}, {"configurable": {"thread_id": f"t{index}"}})
    except Exception as exc:
        errors.append(f"run {index}: {type(exc).__name__}: {exc}")
    finally:
        connection.close()

runs = [threading.Thread(target=run, args=(i,)) for i in range(4)]
for thread in runs:
    thread.start()
for thread in runs:
    thread.join()
lengths = [
    len(saver.get_tuple({"configurable": {"thread_id": f"t{i}"}}).checkpoint["channel_values"]
        ["log"])
    for i in range(4)
]
print(json.dumps({"journal": journal, "busy": busy, "mode": mode, "errors": errors,
                  "lengths": lengths}))
"""


def test_concurrent_graph_runs_on_default_sqlite_settings(tmp_path):
    done = run_python(["-c", HOST_GRAPHS, str(tmp_path / "host.sqlite3")], cwd=tmp_path)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["errors"] == [], result["errors"]
    # Every turn of every run is in its thread: 10 turns of (input + a, b, c, d).
    assert result["lengths"] == [50, 50, 50, 50], result
    assert result["journal"] == "wal" and result["busy"] == 20000, result
    assert result["mode"] == "IMMEDIATE", result


def _databases(**options):
    return {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": "x", "OPTIONS": options}}


def test_deferred_transactions_are_warned_about_naming_the_setting():
    [warning] = sqlite_mode_warnings(_databases(transaction_mode="DEFERRED"))
    assert warning.id == "checkpoints.W002"
    assert "DATABASES['default']['OPTIONS']['transaction_mode']" in warning.msg
    assert warning.hint == "Set DATABASES['default']['OPTIONS']['transaction_mode'] = 'IMMEDIATE'."


def test_unset_or_immediate_mode_passes_the_check():
    for options in ({}, {"transaction_mode": "IMMEDIATE"}, {"transaction_mode": "exclusive"}):
        assert sqlite_mode_warnings(_databases(**options)) == [], options
    call_command("check")  # the project's own settings (IMMEDIATE) pass
