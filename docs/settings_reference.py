"""Write docs/operations/settings.md from the settings code.

The names and defaults come from the code itself: the ``CHECKPOINTS`` defaults in
``checkpoints/conf.py``, every environment variable ``project/settings.py`` reads (and
the few read elsewhere in the service or in ``scripts/*.sh``). Only the sentence saying
what each one does is kept here, in ``WHAT``; a variable or key without one falls back to
the comment above it in the code, so a new setting shows up on the page either way.

    python docs/settings_reference.py          # rewrite the page
    python docs/settings_reference.py --check  # exit 1 when the page is not current

``tests/test_docs.py`` runs the check.
"""

from __future__ import annotations

import ast
import functools
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "operations" / "settings.md"
CONF = ROOT / "checkpoints" / "conf.py"
SETTINGS = ROOT / "project" / "settings.py"
CHECKS = ROOT / "checkpoints" / "checks.py"
# Other modules and scripts that read the environment themselves.
ELSEWHERE = ("project", "checkpoints", "retention")
SCRIPTS = ROOT / "scripts"
# What the scripts pass between themselves (the tests set these), not an operator's choice.
SCRIPT_PLUMBING = {"DEMO_SKIP_INSTALL", "SERVE_SKIP_INSTALL", "DJANGO_SETTINGS_MODULE"}
ENV_HELPERS = {"_env_number", "_env_count", "_env_rate", "_env_networks", "_env_pool_size"}

