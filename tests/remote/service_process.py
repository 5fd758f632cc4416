"""The store service in a process of its own (``manage.py runserver``), on a SQLite file of
its own, for tests that kill it: started, killed with SIGKILL, started again on its port."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.private_servers import free_port
from tests.standalone import ROOT, service_env

TOKEN_SCRIPT = """
from django.contrib.auth.models import User
from rest_framework.authtoken.models import Token
user = User.objects.filter(username="fault-admin").first()
user = user or User.objects.create_superuser("fault-admin", "", "pw")
print("TOKEN", Token.objects.get_or_create(user=user)[0].key)
"""


class ServiceProcess:
    """``manage.py runserver`` on ``port`` over ``sqlite:///<folder>/store.sqlite3``."""

    def __init__(self, folder: Path, name: str = "service") -> None:
        self.folder = folder
        self.name = name
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.database = folder / "store.sqlite3"
        self.env = service_env(
            folder,
            DJANGO_DEBUG="0",
            DJANGO_SECRET_KEY="fault-test-" + "k" * 40,
            DJANGO_ALLOWED_HOSTS="127.0.0.1,localhost",
            DATABASE_URL=f"sqlite:///{self.database}",
            LLM_PROVIDER_CHECKPOINT="sqlite",
            PYTHONPATH=str(ROOT),
        )
        self.process: subprocess.Popen | None = None
        self.token = ""

    def _manage(self, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout

    def prepare(self) -> None:
        self._manage("migrate", "--verbosity", "0")
        out = self._manage("shell", "-c", TOKEN_SCRIPT)
        self.token = next(line.split()[1] for line in out.splitlines() if line.startswith("TOKEN"))

    def start(self) -> None:
        log = open(self.folder / f"{self.name}.log", "a")  # noqa: SIM115 - the process writes it
        self.process = subprocess.Popen(
            [
                sys.executable,
                "manage.py",
                "runserver",
                f"127.0.0.1:{self.port}",
                "--noreload",
                "--skip-checks",
            ],
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        deadline = time.monotonic() + 60
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"the service exited: {self.log()[-3000:]}")
            try:
                httpx.post(f"{self.url}/store/v1/info", timeout=2)
                return
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def kill(self) -> None:
        """SIGKILL: no shutdown, no flush beyond what each commit made durable."""
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)

    def log(self) -> str:
        path = self.folder / f"{self.name}.log"
        return path.read_text() if path.exists() else ""
