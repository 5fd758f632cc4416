"""LangGraph's own dev server (`langgraph dev`) for differential tests, and the comparison.

`langgraph-cli[inmem]` pins packages our venv cannot hold (jsonschema-rs below schemathesis'
floor), so it lives in its own venv, made from PyPI on first use (LANGGRAPH_DEV_VENV names
another). It runs offline, on loopback, on a spare port, serving a folder's langgraph.json;
a server that does not answer fails the test (never a skip).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.private_servers import free_port

VENV = Path(
    os.environ.get(
        "LANGGRAPH_DEV_VENV", Path.home() / ".cache" / "checkpoint-store" / "langgraph-dev"
    )
)
# Ids and timestamps differ between two servers by nature: not compared.
SKIP = {
    "thread_id",
    "created_at",
    "updated_at",
    "state_updated_at",
    "checkpoint_id",
    "id",
    "run_id",
}


def dev_venv() -> Path:
    """The venv's ``langgraph`` binary, the venv made from PyPI first when missing."""
    binary = VENV / "bin" / "langgraph"
    if not binary.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run(
            [str(VENV / "bin" / "pip"), "install", "-q", "langgraph-cli[inmem]"], check=True
        )
    return binary


@contextmanager
def running_dev_server(folder: Path) -> Iterator[str]:
    """`langgraph dev` serving ``folder`` (its langgraph.json): its URL, stopped after."""
    binary = dev_venv()
    port = free_port()
    env = {**os.environ, "LANGSMITH_TRACING": "false", "LANGGRAPH_API_KEY": ""}
    proc = subprocess.Popen(
        [str(binary), "dev", "--port", str(port), "--host", "127.0.0.1", "--no-browser"],
        cwd=folder,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(240):
            try:
                if httpx.get(f"{url}/ok", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        else:
            pytest.fail("langgraph dev did not answer /ok")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def same_shape(ours, theirs, path="") -> list[str]:
    """Differences between two answers, field by field, ids and timestamps aside."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        out = []
        for key in sorted(set(ours) | set(theirs)):
            if key in SKIP:
                continue
            if key not in ours or key not in theirs:
                out.append(f"{path}.{key}: only in {'ours' if key in ours else 'theirs'}")
                continue
            out += same_shape(ours[key], theirs[key], f"{path}.{key}")
        return out
    if isinstance(ours, list) and isinstance(theirs, list):
        if len(ours) != len(theirs):
            return [f"{path}: {len(ours)} items vs {len(theirs)}"]
        return [
            d
            for i, (a, b) in enumerate(zip(ours, theirs, strict=True))
            for d in same_shape(a, b, f"{path}[{i}]")
        ]
    return [] if ours == theirs else [f"{path}: {ours!r} vs {theirs!r}"]