# What each setting does, in words. Keys: an environment variable, or CHECKPOINTS["KEY"].
WHAT: dict[str, str] = {
    # --- the store -------------------------------------------------------------------------
    "PROVIDER": "Which store keeps the checkpoints: `postgres`, `sqlite`, `redis` or `memory` "
    "(or a provider named in `SAVERS`).",
    "SAVERS": "Provider name to the dotted path of a saver class, added to or replacing the "
    "shipped ones; the class must subclass the saver of that database "
    "(see [Customising a saver](../python.md#customising-a-saver)).",
    "CONN_STRING": "The provider's connection string; unset uses Django's default database "
    "(`postgres`, `sqlite`) or `REDIS_URL` (`redis`).",
    "RETENTION_WAITING_MINUTES": "A thread lives this long after its last write (7 days).",
    "RETENTION_FINISHED_MINUTES": "A thread marked finished lives this long after the mark "
    "(1 day); must not exceed the waiting value.",
    "INLINE_COMPRESS_BYTES": "Values whose encoding is larger are stored zstd-compressed; "
    "`null` turns compression off.",
    "MAX_CHECKPOINTS": "Keep only the newest N checkpoints per thread and namespace, pruned "
    "on every write; `0` keeps all.",
    "PG_PREPARED_STATEMENTS": "Named server-side prepared statements on PostgreSQL's hot "
    "paths: `auto` uses them unless a pooler (PgBouncer) sits in front, `1` forces them, "
    "`0` never.",
    "PG_POOL": "`0` turns off the PostgreSQL store's own connection pool.",
    "DURABILITY_RECHECK_SECONDS": "How long the store's advertised durability level is "
    "trusted before it is read again (also read again after a reconnect).",
    "SQLITE_SYNCHRONOUS": "`PRAGMA synchronous` of the store's SQLite connections: `FULL` "
    "syncs every commit; `NORMAL` is faster but a power loss can take the last commits "
    "(stamped `os`; `manage.py check` warns, `checkpoints.W003`).",
    "PG_STANDBY_WAIT_SECONDS": "Bound on a PostgreSQL write's wait for a synchronous "
    "standby; past it the write fails with `StandbyWaitTimeout` and is not acknowledged. "
    "Unset waits as long as PostgreSQL does.",
    "CODEC_ALLOWED_MODULES": "Strict mode of the Redis store's JSON codec: the modules "
    "whose classes it rebuilds.",
    "CODEC_MAX_DEPTH": "How deep the write-side check walks a value; a deeper value is "
    "refused rather than stored unchecked.",
    "ALLOWED_MSGPACK_MODULES": "Unset: LangGraph's rule (permissive unless "
    "`LANGGRAPH_STRICT_MSGPACK`); a list of `module.Class` names: strict, with those "
    "classes allowed (see [Security](../security.md#which-classes-come-back)).",
    "BLOCKED_TYPES": "A stored type the reader does not rebuild: `warn` reads its stored "
    "data with a warning, `raise` refuses it with `BlockedTypeError`.",
    "CODEC_MAX_BYTES": "The most uncompressed bytes one value may hold, written or read: "
    "a larger write is refused with `ValueTooLarge` (413), a larger stored "
    "frame reads as `UnreadableValue` (409).",
    "MAX_CHECKPOINT_BYTES": "The most decompressed bytes one checkpoint read may produce, "
    "and one put or `put_writes` may store; `None` lifts it.",
    "MAX_RESPONSE_BYTES": "The most decompressed bytes one API response or admin page may "
    "read; `None` lifts it.",
    "LIVE_THREAD_FILTERS": "Name to dotted path of each filter the sweep asks which threads "
    "are still live (shipped: pending interrupts and parks).",
    "SWEEP_BATCH_SIZE": "Threads per sweep batch, and per fanned-out batch task.",
    "SWEEP_LEASE_SECONDS": "How long a sweep's lease on a PostgreSQL or SQLite store lasts "
    "unless renewed (every batch renews it): how long a sweep that died on another host "
    "keeps the next one out.",
    "SWEEP_SCHEDULE": "Seconds, or a crontab line: Celery beat runs the sweep on it; unset "
    "schedules nothing.",
    "SWEEP_BATCH_RETRIES": "Retries of a fanned-out sweep batch that failed, before it is "
    "recorded failed.",
    "SWEEP_BATCH_RETRY_SECONDS": "The wait before each of those retries.",
    "ENCRYPTION_KEYS": "Keys for encryption at rest (urlsafe base64, 32 bytes each): the "
    "first encrypts, all decrypt (see [Security](../security.md#encryption-at-rest)).",
    "ENCRYPTION_STORE_ID": "A label bound into every sealed value: distinct per store when "
    "stores share keys; never change it.",
    "ENCRYPTION_REQUIRE_BOUND": "`1` once `reencrypt_checkpoints` has rewritten every old "
    "row: values sealed in the old unbound format are then refused.",
    "GRAPHS": "Graph name to `pkg.module:attribute` of a compiled graph or `StateGraph`: "
    "state updates through the APIs then run the graph's reducers.",
    "GRAPH_SERVER_URL": "The URL of the LangGraph deployment that runs your graphs (this "
    "service only keeps their checkpoints): the console's ready-to-copy resume calls aim "
    "there; unset shows a placeholder.",
    "MESSAGES_PAGE_SIZE": "How many of a message list's newest messages the admin and the "
    "API show at once.",
    "ADMIN_VALUE_PREVIEW_BYTES": "Characters of a value's indented JSON the admin shows "
    "before cutting it (with a link to download it whole); `None` shows every value whole.",
    "STORE_SERVICE_RATE": "Calls one token may make to `/store/v1/` (the remote saver's), "
    "in DRF's rate form; `None` lifts it. Generous: a worker makes a few calls a step.",
    # --- Django and the service --------------------------------------------------------------
    "CHECKPOINTS_DATA_DIR": "Where the service keeps its files: the embedded SQLite "
    "database and the collected static files.",
    "DJANGO_SECRET_KEY": "Django's secret key; with `DJANGO_DEBUG=0` it must be your own, "
    "50 or more random characters, or the service refuses to start.",
    "DJANGO_DEBUG": "`1` (the demo's default) or `0` (production; `scripts/serve.sh` "
    "defaults to it).",
    "DJANGO_ALLOWED_HOSTS": "Comma-separated host names the service answers to; required "
    "with `DJANGO_DEBUG=0`.",
    "DJANGO_CSRF_TRUSTED_ORIGINS": "Comma-separated origins "
    "(`https://checkpoints.example.com`) the admin's forms may come from.",
    "DJANGO_HTTPS": "`1` behind a TLS-terminating proxy: redirect to https (not "
    "`/health/`), secure cookies, HSTS, trust `X-Forwarded-Proto`.",
    "DJANGO_HSTS_SECONDS": "HSTS max-age with `DJANGO_HTTPS=1`.",
    "DJANGO_HSTS_INCLUDE_SUBDOMAINS": "`0` leaves `includeSubDomains` out of HSTS.",
    "DJANGO_HSTS_PRELOAD": "`0` leaves `preload` out of HSTS.",
    "DATABASE_URL": "Django's database (`postgres://user@host:5432/name`, "
    "`sqlite:////abs/path.db`); unset, a SQLite file in `CHECKPOINTS_DATA_DIR`.",
    "DATABASE_POOL_SIZE": "Connections in Django's own pool per server process when "
    '`DATABASE_URL` is PostgreSQL (Django 5.1+ `OPTIONS["pool"]`, set by `project.asgi` '
    "and `project.wsgi`; management commands connect directly); `0` turns it off (a "
    "connection per request under ASGI). Size it with `CHECKPOINTS_PG_POOL_SIZE`: (both) x "
    "processes is what the service holds.",
    "REDIS_URL": "The cache (the API's throttle counters live there) and the default Redis store.",
    "CHECKPOINTS_GRAPHS": "The graphs the threads API runs for state updates: a path to a "
    "`langgraph.json` (its `graphs` map, paths relative to the file as the LangGraph CLI "
    "reads them) or `name=pkg.module:attr` pairs separated by commas; a graph that cannot "
    "be loaded is a `manage.py check` error naming it.",
    "CHECKPOINTS_CORS_ORIGINS": "Comma-separated origins (`https://smith.langchain.com`) "
    "whose browser pages may call `/langgraph/` (LangGraph Studio, a web app); unset, CORS "
    "is off. No cookies cross: a browser client sends `x-api-key` as the SDK does.",
    "CHECKPOINTS_LOGIN_FAILURE_LIMIT": "Wrong admin passwords for one user name from one "
    "address before that pair is refused (429, the right password too).",
    "CHECKPOINTS_LOGIN_COOLOFF_MINUTES": "How long that refusal lasts after the last try.",
    "CHECKPOINTS_MAX_BODY_BYTES": "The largest request body the service reads "
    "(Django's `DATA_UPLOAD_MAX_MEMORY_SIZE`).",
    "CHECKPOINTS_THROTTLE_SWEEP": "Each caller's rate for the API's sweep (DRF's "
    "`N/sec|min|hour|day`); `off` lifts it; past it, 429 with `Retry-After`.",
    "CHECKPOINTS_THROTTLE_ROLLBACK": "Each caller's rate for rollbacks.",
    "CHECKPOINTS_THROTTLE_FORK": "Each caller's rate for forks and thread copies.",
    "CHECKPOINTS_THROTTLE_BULK_UPDATE": "Each caller's rate for bulk updates and `update_state`.",
    "CHECKPOINTS_THROTTLE_DELETE": "Each caller's rate for thread deletes (a prune spends "
    "one per thread).",
    "CHECKPOINTS_THROTTLE_TOKEN_FAILURES": "Failed token authentications per client "
    "address; past it every token from that address gets 429 until the window ends.",
    "CHECKPOINTS_METRICS_TOKEN": "`/metrics` then needs `Authorization: Bearer <token>`.",
    "CHECKPOINTS_METRICS_ALLOW": "Comma-separated addresses or networks that may scrape "
    "`/metrics`; `*` for any (the default once a token is set).",
    "CELERY_BROKER_URL": "Celery's broker.",
    "CELERY_RESULT_BACKEND": "Celery's result backend.",
    "CHECKPOINTS_HEALTH_CELERY": "`1`/`0`: whether `/health/` checks the Celery broker and "
    "a worker (default: when a broker is named or the sweep is scheduled).",
    "DJANGO_LOG_FORMAT": "`json` (one object a line) or `console`.",
    "LOG_LEVEL": "The root logger's level.",
    "OTEL_TRACES_EXPORTER": "With the `otel` extra: `otlp` or `console`; `none` "
    "instruments nothing.",
    "OTEL_SERVICE_NAME": "The service name on the spans.",
    "CHECKPOINTS_PG_POOL_SIZE": "Connections in the PostgreSQL store's pool per process.",
    "DEMO_PORT": "The demo's port.",
    "PORT": "The port `scripts/serve.sh` binds on 127.0.0.1.",
    "WEB_CONCURRENCY": "gunicorn worker processes.",
    "GUNICORN_TIMEOUT": "Seconds a request may take before gunicorn restarts its worker.",
    "FORWARDED_ALLOW_IPS": "Proxies whose `X-Forwarded-For`/`-Proto` name the client; "
    "behind a proxy on this host, `127.0.0.1`.",
    "VENV": "The virtualenv the scripts install into and run from.",
    "PYTHON": "The Python that makes the virtualenv.",
    "CHECKPOINTS_TEST_OUTPUT": "Where the test suite writes screenshots and reports.",
}


