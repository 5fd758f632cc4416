"""One subject: a thread's status (what the next sweep does with it first) and its markers.

One rule, in its two forms side by side: `thread_status` (one thread, with the detail that
goes with it: the admin list, the thread page and the API) and `status_condition` (the same
rule as a condition on Thread rows: the admin's status filter and the API's). Both read the
facts `with_status_facts` annotates, and the claims registered apps hold on threads (holds,
parks: `register_claim_source`); tests/checkpoints/test_status_rule.py holds them equal.

The order is the sweep's: a thread past a horizon (finished and due, or idle past its
waiting horizon) that nothing claims is "due for deletion" before anything else is said of
it. Then what claims it or needs a person: an operator's hold, an interrupt waiting on a
human, an error, a park; then a finished mark (due later, or written since: the sweep's run
rule spares it), then recent and idle. A thread past its horizon but claimed shows the
claim and says it is past its horizon too.

Beside the one status, `thread_markers` and `marker_condition` give every marker that is
true of a thread, each on its own (failed, waiting on a human, past its horizon, due, held,
parked, finished): the console shows them together and its filters select by them, so a
failed thread that is also due or held is still found under "Failed".

The claims the rule knows are the shipped ones: a pending interrupt at the head (the
``interrupts`` filter), a park and a hold. A live-thread filter of a deployment's own is
not seen here; the thread page's live-thread verdict asks every filter.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from django.db.models import BooleanField, Exists, F, Func, OuterRef, Q, QuerySet, Subquery
from django.utils.timesince import timesince, timeuntil

from checkpoints.channels import ERROR, INTERRUPT, RESUME
from checkpoints.codec.render import moment_text, words
from checkpoints.marks import is_marked, with_finished_mark, written_since
from checkpoints.models import Checkpoint, FinishedMark, PendingWrite, Thread
from checkpoints.store.planning.retention import ThreadRetention
from checkpoints.store.registry import get_saver

# Written within this long ago: someone (a graph, a person) is probably still at it.
RECENT = timedelta(minutes=15)

# In the order the rule checks them.
KINDS = {
    "due": "Due for deletion",
    "held": "Held",
    "waiting_on_human": "Waiting on a human",
    "failed": "Failed",
    "parked": "Parked",
    "finished": "Finished",
    "recent": "Recently written",
    "idle": "Idle",
}
# Facts that may hold together, in the order the console shows them.
MARKERS = {
    "failed": "Failed",
    "waiting_on_human": "Waiting on a human",
    "due": "Due for deletion",
    "past_horizon": "Past its horizon",
    "held": "Held",
    "parked": "Parked",
    "finished": "Finished",
}
# The kinds most threads are in: their pages walk the write-order index (admin/paging.py).
MANY = ("recent", "idle")
# The kinds a registered claim source gives (retention's holds and parks).
CLAIM_KINDS = ("held", "parked")


@dataclass(frozen=True)
class ThreadStatus:
    kind: str
    detail: str = ""

    @property
    def label(self) -> str:
        return KINDS[self.kind]


@dataclass(frozen=True)
class Marker:
    kind: str
    detail: str = ""

    @property
    def label(self) -> str:
        return MARKERS[self.kind]


@dataclass(frozen=True)
class Claim:
    """A promise kept outside the store that the sweep spares a thread (a hold, a park)."""

    kind: str
    # In words, whole: "held by ops: refund dispute until 2026-12-09 10:00:00 UTC".
    detail: str
    until: datetime | None = None


class ClaimSource(Protocol):
    """Where an app keeps one kind of claim; registered from its AppConfig.ready()."""

    kind: str

    def claims(self, *, provider: str, thread_ids: list[str], now: datetime) -> dict[str, Claim]:
        """thread id -> its live claim, for those of ``thread_ids`` that have one."""

    def claimed(self, *, provider: str, now: datetime) -> QuerySet:
        """The live claims' rows (each with a ``thread_id``), in their own database."""


