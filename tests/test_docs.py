"""The documentation: the site builds with warnings as errors, every link inside the
repository resolves (offline), the settings reference is current, the README stays short."""

from __future__ import annotations

import importlib
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
from markdown.extensions.toc import slugify

from tests.standalone import ROOT

DOCS = ROOT / "docs"
CHECKED = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *sorted(DOCS.rglob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCED = re.compile(r"^(```|~~~).*?^\1\s*$", re.S | re.M)
INLINE_CODE = re.compile(r"`[^`\n]*`")
HTML_COMMENT = re.compile(r"<!--.*?-->", re.S)


def _generator():
    path = DOCS / "settings_reference.py"
    spec = importlib.util.spec_from_file_location("settings_reference", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _prose(text: str) -> str:
    """The text a reader follows links in: no code blocks, inline code or comments."""
    return INLINE_CODE.sub("", FENCED.sub("", HTML_COMMENT.sub("", text)))


def _anchors(page: Path) -> set[str]:
    """The ids MkDocs (Python-Markdown's toc) gives the page's headings; GitHub's agree for
    the headings these pages use (letters, digits, spaces, apostrophes, colons, code)."""
    found: set[str] = set()
    for heading in re.findall(r"^#{1,6} (.+?)\s*#*$", FENCED.sub("", page.read_text()), re.M):
        base = slugify(heading.replace("`", ""), "-")
        anchor, n = base, 0
        while anchor in found:
            n += 1
            anchor = f"{base}_{n}"
        found.add(anchor)
    return found


def _links(page: Path) -> list[str]:
    return LINK.findall(_prose(page.read_text()))


def test_the_link_pattern_sees_links():
    # Guards the check below from passing on a pattern that matches nothing.
    assert "docs/getting-started.md" in _links(ROOT / "README.md")
    assert "ARCHITECTURE.md" in _links(ROOT / "README.md")
    assert any("#" in link for page in CHECKED for link in _links(page))


@pytest.mark.parametrize("page", CHECKED, ids=[str(p.relative_to(ROOT)) for p in CHECKED])
def test_every_relative_link_resolves(page):
    broken = []
    for link in _links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", link):  # https:, mailto: ...: not ours to check
            continue
        path, _, anchor = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        if ROOT not in target.parents and target != ROOT:
            broken.append(f"{link}: outside the repository")
        elif not target.exists():
            broken.append(f"{link}: no such file")
        elif anchor and target.suffix == ".md" and anchor not in _anchors(target):
            broken.append(f"{link}: {target.name} has no heading #{anchor}")
        elif page.is_relative_to(DOCS) and not target.is_relative_to(DOCS):
            # The site is built from docs/ alone: a link out of it is a 404 there.
            broken.append(f"{link}: leaves docs/ (name the file in code instead)")
    assert not broken, broken


@pytest.mark.parametrize("page", CHECKED, ids=[str(p.relative_to(ROOT)) for p in CHECKED])
def test_no_page_points_outside_the_repository(page):
    text = page.read_text()
    for outside in ("../shared", "/work/shared", "shared/DESIGN.md", "shared/CONVENTIONS.md"):
        assert outside not in text, f"{page.name} points to {outside}"


CODE_SPAN = re.compile(r"`([^`\n]+)`")
REPO_FILE = re.compile(
    r"(?:checkpoints|retention|project|tests|bench|scripts|docs|\.ci)/[\w./-]*"
    r"\.(?:py|md|toml|sh|yml|yaml|html|json)"
)
DOTTED = re.compile(r"(?:checkpoints|retention|project)(?:\.\w+)+")
CHECK_ID = re.compile(r"(?:checkpoints|retention)\.[EW]\d{3}")


def _resolves(name: str) -> bool:
    """Whether ``name`` is a module of ours, or an attribute reached from one."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(found, attribute):
                return False
            found = getattr(found, attribute)
        return True
    return False


@pytest.mark.django_db
def test_every_name_the_docs_give_exists():
    """Files, modules, classes, functions, system check ids and permissions named in code
    spans are in the code: a rename that leaves the docs behind fails here."""
    from django.contrib.auth.models import Permission

    sources = "\n".join(
        path.read_text()
        for package in ("checkpoints", "retention", "project")
        for path in (ROOT / package).rglob("*.py")
    )
    permissions = {
        f"{app}.{codename}"
        for app, codename in Permission.objects.values_list("content_type__app_label", "codename")
    }
    missing = []
    for page in CHECKED:
        for span in set(CODE_SPAN.findall(page.read_text())):
            span = span.strip()
            if REPO_FILE.fullmatch(span):
                ok = (ROOT / span).exists()
            elif CHECK_ID.fullmatch(span):
                ok = f'"{span}"' in sources
            elif DOTTED.fullmatch(span):
                ok = span in permissions or _resolves(span)
            else:
                continue
            if not ok:
                missing.append(f"{page.relative_to(ROOT)}: {span}")
    assert not missing, missing


VARIABLE = re.compile(
    r"\b(?:CHECKPOINTS|LLM_PROVIDER|DJANGO|REDIS|DATABASE|CELERY|OTEL|DEMO|GUNICORN|WEB|"
    r"FORWARDED)_[A-Z0-9_]*[A-Z0-9]\b"
)


def test_every_variable_the_docs_give_is_read():
    """An environment variable a page names is read by the service, its scripts or CI."""
    sources = (
        "\n".join(
            path.read_text()
            for folder in ("checkpoints", "retention", "project", "scripts", "tests")
            for path in (ROOT / folder).rglob("*")
            if path.suffix in (".py", ".sh")
        )
        + (ROOT / ".ci" / "run").read_text()
    )
    missing = [
        f"{page.relative_to(ROOT)}: {name}"
        for page in CHECKED
        for span in set(CODE_SPAN.findall(page.read_text()))
        for name in VARIABLE.findall(span)
        if name not in sources
    ]
    assert not missing, missing


def test_the_site_builds_with_warnings_as_errors(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    site = tmp_path / "site"
    for page in ("index.html", "migrating/index.html", "operations/settings/index.html"):
        assert (site / page).is_file(), page
    # The generator is not published as a page or a file.
    assert not list(site.rglob("*.py"))
    settings_page = (site / "operations/settings/index.html").read_text()
    assert "LLM_PROVIDER_CHECKPOINT_RETENTION_WAITING_MINUTES" in settings_page


def test_every_page_is_in_the_navigation():
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    missing = sorted(page for page in pages if f": {page}" not in nav)
    assert not missing, missing


def test_settings_reference_is_current():
    generator = _generator()
    assert generator.PAGE.read_text() == generator.render(), (
        "docs/operations/settings.md is stale: run python docs/settings_reference.py"
    )


def test_settings_reference_covers_the_code():
    """Every CHECKPOINTS key and every variable the checks name is on the page, with the
    default the code has, and every one is described."""
    from checkpoints.checks import ENV_NAMES
    from checkpoints.conf import DEFAULTS

    page = (DOCS / "operations" / "settings.md").read_text()
    rows = {
        line.split("|")[1].strip(): line for line in page.splitlines() if line.startswith("| `")
    }
    for key in DEFAULTS:
        assert f"`{key}`" in rows, key
    for key, variable in ENV_NAMES.items():
        assert f"`{variable}`" in rows, variable
        assert f"`{variable}`" in rows[f"`{key}`"], (key, variable)
    assert "| `10080` |" in rows["`RETENTION_WAITING_MINUTES`"]
    assert "`redis://127.0.0.1:6379/0`" in rows["`REDIS_URL`"]
    assert "(not described yet)" not in page


def test_generator_reads_a_new_variable(tmp_path, monkeypatch):
    """A variable added to the settings shows up on the page with its default and comment,
    before anyone describes it."""
    generator = _generator()
    settings = tmp_path / "settings.py"
    settings.write_text(
        generator.SETTINGS.read_text()
        + '\n# How many widgets to keep.\nWIDGETS = _env_number("CHECKPOINTS_WIDGETS", 3)\n'
        + 'GADGETS_ENV = "CHECKPOINTS_GADGETS"\n'
        + "# Gadgets, named by a constant.\nGADGETS = os.environ.get(GADGETS_ENV, 'one')\n"
    )
    monkeypatch.setattr(generator, "SETTINGS", settings)
    rows = [line for line in generator.render().splitlines() if "_WIDGETS" in line]
    assert rows == ["| `CHECKPOINTS_WIDGETS` | `3` | `WIDGETS` | How many widgets to keep. |"]
    rows = [line for line in generator.render().splitlines() if "_GADGETS" in line]
    assert rows == ["| `CHECKPOINTS_GADGETS` | `one` | `GADGETS` | Gadgets, named by a constant. |"]


def test_readme_is_a_front_page():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines: move detail into docs/"