@dataclass
class Variable:
    name: str
    default: str
    feeds: str = ""
    comment: str = ""
    where: str = ""
    keys: list[str] = field(default_factory=list)


def _comment_above(lines: list[str], lineno: int) -> str:
    """The ``#`` comment lines right above line ``lineno`` (1-based), joined."""
    found: list[str] = []
    index = lineno - 2
    while index >= 0 and lines[index].strip().startswith("#"):
        found.insert(0, lines[index].strip().lstrip("#").strip())
        index -= 1
    return " ".join(found)


def _default_text(node: ast.AST | None) -> str:
    if node is None:
        return "unset"
    try:
        value = ast.literal_eval(node) if not _arithmetic(node) else eval(ast.unparse(node), {})
    except ValueError:
        return f"`{ast.unparse(node)}`"
    if value is None:
        return "unset"
    if isinstance(value, str) and value == "":
        return "empty"
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1024 * 1024:
        if value % (1024 * 1024) == 0:
            return f"`{value}` ({value // (1024 * 1024)} MiB)"
    return f"`{value}`" if isinstance(value, str) else f"`{value!r}`"


def _arithmetic(node: ast.AST) -> bool:
    """Whether ``node`` is constant numbers and operators only (``64 * 1024 * 1024``)."""
    if isinstance(node, ast.BinOp):
        return all(
            isinstance(side, ast.Constant) and isinstance(side.value, int) or _arithmetic(side)
            for side in (node.left, node.right)
        )
    return False


