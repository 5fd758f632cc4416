"""Every ```python block in README.md and docs/**/*.md runs, as a reader would run it.

Blocks run in their own process with no DJANGO_SETTINGS_MODULE, in an empty folder. A block
that opens the store at ``sqlite:///checkpoints.sqlite3`` runs again on a fresh PostgreSQL
database. The ``# settings.py`` and ``# urls.py`` blocks of "Embedding in your Django project"
become a host project's files (with the rest of what `startproject` writes), which is then
migrated and asked for the admin, the API and its docs. A block talking to the running
service (through ``langgraph_sdk``, or the remote saver's ``checkpoints+http`` URL) runs
against a live server with a user's token in the environment.

A block that cannot run as it stands (it names a module of the reader's own project) is
marked by the line ``<!-- not run: <why> -->`` right above it; nothing else is left out.
The same block in several pages runs once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.standalone import ROOT, fresh_postgres_database, plain_env, run_python

README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(
    r"^(?:<!-- not run: (?P<why>.+?) -->\n)?```python\n(?P<code>.*?)^```$", flags=re.S | re.M
)
STORE_URL = "sqlite:///checkpoints.sqlite3"
HOST_FILES = ("# settings.py", "# urls.py")


@dataclass(frozen=True)
class Block:
    page: Path
    section: str
    number: int
    code: str
    not_run: str | None

    @property
    def id(self) -> str:
        page = self.page.relative_to(ROOT).with_suffix("").as_posix().replace("/", "-")
        section = re.sub(r"[^a-z]+", "-", self.section.lower()).strip("-")
        return f"{page.lower()}-{section}-{self.number}"


def blocks_of(page: Path) -> list[Block]:
    text = page.read_text()
    found: list[Block] = []
    for match in FENCE.finditer(text):
        before = re.sub(r"^```.*?^```$", "", text[: match.start()], flags=re.S | re.M)
        headings = re.findall(r"^#{1,3} (.+)$", before, flags=re.M)
        section = headings[-1] if headings else page.stem
        number = sum(1 for b in found if b.section == section) + 1
        found.append(Block(page, section, number, match["code"], match["why"]))
    return found


BLOCKS = [block for page in PAGES for block in blocks_of(page)]
README_BLOCKS = [b for b in BLOCKS if b.page == README]


def _unique(blocks: list[Block]) -> list[Block]:
    seen: dict[str, Block] = {}
    for block in blocks:
        seen.setdefault(block.code, block)
    return list(seen.values())


RUN = _unique([b for b in BLOCKS if b.not_run is None])
HOST_BLOCKS = [b for b in RUN if b.code.startswith(HOST_FILES)]
SDK_SCRIPTS = [b for b in RUN if "langgraph_sdk" in b.code]
REMOTE_SCRIPTS = [b for b in RUN if "checkpoints+http" in b.code]
SCRIPTS = [b for b in RUN if b not in HOST_BLOCKS + SDK_SCRIPTS + REMOTE_SCRIPTS]
STORE_SCRIPTS = [b for b in SCRIPTS if STORE_URL in b.code]


def ids(blocks: list[Block]) -> list[str]:
    return [b.id for b in blocks]


def test_readme_has_the_blocks_this_file_knows():
    assert len(README_BLOCKS) >= 2, [b.id for b in README_BLOCKS]
    # The quick start shows from_conn_string first.
    assert "from checkpoints import from_conn_string" in README_BLOCKS[0].code
    assert any("langgraph_sdk" in b.code for b in README_BLOCKS), "the README shows the SDK"
    # One host project, made of exactly these two files.
    assert [b.code.splitlines()[0] for b in HOST_BLOCKS] == list(HOST_FILES)


def test_every_block_left_out_says_why():
    left_out = [b for b in BLOCKS if b.not_run is not None]
    for block in left_out:
        assert len(block.not_run.split()) >= 3, f"{block.id}: say why it is not run"
    # Every python block is either run or marked: the fence pattern sees them all.
    for page in PAGES:
        assert page.read_text().count("```python\n") == len(blocks_of(page)), page


@pytest.mark.parametrize("block", SCRIPTS, ids=ids(SCRIPTS))
def test_block_runs_on_sqlite(block, tmp_path):
    (tmp_path / "example.py").write_text(block.code)
    run_python(["example.py"], cwd=tmp_path)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("block", SDK_SCRIPTS, ids=ids(SDK_SCRIPTS))
def test_sdk_block_runs_against_the_service(block, tmp_path, live_server, settings):
    """The service on a live server (its SQLite store), a user's token in the environment."""
    from django.contrib.auth.models import User
    from rest_framework.authtoken.models import Token

    settings.CHECKPOINTS = {**settings.CHECKPOINTS, "PROVIDER": "sqlite", "CONN_STRING": None}
    token = Token.objects.create(user=User.objects.create_user("reader")).key
    (tmp_path / "example.py").write_text(block.code)
    env = plain_env(LANGGRAPH_URL=f"{live_server.url}/langgraph", LANGGRAPH_API_KEY=token)
    done = run_python(["example.py"], cwd=tmp_path, env=env)
    assert '"channel_values"' in done.stdout.replace("'", '"')


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("block", REMOTE_SCRIPTS, ids=ids(REMOTE_SCRIPTS))
def test_remote_block_runs_against_the_service(block, tmp_path, live_server, settings):
    """A worker on the remote saver, the service on a live server (its SQLite store): the
    thread lands in the service's store, owned by the token's user, and the worker's
    process never loaded Django."""
    from django.contrib.auth.models import User
    from rest_framework.authtoken.models import Token

    from checkpoints.models import Thread

    settings.CHECKPOINTS = {**settings.CHECKPOINTS, "PROVIDER": "sqlite", "CONN_STRING": None}
    user = User.objects.create_user("worker")
    token = Token.objects.create(user=user).key
    url = live_server.url.replace("http://", "checkpoints+http://", 1)
    (tmp_path / "example.py").write_text(
        block.code + "\nimport sys\nprint('loaded django:', 'django' in sys.modules)\n"
    )
    env = plain_env(CHECKPOINTS_URL=url, CHECKPOINTS_API_KEY=token)
    done = run_python(["example.py"], cwd=tmp_path, env=env)
    assert "loaded django: False" in done.stdout
    assert Thread.objects.filter(owner=user).exists(), "the worker's thread is not stored"