_sources: dict[str, ClaimSource] = {}


def register_claim_source(source: ClaimSource) -> None:
    """Have the rule read ``source``'s claims; one source per kind (a later one replaces)."""
    if source.kind not in CLAIM_KINDS:
        raise ValueError(f"claim kind {source.kind!r} is not one of {', '.join(CLAIM_KINDS)}")
    _sources[source.kind] = source


def claims_of(
    *, provider: str, thread_ids: Iterable[str], now: datetime
) -> dict[str, dict[str, Claim]]:
    """thread id -> {kind: claim} for the threads some registered source claims: one read
    per source, so a page of rows costs a query per kind, not per row."""
    ids = [str(t) for t in thread_ids]
    found: dict[str, dict[str, Claim]] = {}
    if not ids:
        return found
    for kind, source in _sources.items():
        for thread_id, claim in source.claims(provider=provider, thread_ids=ids, now=now).items():
            found.setdefault(thread_id, {})[kind] = claim
    return found


def node_of(task_path: str) -> str:
    """The node a pull task ran (``"~__pregel_pull, approve"`` -> ``approve``)."""
    head, _, rest = (task_path or "").partition(", ")
    return rest.split(",")[0].strip() if head.endswith("__pregel_pull") else ""


def question_of(value) -> str:
    """The question an interrupt write asks (its first Interrupt's value) in words, shortened:
    a dict payload reads "Ship order 42? (options: yes, no)", never as its repr."""
    first = value[0] if isinstance(value, (list, tuple)) and value else value
    return words(getattr(first, "value", first))[:300]


def when(moment: datetime) -> str:
    return moment_text(moment)


def asked(question: str, node: str = "") -> str:
    """An interrupt in words: its question (and node), or "an interrupt"."""
    text = f"“{question}”" if question else "an interrupt"
    return f"{text} at {node}" if node else text


# -- the Python form ---------------------------------------------------------------------
def past_horizon(
    *,
    now: datetime,
    last_write_at: datetime | None,
    waiting_minutes: int,
    mark_due: datetime | None = None,
    marked_at: datetime | None = None,
    idle_swept: bool = True,
) -> str:
    """Which horizon the thread is past, in words; "" when none. A mark written since is
    not past (the run rule), unless the thread idles past its waiting horizon too; the
    waiting horizon counts only where the sweep deletes idle threads (``idle_swept``)."""
    if mark_due is not None and mark_due <= now and not written_since(marked_at, last_write_at):
        return f"finished and due since {when(mark_due)}"
    if idle_swept and last_write_at is not None:
        due = last_write_at + timedelta(minutes=waiting_minutes)
        if due <= now:
            return f"past its waiting horizon since {when(due)}"
    return ""


