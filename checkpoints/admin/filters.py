"""The list filters: which store, finished or waiting, and the status rule."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.db.models import BooleanField, F, Func, Q

from checkpoints import audit, status
from checkpoints.admin import views as admin_views
from checkpoints.admin.views import store_alias, store_choices
from checkpoints.models import FinishedMark, PendingWrite
from checkpoints.store.planning import utcnow


class ProviderFilter(admin.SimpleListFilter):
    """Which ORM checkpoint store the list reads; the deployment's own when none is chosen.

    The rows of two databases cannot be listed as one, so there is no "All" choice. The
    query itself is switched by `admin_views.with_store_choice`; this filter offers the
    stores and refuses an unknown one (Django answers that with its invalid-filter page).
    """

    title = "provider"
    parameter_name = admin_views.PROVIDER_PARAM

    def lookups(self, request, model_admin):
        return store_choices()

    def queryset(self, request, queryset):
        value = self.value()
        if value is None:
            return queryset
        if value not in dict(self.lookup_choices):
            known = ", ".join(alias for alias, _ in self.lookup_choices)
            raise IncorrectLookupParameters(
                f"checkpoint store {value!r} is not available; choose one of {known}"
            )
        return queryset.using(value)

    def choices(self, changelist):
        current = self.value() or store_alias()
        for alias, label in self.lookup_choices:
            yield {
                "selected": alias == current,
                "query_string": changelist.get_query_string({self.parameter_name: alias}),
                "display": label,
            }

    def get_facet_counts(self, pk_attname, filtered_qs):
        # Counting across databases would need a cross-database subquery; show none.
        return {}


class FinishedFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return [("finished", "Finished (marked)"), ("waiting", "Waiting (not marked)")]

    def queryset(self, request, queryset):
        marked = _marked()
        if self.value() == "finished":
            return queryset.filter(marked)
        if self.value() == "waiting":
            return queryset.filter(~marked)
        return queryset


class StatusFilter(admin.SimpleListFilter):
    """Filter by the status column's rule (checkpoints/status.py), in the same order."""

    title = "status"
    parameter_name = "status"

    def lookups(self, request, model_admin):
        return [(kind, label) for kind, label in status.KINDS.items() if kind != "parked"]

    def queryset(self, request, queryset):
        value = self.value()
        if value is None:
            return queryset
        now = utcnow()
        # Each test starts from a small set read once (hashed): the marked threads, the
        # threads with any interrupt or error write (a partial index); only a thread in
        # such a set has its head asked. So the rule costs little per thread even where
        # it must look at every thread (recent, idle) to count them.
        marked = _marked()
        # A rule's own test looks its few ids up (_AmongIds); a negated one keeps IN, which
        # PostgreSQL hashes once, where NOT (id = ANY(...)) would walk the array per thread.
        asked, erred = _holding(status.INTERRUPT), _holding(status.ERROR)
        heads_waiting = Q(has_interrupt=True) & Q(has_resume=False)
        waiting = Q(pk__in=asked) & heads_waiting
        failed = Q(pk__in=erred) & Q(has_error=True)
        recent = Q(last_write_at__gte=now - status.RECENT)
        rules = {
            "finished": marked,
            "waiting_on_human": ~marked & Q(_AmongIds("pk", asked)) & heads_waiting,
            "failed": ~marked & ~waiting & Q(_AmongIds("pk", erred)) & Q(has_error=True),
            "recent": ~marked & ~waiting & ~failed & recent,
            "idle": ~marked & ~waiting & ~failed & ~recent,
        }
        if value not in rules:
            raise IncorrectLookupParameters(f"status {value!r} is not one of {', '.join(rules)}")
        return queryset.filter(rules[value])


def _marked() -> Q:
    """Threads with a finished mark: the one test both filters use. (Finished threads are
    few and old; ThreadChangeList orders their list so the marks are read first.)"""
    return Q(thread_id__in=FinishedMark.objects.values("thread_id"))


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


def _holding(channel: str):
    """Threads with a write on ``channel`` in their root namespace, at any checkpoint."""
    # Any namespace: a superset is fine (the head is asked next), and the partial index
    # alone answers it.
    return PendingWrite.objects.filter(channel=channel).values("thread_id")


class ChoiceListFilter(admin.SimpleListFilter):
    """A filter over a column whose values are a short known list: no SELECT DISTINCT over a
    table of a million rows on every page load."""

    known: tuple[tuple[str, str], ...] = ()

    def lookups(self, request, model_admin):
        return self.known

    def queryset(self, request, queryset):
        value = self.value()
        if value is None:
            return queryset
        return queryset.filter(**{self.parameter_name: value})


class SourceFilter(ChoiceListFilter):
    title = "source"
    parameter_name = "source"
    # What LangGraph writes (input, loop, update, fork) and our time travel (rollback,
    # bulk_update).
    known = tuple((s, s) for s in ("input", "loop", "update", "fork", "rollback", "bulk_update"))


class DurabilityFilter(ChoiceListFilter):
    title = "durability"
    parameter_name = "durability"
    # os: committed to the OS, not synced (SQLite at synchronous=NORMAL).
    known = (
        ("replicated", "replicated"),
        ("disk", "disk"),
        ("os", "os"),
        ("memory", "memory"),
    )


class ProviderNameFilter(ChoiceListFilter):
    """The provider a record names (parks, sweep runs, audit events), from the registry."""

    title = "provider"
    parameter_name = "provider"

    def lookups(self, request, model_admin):
        from checkpoints.store.registry import providers

        return [(p, p) for p in providers()]


class AuditActionFilter(ChoiceListFilter):
    title = "action"
    parameter_name = "action"
    known = tuple((a, a) for a in audit.ACTIONS)


class AuditOriginFilter(ChoiceListFilter):
    title = "origin"
    parameter_name = "origin"
    known = tuple((o, o) for o in audit.ORIGINS)