@pytest.mark.postgres
@pytest.mark.parametrize("block", STORE_SCRIPTS, ids=ids(STORE_SCRIPTS))
def test_block_runs_on_postgres(block, tmp_path):
    with fresh_postgres_database("readme") as url:
        (tmp_path / "example.py").write_text(block.code.replace(STORE_URL, url))
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
    settings_block, urls_block = (b.code for b in HOST_BLOCKS)
    (tmp_path / "host_settings.py").write_text(settings_block + STARTPROJECT_REST)
    (tmp_path / "host_urls.py").write_text(urls_block)
    (tmp_path / "check_host.py").write_text(HOST_CHECK)
    env = plain_env(DJANGO_SETTINGS_MODULE="host_settings")
    env["PYTHONPATH"] += f":{tmp_path}"
    done = run_python(["check_host.py"], cwd=tmp_path, env=env)
    assert done.stdout.strip().endswith("host ok")


def test_block_ids_are_unique():
    assert len(set(ids(RUN))) == len(RUN)
    assert SDK_SCRIPTS, "the docs show an SDK example"


def test_readme_keeps_the_two_setup_commands():
    text = README.read_text()
    assert "```sh\nbash scripts/demo.sh\n```" in text
    assert "```sh\nbash scripts/test.sh\n```" in text
    assert Path(ROOT / "scripts" / "demo.sh").exists()