def thread_status(
    *,
    now: datetime,
    last_write_at: datetime | None,
    waiting_minutes: int,
    mark_due: datetime | None = None,
    marked_at: datetime | None = None,
    claims: Mapping[str, Claim] | None = None,
    interrupted: bool = False,
    interrupt_written: bool | None = None,
    question: str = "",
    node: str = "",
    error: str = "",
    idle_swept: bool = True,
) -> ThreadStatus:
    """The one status a thread shows, with the detail that goes with it.

    ``interrupted``: the head's interrupt waits on a person (no resume written yet);
    ``interrupt_written``: the head holds an interrupt write at all, which is what the
    sweep's ``interrupts`` filter claims (defaults to ``interrupted``).
    """
    claims = claims or {}
    held, parked = claims.get("held"), claims.get("parked")
    if interrupt_written is None:
        interrupt_written = interrupted
    past = past_horizon(
        now=now,
        last_write_at=last_write_at,
        waiting_minutes=waiting_minutes,
        mark_due=mark_due,
        marked_at=marked_at,
        idle_swept=idle_swept,
    )
    if past and not (held or parked or interrupt_written):
        return ThreadStatus("due", f"the next sweep deletes it: {past}")
    # Past a horizon but claimed: the claim is the status, the horizon is said too.
    spares = f"; {past}: the sweep spares it" if past else ""
    if held:
        return ThreadStatus("held", held.detail + spares)
    if interrupted:
        waited = f", waiting {timesince(last_write_at, now)}" if last_write_at else ""
        return ThreadStatus("waiting_on_human", asked(question, node) + waited + spares)
    # What else spares a thread past its horizon: its park, or an interrupt write at its
    # head that a resume already answered (the interrupts filter still claims it).
    tail = f"{spares} while its head holds an interrupt write" if past else ""
    if error:
        return ThreadStatus(
            "failed", error + (f"{spares} while {parked.detail}" if parked and past else tail)
        )
    if parked:
        return ThreadStatus("parked", parked.detail + spares)
    if mark_due is not None:
        if written_since(marked_at, last_write_at):
            detail = (
                f"finished, written since: written {when(last_write_at)}, after its mark "
                f"at {when(marked_at)}"
            )
            return ThreadStatus("finished", detail + (tail or "; the sweep spares it"))
        return ThreadStatus("finished", tail[2:] if past else f"due at {when(mark_due)}")
    if past:
        return ThreadStatus("idle", f"last written {when(last_write_at)}" + tail)
    if last_write_at is not None and now - last_write_at <= RECENT:
        return ThreadStatus("recent", f"written {when(last_write_at)}")
    if last_write_at is None:
        return ThreadStatus("idle", "never written")
    due = last_write_at + timedelta(minutes=waiting_minutes)
    if not idle_swept:
        return ThreadStatus("idle", f"its keys expire in {timeuntil(due, now)}")
    return ThreadStatus("idle", f"due in {timeuntil(due, now)}")


def thread_markers(
    *,
    now: datetime,
    last_write_at: datetime | None,
    waiting_minutes: int,
    mark_due: datetime | None = None,
    marked_at: datetime | None = None,
    claims: Mapping[str, Claim] | None = None,
    interrupted: bool = False,
    interrupt_written: bool | None = None,
    question: str = "",
    node: str = "",
    error: str = "",
    idle_swept: bool = True,
) -> list[Marker]:
    """Every marker true of a thread, in `MARKERS` order, each with its own detail; the
    arguments are `thread_status`'s. A thread with none is only recent or idle."""
    claims = claims or {}
    held, parked = claims.get("held"), claims.get("parked")
    if interrupt_written is None:
        interrupt_written = interrupted
    past = past_horizon(
        now=now,
        last_write_at=last_write_at,
        waiting_minutes=waiting_minutes,
        mark_due=mark_due,
        marked_at=marked_at,
        idle_swept=idle_swept,
    )
    found = []
    if error:
        found.append(Marker("failed", error))
    if interrupted:
        waited = f", waiting {timesince(last_write_at, now)}" if last_write_at else ""
        found.append(Marker("waiting_on_human", asked(question, node) + waited))
    spared_by = [
        text
        for text, claims_it in (
            ("held", held),
            ("parked", parked),
            ("its head holds an interrupt write", interrupt_written),
        )
        if claims_it
    ]
    if past and not spared_by:
        found.append(Marker("due", "the next sweep deletes it"))
    if past:
        spares = f"; the sweep spares it: {', '.join(spared_by)}" if spared_by else ""
        found.append(Marker("past_horizon", past + spares))
    if held:
        found.append(Marker("held", held.detail))
    if parked:
        found.append(Marker("parked", parked.detail))
    if mark_due is not None:
        if written_since(marked_at, last_write_at):
            # The run rule: a thread written since its mark runs again, and the mark no
            # longer deletes it (its waiting horizon, counted from the new write, still does).
            detail = (
                f"finished, written since: written {when(last_write_at)}, after its mark "
                f"at {when(marked_at)}" + ("" if past else "; the sweep spares it")
            )
        else:
            detail = f"due at {when(mark_due)}"
        found.append(Marker("finished", detail))
    return found


