"""The list filters: which store, finished or waiting, and the status rule."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.db.models import Q

from checkpoints import audit, status
from checkpoints.admin.store_choice import PROVIDER_PARAM, store_alias, store_choices, store_saver
from checkpoints.marks import is_marked
from checkpoints.store.planning import utcnow
from checkpoints.store.registry import providers


class ProviderFilter(admin.SimpleListFilter):
    """Which ORM checkpoint store the list reads; the deployment's own when none is chosen.

    The rows of two databases cannot be listed as one, so there is no "All" choice. The
    query itself is switched by `store_choice.with_store_choice`; this filter offers the
    stores and refuses an unknown one (Django answers that with its invalid-filter page).
    """

    title = "provider"
    parameter_name = PROVIDER_PARAM

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
        marked = Q(is_marked())
        if self.value() == "finished":
            return queryset.filter(marked)
        if self.value() == "waiting":
            return queryset.filter(~marked)
        return queryset


class StatusFilter(admin.SimpleListFilter):
    """Filter by a marker the status column shows (`status.marker_condition`): each finds
    every thread it names, whatever else is true of it. "Recently written" and "Idle" are
    the rule's own kinds (`status.status_condition`) for the threads with no marker."""

    title = "status"
    parameter_name = "status"
    # The status rule's kinds that are not markers: what a thread is when nothing is marked.
    ACTIVITY = ("recent", "idle")

    def lookups(self, request, model_admin):
        return [*status.MARKERS.items(), *((k, status.KINDS[k]) for k in self.ACTIVITY)]

    def queryset(self, request, queryset):
        value = self.value()
        if value is None:
            return queryset
        known = dict(self.lookup_choices)
        if value not in known:
            raise IncorrectLookupParameters(f"status {value!r} is not one of {', '.join(known)}")
        rule = status.status_condition if value in self.ACTIVITY else status.marker_condition
        return queryset.filter(rule(value, utcnow(), saver=store_saver()))


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
        return [(p, p) for p in providers()]


class AuditActionFilter(ChoiceListFilter):
    title = "action"
    parameter_name = "action"
    known = tuple((a, a) for a in audit.ACTIONS)


class AuditOriginFilter(ChoiceListFilter):
    title = "origin"
    parameter_name = "origin"
    known = tuple((o, o) for o in audit.ORIGINS)
