"""Every ```python block in README.md runs, as a reader would run it.

Blocks run in their own process with no DJANGO_SETTINGS_MODULE, in an empty folder. A block
that opens the store at ``sqlite:///checkpoints.sqlite3`` runs again on a fresh PostgreSQL
database. The ``# settings.py`` and ``# urls.py`` blocks of "Embedding in your Django project"
become a host project's files (with the rest of what `startproject` writes), which is then
migrated and asked for the admin, the API and its docs.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.standalone import ROOT, fresh_postgres_database, plain_env, run_python

README = ROOT / "README.md"
BLOCKS = re.findall(r"^```python\n(.*?)^```$", README.read_text(), flags=re.S | re.M)
STORE_URL = "sqlite:///checkpoints.sqlite3"
HOST_FILES = ("# settings.py", "# urls.py")
# Blocks that talk to the running service through langgraph-sdk: the test serves it.
SDK_SCRIPTS = [block for block in BLOCKS if "langgraph_sdk" in block]
SCRIPTS = [b for b in BLOCKS if not b.startswith(HOST_FILES) and b not in SDK_SCRIPTS]


def block_id(block: str) -> str:
    """The README section the block sits in, and its place there."""
    text = README.read_text()
    before = text[: text.index(block)]
    section = re.findall(r"^## (.+)$", before, flags=re.M)[-1]
    number = sum(1 for b in BLOCKS[: BLOCKS.index(block)] if block_section(b) == section) + 1
    return f"{re.sub(r'[^a-z]+', '-', section.lower()).strip('-')}-{number}"


def block_section(block: str) -> str:
    text = README.read_text()
    return re.findall(r"^## (.+)$", text[: text.index(block)], flags=re.M)[-1]


def test_readme_has_the_blocks_this_file_knows():
    assert len(BLOCKS) >= 6, len(BLOCKS)
    assert [b.splitlines()[0] for b in BLOCKS if b.startswith(HOST_FILES)] == list(HOST_FILES)
    # The quick start shows from_conn_string first.
    assert "from checkpoints import from_conn_string" in BLOCKS[0]


@pytest.mark.parametrize("block", SCRIPTS, ids=[block_id(b) for b in SCRIPTS])
def test_block_runs_on_sqlite(block, tmp_path):
    (tmp_path / "example.py").write_text(block)
    run_python(["example.py"], cwd=tmp_path)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("block", SDK_SCRIPTS, ids=[block_id(b) for b in SDK_SCRIPTS])
def test_sdk_block_runs_against_the_service(block, tmp_path, live_server, settings):
    """The service on a live server (its SQLite store), a user's token in the environment."""
    from django.contrib.auth.models import User
    from rest_framework.authtoken.models import Token

    settings.CHECKPOINTS = {**settings.CHECKPOINTS, "PROVIDER": "sqlite", "CONN_STRING": None}
    token = Token.objects.create(user=User.objects.create_user("reader")).key
    (tmp_path / "example.py").write_text(block)
    env = plain_env(LANGGRAPH_URL=f"{live_server.url}/langgraph", LANGGRAPH_API_KEY=token)
    done = run_python(["example.py"], cwd=tmp_path, env=env)
    assert '"channel_values"' in done.stdout.replace("'", '"')


STORE_SCRIPTS = [block for block in SCRIPTS if STORE_URL in block]


@pytest.mark.postgres
@pytest.mark.parametrize("block", STORE_SCRIPTS, ids=[block_id(b) for b in STORE_SCRIPTS])
def test_block_runs_on_postgres(block, tmp_path):
    with fresh_postgres_database("readme") as url:
        (tmp_path / "example.py").write_text(block.replace(STORE_URL, url))
        run_python(["example.py"], cwd=tmp_path)


# What `django-admin startproject` writes besides INSTALLED_APPS and the URLs.
STARTPROJECT_REST = """
SECRET_KEY = "readme-test"
DEBUG = True
ROOT_URLCONF = "host_urls"
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": "db.sqlite3"}}
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]
STATIC_URL = "static/"
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
"""

HOST_CHECK = """
import django
django.setup()
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from django.test.utils import setup_test_environment

setup_test_environment()
call_command("migrate", verbosity=0)
client = Client()
client.force_login(get_user_model().objects.create_superuser("root", "", "pw"))
for page in ("/admin/checkpoints/thread/", "/admin/retention/sweeprun/sweep/",
             "/checkpoints/api/threads/", "/checkpoints/api/checkpoints/sweeps/",
             "/checkpoints/api/docs/"):
    status = client.get(page).status_code
    assert status == 200, (page, status)
# The LangGraph-compatible routes, included as the urls.py block has them.
status = client.post("/langgraph/threads/count", "{}", content_type="application/json").status_code
assert status == 200, status
print("host ok")
"""


def test_embedding_blocks_make_a_working_host(tmp_path):
    settings_block, urls_block = (b for b in BLOCKS if b.startswith(HOST_FILES))
    (tmp_path / "host_settings.py").write_text(settings_block + STARTPROJECT_REST)
    (tmp_path / "host_urls.py").write_text(urls_block)
    (tmp_path / "check_host.py").write_text(HOST_CHECK)
    env = plain_env(DJANGO_SETTINGS_MODULE="host_settings")
    env["PYTHONPATH"] += f":{tmp_path}"
    done = run_python(["check_host.py"], cwd=tmp_path, env=env)
    assert done.stdout.strip().endswith("host ok")


def test_block_ids_are_unique():
    assert len({block_id(b) for b in SCRIPTS}) == len(SCRIPTS)
    assert SDK_SCRIPTS, "the LangGraph-compatible API section shows an SDK example"


def test_readme_keeps_the_two_setup_commands():
    text = README.read_text()
    assert "```sh\nbash scripts/demo.sh\n```" in text
    assert "```sh\nbash scripts/test.sh\n```" in text
    assert Path(ROOT / "scripts" / "demo.sh").exists()