def _row_facts(row: Any, claims, question: str, node: str, error: str) -> dict:
    return {
        "last_write_at": row.last_write_at,
        "waiting_minutes": ThreadRetention(row.waiting_minutes).in_force().waiting_minutes,
        "mark_due": row.finished_due_at,
        "marked_at": row.finished_marked_at,
        "claims": claims,
        "interrupted": row.has_interrupt and not row.has_resume,
        "interrupt_written": row.has_interrupt,
        "question": question,
        "node": node,
        "error": error or ("the last task failed" if row.has_error else ""),
    }


def row_markers(
    row: Any,
    *,
    now: datetime,
    claims: Mapping[str, Claim] | None = None,
    question: str = "",
    node: str = "",
    error: str = "",
) -> list[Marker]:
    """`thread_markers` of a Thread row annotated by `with_status_facts` (see `row_status`)."""
    return thread_markers(now=now, **_row_facts(row, claims, question, node, error))


def row_status(
    row: Any,
    *,
    now: datetime,
    claims: Mapping[str, Claim] | None = None,
    question: str = "",
    node: str = "",
    error: str = "",
) -> ThreadStatus:
    """`thread_status` of a Thread row annotated by `with_status_facts`; ``question``,
    ``node`` and ``error`` are what the caller read of the head's writes, if anything;
    ``claims`` what `claims_of` found for it."""
    return thread_status(now=now, **_row_facts(row, claims, question, node, error))


# -- the facts both forms read -----------------------------------------------------------
def with_status_facts(rows: QuerySet) -> QuerySet:
    """Thread rows annotated with what the rule reads: the finished mark (selectors'
    ``finished_*``), ``head_id`` (the root namespace's newest checkpoint) and whether that
    head holds an interrupt, a resume or an error write. Correlated per row: answered from
    the (thread, ns, checkpoint_id) index, so the cost follows the page, not the table."""
    head = (
        Checkpoint.objects.filter(thread=OuterRef("pk"), checkpoint_ns="")
        .order_by("-checkpoint_id")
        .values("checkpoint_id")[:1]
    )

    def at_head(channel: str) -> Exists:
        return Exists(
            PendingWrite.objects.filter(
                thread=OuterRef("pk"),
                checkpoint_ns="",
                checkpoint_id=OuterRef("head_id"),
                channel=channel,
            )
        )

    return (
        with_finished_mark(rows)
        .annotate(head_id=Subquery(head))
        .annotate(
            has_interrupt=at_head(INTERRUPT),
            has_resume=at_head(RESUME),
            has_error=at_head(ERROR),
        )
    )


