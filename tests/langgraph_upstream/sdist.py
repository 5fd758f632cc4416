"""Fetch the `tests/` of an installed LangGraph package's sdist into a cache outside the repo.

langgraph by default; the saver packages (langgraph-checkpoint, -sqlite, -postgres) too.

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


def installed_version(package: str = PACKAGE) -> str:
    return version(package)


def _dist_name(package: str) -> str:
    """The sdist's file and folder stem: setuptools keeps dashes, hatch/uv use underscores."""
    return package.replace("-", "_")


def cache_root() -> Path:
    """LGSUITE_CACHE, else a folder under the system temp directory (never the repo)."""
    env = os.environ.get("LGSUITE_CACHE")
    if env:
        return Path(env)
    return Path(tempfile.gettempdir()) / "checkpoint-store-lgsuite"


def upstream_root(ver: str | None = None, package: str = PACKAGE) -> Path:
    """The unpacked sdist folder (it holds `tests/` and `pyproject.toml`), fetched on first use."""
    ver = ver or installed_version(package)
    root = cache_root() / f"{package}-{ver}"
    if (root / "tests" / "__init__.py").is_file() or (root / "tests" / "conftest.py").is_file():
        return root
    cache_root().mkdir(parents=True, exist_ok=True)
    stems = {f"{package}-{ver}", f"{_dist_name(package)}-{ver}"}
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
            f"{package}=={ver}",
        ]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        archives = [p for p in Path(tmp).glob("*.tar.gz") if p.name[: -len(".tar.gz")] in stems]
        if not archives:
            # pip could not prepare it (no build backend offline?): fetch the archive plainly.
            try:
                archives = _download_from_json_api(ver, Path(tmp), package)
            except OSError as exc:
                raise SdistError(
                    f"could not download the {package}=={ver} sdist: pip said "
                    f"{done.stderr.strip()[-2000:]!r}; PyPI's JSON API said {exc}"
                ) from exc
        if not archives:
            raise SdistError(
                f"could not download the {package}=={ver} sdist from PyPI: "
                f"{done.stderr.strip()[-2000:]}"
            )
        unpack = Path(tmp) / "unpacked"
        with tarfile.open(archives[0]) as tar:
            tar.extractall(unpack, filter="data")
        tops = [unpack / stem for stem in stems if (unpack / stem / "tests").is_dir()]
        if not tops:
            raise SdistError(f"the {package}=={ver} sdist has no tests/ folder")
        top = tops[0]
        try:
            top.rename(root)
        except OSError:
            # Another run unpacked it first; theirs is identical.
            if not (root / "tests").is_dir():
                shutil.rmtree(root, ignore_errors=True)
                top.rename(root)
    return root


def _download_from_json_api(ver: str, dest: Path, package: str = PACKAGE) -> list[Path]:
    import json
    import urllib.request

    url = f"https://pypi.org/pypi/{package}/{ver}/json"
    with urllib.request.urlopen(url, timeout=60) as resp:
        info = json.load(resp)
    for entry in info.get("urls", []):
        if entry.get("packagetype") == "sdist":
            target = dest / f"{package}-{ver}.tar.gz"
            with urllib.request.urlopen(entry["url"], timeout=300) as resp, target.open("wb") as f:
                shutil.copyfileobj(resp, f)
            return [target]
    return []


if __name__ == "__main__":
    print(upstream_root(package=sys.argv[1] if len(sys.argv) > 1 else PACKAGE))
