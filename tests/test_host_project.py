"""The wheel in a new Django project, as a user installs it (issue 16's host test).

Builds the wheel, installs it into a fresh virtualenv (dependencies from the package
registry), makes a host with `django-admin startproject`, adds the apps and the URLs as the
README says, migrates, then drives it from inside that virtualenv (tests/scripts/host_driver.py):
every admin page, each API endpoint, a graph with interrupt and resume, sweep_checkpoints.
A Chromium walk then logs in to the host's admin and opens the offline API docs.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest

from tests.host_venv import build_wheel, host_env, run
from tests.private_servers import free_port

pytestmark = pytest.mark.host

# Scripts run from their own folder, where no test package can shadow the apps.
DRIVER = Path(__file__).resolve().parent / "scripts" / "host_driver.py"
OUTPUT = Path(os.environ.get("CHECKPOINTS_TEST_OUTPUT", "test-output"))


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    started = time.monotonic()
    work = tmp_path_factory.mktemp("host")
    wheel = build_wheel(work)
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/", 1)[0] for name in names}
    venv = work / "venv"
    run([sys.executable, "-m", "venv", venv], cwd=work)
    python = venv / "bin" / "python"
    env = host_env(venv)
    run([python, "-m", "pip", "install", "-q", wheel], cwd=work, env=env, timeout=900)
    (work / "hostproject").mkdir()
    bare = {k: v for k, v in env.items() if k != "DJANGO_SETTINGS_MODULE"}
    run(
        [venv / "bin" / "django-admin", "startproject", "host", work / "hostproject"],
        cwd=work,
        env=bare,
    )
    project = work / "hostproject"
    settings = project / "host" / "settings.py"
    text = settings.read_text()
    # What the README's "Embedding in your Django project" says to add, and nothing else.
    text = text.replace(
        "INSTALLED_APPS = [",
        "INSTALLED_APPS = [\n    'rest_framework',\n    'checkpoints',\n    'retention',",
        1,
    )
    settings.write_text(text)
    urls = project / "host" / "urls.py"
    urls.write_text(
        urls.read_text()
        + "\nfrom django.urls import include  # noqa: E402\n\n"
        + 'urlpatterns += [path("checkpoints/", include("checkpoints.urls"))]\n'
    )
    run([python, "manage.py", "migrate", "-v", "0"], cwd=project, env=env)
    check = run([python, "manage.py", "check"], cwd=project, env=env)
    # A script of the host's own, so the host package is importable beside it.
    shutil.copy2(DRIVER, project / "drive_host.py")
    driven = run([python, "drive_host.py"], cwd=project, env=env)
    summary = json.loads(driven.strip().splitlines()[-1])
    summary["wheel_top_level"] = sorted(tops)
    summary["wheel_templates"] = sorted(n for n in names if n.endswith(".html"))
    summary["check"] = check.strip()
    summary["seconds"] = round(time.monotonic() - started)
    OUTPUT.mkdir(parents=True, exist_ok=True)
    (OUTPUT / "host-project.json").write_text(json.dumps(summary, indent=2))
    return {"python": python, "project": project, "env": env, "summary": summary}


def test_wheel_holds_the_apps_not_the_service(host):
    summary = host["summary"]
    assert "project" not in summary["wheel_top_level"], summary["wheel_top_level"]
    assert {"checkpoints", "retention"} <= set(summary["wheel_top_level"])
    assert (
        "checkpoints/templates/admin/checkpoints/checkpoint/changes.html"
        in (summary["wheel_templates"])
    )
    assert "retention/templates/admin/retention/sweeprun/sweep.html" in summary["wheel_templates"]


def test_host_project_walk_finds_no_problem(host):
    summary = host["summary"]
    print(
        f"\nhost project: {len(summary['admin_pages'])} admin pages, "
        f"{len(summary['api'])} API calls, graph {summary.get('graph')}, "
        f"sweep_command {summary.get('sweep_command')}, {summary['seconds']} s"
    )
    assert summary["problems"] == [], "\n".join(summary["problems"])
    assert summary["graph"] == {
        "provider": "sqlite",
        "interrupted": True,
        "log": ["asked", "drafted", "approved:yes"],
    }
    assert summary["from_conn_string"]["alias"] == "default"
    assert len(summary["sweep_command"]) == 2
    pages = summary["admin_pages"]
    assert all(status == 200 for status in pages.values()), pages
    # The value download names its value in the query: bare, it is a 400 in words.
    assert (
        [url for url, status in summary["refused_pages"].items() if status == 400]
        == [url for url in summary["refused_pages"] if url.endswith("/value/")]
        != []
    ), summary["refused_pages"]
    for custom in ("/changes/", "/rollback/", "/fork/", "/sweep/", "/history/"):
        assert any(page.endswith(custom) for page in pages), (custom, sorted(pages))
    assert "System check identified no issues" in summary["check"], summary["check"]


@pytest.mark.browser
def test_chromium_walks_the_host_admin_and_offline_docs(host):
    from playwright.sync_api import sync_playwright

    from tests.browser_fixtures import CHROMIUM, CHROMIUM_ARGS

    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [host["python"], "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"],
        cwd=host["project"],
        env=host["env"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        for _ in range(60):
            try:
                urllib.request.urlopen(f"{base}/admin/login/", timeout=1)
                break
            except OSError:
                time.sleep(0.5)
        shots = OUTPUT / "screenshots"
        shots.mkdir(parents=True, exist_ok=True)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page()
            outside = []
            page.on(
                "request",
                lambda request: (
                    None if request.url.startswith(base) else outside.append(request.url)
                ),
            )
            page.goto(f"{base}/admin/login/")
            page.fill("#id_username", "root")
            page.fill("#id_password", "pw-root")
            page.click("input[type=submit]")
            page.goto(f"{base}/admin/checkpoints/thread/")
            page.get_by_role("link", name="host-demo-2").first.click()
            page.wait_for_load_state()
            assert "host-demo-2" in page.content()
            assert "Server Error" not in page.content()
            page.screenshot(path=str(shots / "host-thread.png"), full_page=True)
            page.goto(f"{base}/checkpoints/api/docs/")
            page.wait_for_selector(".opblock", timeout=30000)
            assert page.locator(".opblock").count() >= 10
            page.screenshot(path=str(shots / "host-api-docs.png"), full_page=True)
            browser.close()
        assert outside == [], f"pages asked other servers: {outside}"
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