# -- the SQL form ------------------------------------------------------------------------
def status_condition(kind: str, now: datetime, *, saver=None) -> Q:
    """The condition on rows annotated by `with_status_facts` that `thread_status` gives
    ``kind``, for the rows of ``saver``'s store (the deployment's by default); ValueError
    naming the kinds for one it does not know."""
    if kind not in KINDS:
        raise ValueError(f"status {kind!r} is not one of {', '.join(KINDS)}")
    if saver is None:
        saver = get_saver()
    alias = saver.db_alias or "default"
    # Each test starts from a small set read once (hashed): the marked threads, the
    # threads with any interrupt or error write (a partial index), the live holds and
    # parks; only a thread in such a set has its head asked. So the rule costs little per
    # thread even where it must look at every thread (recent, idle) to count them.
    marked = Q(is_marked())
    # Negated, a hashed NOT IN of the marks (thread_id is never null, so it is NOT EXISTS):
    # probing the marks' index once per thread was half of counting every idle thread.
    unmarked = ~Q(thread_id__in=FinishedMark.objects.values("thread_id"))
    # A rule's own test looks its few ids up (_AmongIds); a negated one keeps IN, which
    # PostgreSQL hashes once, where NOT (id = ANY(...)) would walk the array per thread.
    interrupts, erred = _holding(INTERRUPT), _holding(ERROR)
    heads_waiting = Q(has_interrupt=True) & Q(has_resume=False)
    # The head holds an interrupt write: what the sweep's interrupts filter claims.
    interrupt_written = Q(pk__in=interrupts) & Q(has_interrupt=True)
    waiting = Q(pk__in=interrupts) & heads_waiting
    failed = Q(pk__in=erred) & Q(has_error=True)
    recent = Q(last_write_at__gte=now - RECENT)
    held, held_few = _claimed("held", saver.provider, alias, now)
    parked, parked_few = _claimed("parked", saver.provider, alias, now)
    finished_due, idle_past, shortest = _past_horizon(alias, now)
    past = finished_due | idle_past
    if kind == "due":
        return past & ~(held | parked | interrupt_written)
    if kind == "held":
        return held_few
    if kind == "waiting_on_human":
        return ~held & Q(_AmongIds("pk", interrupts)) & heads_waiting
    # Each kind below holds for none of the kinds before it. Written out per kind, with
    # the claims a kind's own test excludes taken out of "not due" (~due is ~past or
    # claimed; under ~held and ~parked, ~past or an interrupt written): each thread of a
    # count is asked fewer questions (idle at 100,000 threads: 105 -> ms).
    if kind == "failed":
        not_due = ~past | parked | interrupt_written
        return ~held & ~waiting & Q(_AmongIds("pk", erred)) & Q(has_error=True) & not_due
    if kind == "parked":
        return ~held & ~waiting & ~failed & parked_few
    unclaimed = ~held & ~parked & ~waiting & ~failed
    if kind == "finished":
        return marked & (~past | interrupt_written) & unclaimed
    # Unmarked, a thread is past a horizon only by idling (a finished horizon needs a mark).
    if kind == "recent":
        return recent & ~idle_past & unmarked & unclaimed
    # Past its horizon and claimed only by an answered interrupt: idle, however recent.
    # Its few answered interrupts past the horizon are looked up by id, so PostgreSQL
    # reads the threads of the quiet range and those ids, never the due ones.
    answered = idle_past & Q(_AmongIds("pk", interrupts)) & interrupt_written
    # Implied by both arms, and a bound an index walk in write order starts from: the
    # page of a capped list skips the recent threads unread (idle's 40th page at 100,000
    # threads read ~5,000 of them first: 106 ms).
    quiet = Q(last_write_at__lt=now - min(RECENT, shortest))
    return quiet & ((~idle_past & ~recent) | answered) & unmarked & unclaimed


def marker_condition(kind: str, now: datetime, *, saver=None) -> Q:
    """The condition on rows annotated by `with_status_facts` that `thread_markers` gives
    the marker ``kind``, whatever else is true of the thread; ValueError naming the
    markers for one it does not know."""
    if kind not in MARKERS:
        raise ValueError(f"marker {kind!r} is not one of {', '.join(MARKERS)}")
    if kind == "due":
        # The one status a marker equals: due only where nothing claims the thread.
        return status_condition("due", now, saver=saver)
    if saver is None:
        saver = get_saver()
    if kind == "finished":
        return Q(is_marked())
    if kind == "waiting_on_human":
        interrupts = _holding(INTERRUPT)
        return Q(_AmongIds("pk", interrupts)) & Q(has_interrupt=True) & Q(has_resume=False)
    if kind == "failed":
        return Q(_AmongIds("pk", _holding(ERROR))) & Q(has_error=True)
    alias = saver.db_alias or "default"
    if kind in CLAIM_KINDS:
        return _claimed(kind, saver.provider, alias, now)[1]
    finished_due, idle_past, _shortest = _past_horizon(alias, now)
    return finished_due | idle_past


