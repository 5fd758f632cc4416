"""SQLite's durability stamp follows the connection's ``synchronous`` (issue 35)."""

from __future__ import annotations

import json

import pytest
from django.db import connections
from langgraph.checkpoint.base import empty_checkpoint

from checkpoints.checks import configuration_errors, sqlite_synchronous_warnings
from checkpoints.store.registry import get_saver
from tests.standalone import plain_env, run_python

pytestmark = pytest.mark.django_db(transaction=True)


def stamp_of_new_write(saver, thread_id: str) -> str:
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    saved = saver.put(config, empty_checkpoint(), {}, {})
    return saver.get_durability(saved)["level"]


def synchronous() -> int:
    with connections["default"].cursor() as cur:
        cur.execute("PRAGMA synchronous")
        return cur.fetchone()[0]


@pytest.fixture
def reconnect():
    """A new connection now and after the test, so its pragmas are the settings' ones."""
    connections["default"].close()
    yield
    connections["default"].close()


def test_the_service_default_syncs_each_commit_and_stamps_disk(reconnect):
    saver = get_saver("sqlite", using="default")
    assert synchronous() == 2  # FULL
    assert stamp_of_new_write(saver, "full") == "disk"
    assert saver.durability == "disk"


def test_normal_in_wal_stamps_os(settings, reconnect):
    settings.CHECKPOINTS = {**settings.CHECKPOINTS, "SQLITE_SYNCHRONOUS": "NORMAL"}
    saver = get_saver("sqlite", using="default")
    with connections["default"].cursor() as cur:
        cur.execute("PRAGMA journal_mode")
        assert cur.fetchone()[0] == "wal"
    assert synchronous() == 1
    assert stamp_of_new_write(saver, "normal") == "os"
    assert saver.durability == "os"


def test_the_projects_init_command_chooses_over_the_setting(reconnect):
    # Only this connection's own settings change, and they are put back: settings.DATABASES
    # is the dict every later connection (another thread's too) is made from, so writing into
    # it leaked NORMAL into the rest of the suite.
    settings_dict = connections["default"].settings_dict
    kept = settings_dict["OPTIONS"]
    settings_dict["OPTIONS"] = {
        **kept,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=1;",
    }
    try:
        connections["default"].close()
        saver = get_saver("sqlite", using="default")
        assert synchronous() == 1
        assert stamp_of_new_write(saver, "init-command") == "os"
    finally:
        settings_dict["OPTIONS"] = kept


MEMORY = """
import json, django
from django.conf import settings
settings.configure(
    INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth",
                    "checkpoints.apps.CheckpointsConfig", "retention.apps.RetentionConfig"],
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
    USE_TZ=True,
)
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from langgraph.checkpoint.base import empty_checkpoint
from checkpoints.store.registry import get_saver
saver = get_saver("sqlite")
config = {"configurable": {"thread_id": "m", "checkpoint_ns": ""}}
saved = saver.put(config, empty_checkpoint(), {}, {})
print(json.dumps([saver.durability, saver.get_durability(saved)["level"]]))
"""


def test_an_in_memory_database_stamps_memory(tmp_path):
    done = run_python(["-c", MEMORY], cwd=tmp_path, env=plain_env())
    assert json.loads(done.stdout.splitlines()[-1]) == ["memory", "memory"]


def sqlite_entry(init_command: str = "PRAGMA journal_mode=WAL;") -> dict:
    return {"ENGINE": "django.db.backends.sqlite3", "OPTIONS": {"init_command": init_command}}


def test_a_deployment_running_normal_is_warned(settings):
    assert sqlite_synchronous_warnings({"default": sqlite_entry()}) == []
    warned = sqlite_synchronous_warnings(
        {"default": sqlite_entry("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;")}
    )
    assert [w.id for w in warned] == ["checkpoints.W003"]
    assert "synchronous=NORMAL" in warned[0].msg and "'os'" in warned[0].msg
    settings.CHECKPOINTS = {**settings.CHECKPOINTS, "SQLITE_SYNCHRONOUS": "NORMAL"}
    warned = sqlite_synchronous_warnings({"default": sqlite_entry()})
    assert [w.id for w in warned] == ["checkpoints.W003"]
    assert "CHECKPOINTS_SQLITE_SYNCHRONOUS" in warned[0].hint
    # The project's init_command has the last word either way.
    assert sqlite_synchronous_warnings({"default": sqlite_entry("PRAGMA synchronous=FULL")}) == []
    assert sqlite_synchronous_warnings({"pg": {"ENGINE": "django.db.backends.postgresql"}}) == []


def test_an_unknown_synchronous_level_is_refused(settings):
    settings.CHECKPOINTS = {**settings.CHECKPOINTS, "SQLITE_SYNCHRONOUS": "SOMETIMES"}
    errors = [e for e in configuration_errors() if e.id == "checkpoints.E010"]
    assert len(errors) == 1 and "CHECKPOINTS_SQLITE_SYNCHRONOUS" in errors[0].msg