def _constants(tree: ast.Module, *, follow: bool = True) -> dict[str, str]:
    """Module-level string constants, and those imported from this repository's modules
    (``from checkpoints.graph_sources import GRAPHS_ENV``): a variable named by one."""
    found: dict[str, str] = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            found.update({ast.unparse(t): node.value.value for t in node.targets})
        elif follow and isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            theirs = _module_constants(node.module)
            found.update(
                {a.asname or a.name: theirs[a.name] for a in node.names if a.name in theirs}
            )
    return found


@functools.cache
def _module_constants(module: str) -> dict[str, str]:
    """The string constants a module of this repository defines itself (one level: a
    constant it imports in turn is not followed)."""
    path = ROOT / (module.replace(".", "/") + ".py")
    return _constants(ast.parse(path.read_text()), follow=False) if path.is_file() else {}


def _env_read(node: ast.AST, constants: dict[str, str]) -> tuple[str, ast.AST | None] | None:
    """(variable, default node) when ``node`` reads one environment variable."""

    def name_of(arg: ast.AST) -> str | None:
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            return arg.value
        return constants.get(arg.id) if isinstance(arg, ast.Name) else None

    if isinstance(node, ast.Call):
        func = node.func
        args = node.args
        is_get = (
            isinstance(func, ast.Attribute)
            and func.attr == "get"
            and ast.unparse(func.value) == "os.environ"
        )
        is_helper = isinstance(func, ast.Name) and func.id in ENV_HELPERS
        if (is_get or is_helper) and args and name_of(args[0]):
            return name_of(args[0]), args[1] if len(args) > 1 else None
    if (
        isinstance(node, ast.Subscript)
        and ast.unparse(node.value) == "os.environ"
        and name_of(node.slice)
    ):
        return name_of(node.slice), None
    return None