def _holding(channel: str):
    """Threads with a write on ``channel`` in their root namespace, at any checkpoint."""
    # Any namespace: a superset is fine (the head is asked next), and the partial index
    # alone answers it.
    return PendingWrite.objects.filter(channel=channel).values("thread_id")


def _claimed(kind: str, provider: str, alias: str, now: datetime) -> tuple[Q, Q]:
    """(the condition "a live claim of ``kind``" to negate, the same to select by): a
    subquery where the claims share the rows' database, else their ids read once."""
    source = _sources.get(kind)
    if source is None:
        return Q(pk__in=[]), Q(pk__in=[])
    rows = source.claimed(provider=provider, now=now)
    if rows.db == alias:
        ids = rows.order_by().values("thread_id")
        return Q(thread_id__in=ids), Q(_AmongIds("thread_id", ids))
    found = Q(AmongValues("thread_id", set(rows.values_list("thread_id", flat=True))))
    return found, found


def _past_horizon(alias: str, now: datetime) -> tuple[Q, Q, timedelta]:
    """The SQL form of `past_horizon` (the ORM stores sweep idle threads), in its two
    parts (finished and due, idle past its waiting horizon), and the shortest waiting
    horizon in force."""
    # Finished and due, its mark not written since (the run rule).
    due_marks = FinishedMark.objects.filter(due_at__lte=now).values("thread_id")
    written_after = FinishedMark.objects.filter(
        thread_id=OuterRef("thread_id"), marked_at__lt=OuterRef("last_write_at")
    )
    finished = Q(_AmongIds("thread_id", due_marks)) & ~Q(Exists(written_after))
    platform = ThreadRetention.platform().waiting_minutes
    idle = Q(waiting_minutes__isnull=True, last_write_at__lt=now - timedelta(minutes=platform))
    # Declared horizons are few distinct values (a partial index holds them): one range
    # per value, as the sweep's own listing of idle threads does.
    declared = (
        Thread.objects.using(alias)
        .filter(waiting_minutes__isnull=False)
        .order_by()
        .values_list("waiting_minutes", flat=True)
        .distinct()
    )
    shortest = platform
    for minutes in declared:
        idle |= Q(waiting_minutes=minutes, last_write_at__lt=now - timedelta(minutes=minutes))
        shortest = min(shortest, minutes)
    return finished, idle, timedelta(minutes=shortest)


class _AmongIds(Func):
    """``column IN (subquery)`` for a subquery of a few ids out of a big table.

    PostgreSQL plans ``IN (subquery)`` as a semi join and, expecting many rows, scans all
    100,000 threads for the 1,000 the subquery names (29 ms); ``= ANY(ARRAY(subquery))``
    runs the subquery once and looks the ids up by primary key (7 ms).
    """

    output_field = BooleanField()
    template = "%(expressions)s"
    arg_joiner = " IN "

    def as_postgresql(self, compiler, connection, **extra):
        # The subquery compiles in its own parentheses: "id = ANY(ARRAY(SELECT ...))".
        return self.as_sql(
            compiler, connection, template="%(expressions)s)", arg_joiner=" = ANY(ARRAY", **extra
        )


class AmongValues(Func):
    """``column IN (values)`` for a list read from another database, as one array
    parameter on PostgreSQL: 2,000 thread ids as 2,000 parameters were compiled, sent and
    planned on every count and page (about 100 ms of a 240 ms page)."""

    output_field = BooleanField()

    def __init__(self, column: str, values) -> None:
        self.values = sorted(values)
        super().__init__(F(column))

    def as_sql(self, compiler, connection, **extra):
        column, params = compiler.compile(self.get_source_expressions()[0])
        if not self.values:
            return "1 = 0", params
        marks = ", ".join(["%s"] * len(self.values))
        return f"{column} IN ({marks})", [*params, *self.values]

    def as_postgresql(self, compiler, connection, **extra):
        column, params = compiler.compile(self.get_source_expressions()[0])
        return f"{column} = ANY(%s)", [*params, self.values]
