"""Fetch the `tests/` of the installed langgraph's sdist into a cache outside the repository.

Nothing of LangGraph is copied into this repository: the sdist is downloaded at test time
(pip, from PyPI) and unpacked under a cache folder, and its files are never edited.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from importlib.metadata import version
from pathlib import Path

PACKAGE = "langgraph"


class SdistError(RuntimeError):
    """The langgraph sdist could not be fetched or unpacked."""


def installed_version() -> str:
    return version(PACKAGE)


def cache_root() -> Path:
    """LGSUITE_CACHE, else a folder under the system temp directory (never the repo)."""
    env = os.environ.get("LGSUITE_CACHE")
    if env:
        return Path(env)
    return Path(tempfile.gettempdir()) / "checkpoint-store-lgsuite"


def upstream_root(ver: str | None = None) -> Path:
    """The unpacked sdist folder (it holds `tests/` and `pyproject.toml`), fetched on first use."""
    ver = ver or installed_version()
    root = cache_root() / f"{PACKAGE}-{ver}"
    if (root / "tests" / "conftest.py").is_file():
        return root
    cache_root().mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache_root(), prefix="download-") as tmp:
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--no-binary",
            ":all:",
            "--quiet",
            "-d",
            tmp,
            f"{PACKAGE}=={ver}",
        ]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        archives = list(Path(tmp).glob(f"{PACKAGE}-{ver}.tar.gz"))
        if not archives:
            # pip could not prepare it (no build backend offline?): fetch the archive plainly.
            try:
                archives = _download_from_json_api(ver, Path(tmp))
            except OSError as exc:
                raise SdistError(
                    f"could not download the {PACKAGE}=={ver} sdist: pip said "
                    f"{done.stderr.strip()[-2000:]!r}; PyPI's JSON API said {exc}"
                ) from exc
        if not archives:
            raise SdistError(
                f"could not download the {PACKAGE}=={ver} sdist from PyPI: "
                f"{done.stderr.strip()[-2000:]}"
            )
        unpack = Path(tmp) / "unpacked"
        with tarfile.open(archives[0]) as tar:
            tar.extractall(unpack, filter="data")
        top = unpack / f"{PACKAGE}-{ver}"
        if not (top / "tests" / "conftest.py").is_file():
            raise SdistError(f"the {PACKAGE}=={ver} sdist has no tests/conftest.py")
        try:
            top.rename(root)
        except OSError:
            # Another run unpacked it first; theirs is identical.
            if not (root / "tests" / "conftest.py").is_file():
                shutil.rmtree(root, ignore_errors=True)
                top.rename(root)
    return root


def _download_from_json_api(ver: str, dest: Path) -> list[Path]:
    import json
    import urllib.request

    url = f"https://pypi.org/pypi/{PACKAGE}/{ver}/json"
    with urllib.request.urlopen(url, timeout=60) as resp:
        info = json.load(resp)
    for entry in info.get("urls", []):
        if entry.get("packagetype") == "sdist":
            target = dest / f"{PACKAGE}-{ver}.tar.gz"
            with urllib.request.urlopen(entry["url"], timeout=300) as resp, target.open("wb") as f:
                shutil.copyfileobj(resp, f)
            return [target]
    return []


if __name__ == "__main__":
    print(upstream_root())