def _targets(statement: ast.stmt) -> list[str]:
    if isinstance(statement, ast.Assign):
        return [ast.unparse(t) for t in statement.targets]
    if isinstance(statement, ast.AnnAssign | ast.AugAssign):
        return [ast.unparse(statement.target)]
    if isinstance(statement, ast.If):
        return [name for inner in statement.body for name in _targets(inner)]
    return []


def settings_variables() -> list[Variable]:
    """Every variable project/settings.py reads, in the order it reads them."""
    source = SETTINGS.read_text()
    lines = source.splitlines()
    tree = ast.parse(source)
    constants = _constants(tree)
    found: dict[str, Variable] = {}

    def visit(node: ast.AST, feeds: str, statement: ast.stmt, comment_line: int) -> None:
        read = _env_read(node, constants)
        if read is not None:
            name, default = read
            if name not in found:
                found[name] = Variable(
                    name,
                    _default_text(default),
                    feeds,
                    _comment_above(lines, comment_line),
                    keys=[feeds] if feeds.startswith("CHECKPOINTS[") else [],
                )
            elif not found[name].default.strip("`") and default is not None:
                found[name].default = _default_text(default)
            return
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant):
                    visit(value, f'{feeds}["{key.value}"]', statement, value.lineno)
                elif value is not None:
                    visit(value, feeds, statement, value.lineno)
            return
        for child in ast.iter_child_nodes(node):
            visit(child, feeds, statement, comment_line)

    for statement in tree.body:
        if isinstance(statement, ast.FunctionDef):
            continue  # the helpers' own os.environ reads take their caller's name
        if isinstance(statement, ast.If):
            visit(statement.test, ", ".join(_targets(statement)), statement, statement.lineno)
            for inner in statement.body:
                inner_targets = ", ".join(_targets(inner))
                visit(inner, inner_targets, inner, inner.lineno)
            continue
        visit(statement, ", ".join(_targets(statement)), statement, statement.lineno)
    return list(found.values())


def elsewhere_variables(known: set[str]) -> list[Variable]:
    """Variables the service's other modules and the scripts read themselves."""
    found: dict[str, Variable] = {}
    for package in ELSEWHERE:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path == SETTINGS or "migrations" in path.parts:
                continue
            source = path.read_text()
            lines = source.splitlines()
            tree = ast.parse(source)
            constants = _constants(tree)
            for node in ast.walk(tree):
                read = _env_read(node, constants)
                if read is None or read[0] in known or read[0] in found:
                    continue
                if read[0] == "DJANGO_SETTINGS_MODULE":
                    continue
                where = f"`{path.relative_to(ROOT)}`"
                found[read[0]] = Variable(
                    read[0],
                    _default_text(read[1]),
                    comment=_comment_above(lines, node.lineno),
                    where=where,
                )
    for path in sorted(SCRIPTS.glob("*.sh")):
        for name, default in re.findall(r"\$\{([A-Z][A-Z0-9_]*):-([^}]*)\}", path.read_text()):
            if name in known or name in found or name in SCRIPT_PLUMBING:
                continue
            found[name] = Variable(
                name,
                f"`{default}`" if default else "unset",
                where=f"`{path.relative_to(ROOT)}`",
            )
    return sorted(found.values(), key=lambda v: (v.where, v.name))


def conf_defaults() -> list[tuple[str, str, str]]:
    """(key, default, comment) of every CHECKPOINTS key in checkpoints/conf.py's DEFAULTS."""
    source = CONF.read_text()
    lines = source.splitlines()
    for node in ast.parse(source).body:
        target = node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(node, ast.Assign):
            target = node.targets[0]
        if isinstance(target, ast.Name) and target.id == "DEFAULTS":
            assert isinstance(node.value, ast.Dict)
            return [
                (key.value, _default_text(value), _comment_above(lines, key.lineno))
                for key, value in zip(node.value.keys, node.value.values, strict=True)
                if isinstance(key, ast.Constant)
            ]
    raise LookupError(f"{CONF} has no DEFAULTS dict")


def removed_variables() -> dict[str, str]:
    """checkpoints/checks.py's REMOVED_VARIABLES: variable -> what replaced it."""
    for node in ast.parse(CHECKS.read_text()).body:
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "REMOVED_VARIABLES":
            return ast.literal_eval(node.value)
    raise LookupError(f"{CHECKS} has no REMOVED_VARIABLES")


def _what(key: str, comment: str) -> str:
    text = WHAT.get(key) or comment or "(not described yet)"
    return text.replace("|", "\\|")


def render() -> str:
    variables = settings_variables()
    by_key = {key: v.name for v in variables for key in v.keys}
    out = [
        "# Settings reference",
        "",
        "<!-- Generated by docs/settings_reference.py from checkpoints/conf.py, "
        "project/settings.py",
        "     and the scripts: edit those (or the descriptions in the generator), then run",
        "     `python docs/settings_reference.py`. tests/test_docs.py fails when it is stale. -->",
        "",
        "The service reads every setting from the environment (`project/settings.py`). A host",
        "project that embeds the apps sets the same store settings as keys of a `CHECKPOINTS`",
        "dict in its own settings module. Wrong values are refused by `manage.py check` and at",
        "every start, naming the variable and its value.",
        "",
        "## The store: `CHECKPOINTS`",
        "",
        "Defaults from `checkpoints/conf.py`; the variable is the one the service reads.",
        "",
        "| Key | Variable | Default | What it does |",
        "| --- | --- | --- | --- |",
    ]
    for key, default, comment in conf_defaults():
        name = by_key.get(f'CHECKPOINTS["{key}"]')
        variable = f"`{name}`" if name else "-"
        out.append(f"| `{key}` | {variable} | {default} | {_what(key, comment)} |")
    out += [
        "",
        "## The service's environment",
        "",
        "Every variable `project/settings.py` reads, in the order it reads them, with the",
        "Django setting it fills.",
        "",
        "| Variable | Default | Fills | What it does |",
        "| --- | --- | --- | --- |",
    ]
    for v in variables:
        feeds = f"`{v.feeds}`" if v.feeds else "-"
        key = v.keys[0][len('CHECKPOINTS["') : -2] if v.keys else ""
        what = _what(v.name, "") if v.name in WHAT else _what(key, v.comment)
        out.append(f"| `{v.name}` | {v.default} | {feeds} | {what} |")
    elsewhere = elsewhere_variables({v.name for v in variables})
    out += [
        "",
        "## Read elsewhere",
        "",
        "Variables a module or a script of this repository reads itself.",
        "",
        "| Variable | Default | Read by | What it does |",
        "| --- | --- | --- | --- |",
    ]
    for v in elsewhere:
        out.append(f"| `{v.name}` | {v.default} | {v.where} | {_what(v.name, v.comment)} |")
    out += [
        "",
        "## Removed",
        "",
        "A deployment that still sets one of these is refused at start, naming it.",
        "",
        "| Variable | Instead |",
        "| --- | --- |",
    ]
    for name, instead in removed_variables().items():
        out.append(f"| `{name}` | {instead} |")
    out.append("")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if PAGE.read_text() != text:
            print(f"{PAGE.relative_to(ROOT)} is stale: run python docs/settings_reference.py")
            return 1
        return 0
    PAGE.parent.mkdir(parents=True, exist_ok=True)
    PAGE.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
