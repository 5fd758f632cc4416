"""Pieces every page of the store's admin shares: links, the store choice, read-only pages."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.admin import helpers
from django.core.exceptions import ValidationError
from django.http import HttpResponseRedirect
from django.urls import reverse
from django.utils.html import format_html
from django.utils.translation import gettext as _

from checkpoints.admin.store_choice import (
    PROVIDER_PARAM,
    keep_store,
    store_choices,
    with_store_choice,
)

HEAD_ROWS = 10


def thread_change_url(thread_pk: int) -> str:
    return keep_store(reverse("admin:checkpoints_thread_change", args=[thread_pk]))


def checkpoint_change_url(checkpoint_pk: int) -> str:
    return keep_store(reverse("admin:checkpoints_checkpoint_change", args=[checkpoint_pk]))


def history_url(thread_pk: int) -> str:
    url = reverse("admin:checkpoints_checkpoint_changelist") + f"?thread__id__exact={thread_pk}"
    return keep_store(url, changelist=True)


class StoreChoiceMixin:
    """Every page of this admin reads the store the request names (see `ProviderFilter`)."""

    def changelist_view(self, request, extra_context=None):
        named = request.GET.get(PROVIDER_PARAM)
        choices = dict(store_choices())
        if named is not None and named not in choices:
            # Django would quietly drop the bad filter and show the default store.
            self.message_user(
                request,
                f"There is no checkpoint store {named!r} in this admin; choose one of "
                f"{', '.join(choices)}. Showing the deployment's own store instead.",
                messages.ERROR,
            )
            query = request.GET.copy()
            del query[PROVIDER_PARAM]
            return HttpResponseRedirect(f"{request.path}?{query.urlencode()}")
        return super().changelist_view(request, extra_context)

    @property
    def urls(self):
        # Wrapped here, not in get_urls, so the views subclasses add are covered too.
        changelist = f"{self.opts.app_label}_{self.opts.model_name}_changelist"
        urls = self.get_urls()
        for pattern in urls:
            if hasattr(pattern, "callback"):
                pattern.callback = with_store_choice(
                    pattern.callback, lenient=pattern.name == changelist
                )
        return urls


class ReadOnlyMixin:
    """Pages to read, not forms to edit: the store's own operations are the only writers."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        # Deleting is the sweep's job: it asks the live-thread filters first.
        return False


class RefuseBadInputMixin:
    """Input the database cannot take is refused with a message, never a 500.

    - A list action on ids that are not this model's: Django filters ``pk__in`` the posted
      ids as they come, so one that is not a number (or is past the column's range) fails
      inside the query. Refused before the action runs; nothing changes.
    - A NUL character in the list's query (a filter, the search): PostgreSQL refuses it in
      any text. The list is shown again without those parameters.

    It also writes the action checkboxes whose ids it checks: Django renders each one
    through the form template engine, a quarter of a 50-row list's server time.
    """

    def action_checkbox(self, obj):
        # Django's markup (CheckboxInput), which admin/js/actions.js reads.
        label = format_html(_("Select this object for an action - {}"), str(obj))
        return format_html(
            '<input type="checkbox" name="{}" value="{}" class="action-select" aria-label="{}">',
            helpers.ACTION_CHECKBOX_NAME,
            str(obj.pk),
            label,
        )

    def changelist_view(self, request, extra_context=None):
        bad = [k for k, v in request.GET.lists() if "\x00" in k or any("\x00" in x for x in v)]
        if bad:
            self.message_user(
                request,
                f"{', '.join(repr(k[:100]) for k in bad)} held a NUL character, which no "
                "stored text can hold; showing the list without it.",
                messages.ERROR,
            )
            query = request.GET.copy()
            for key in bad:
                del query[key]
            return HttpResponseRedirect(f"{request.path}?{query.urlencode()}")
        return super().changelist_view(request, extra_context)

    def response_action(self, request, queryset):
        pk = self.opts.pk
        for raw in request.POST.getlist(helpers.ACTION_CHECKBOX_NAME):
            try:
                pk.run_validators(pk.to_python(raw))
            except ValidationError:
                self.message_user(
                    request,
                    f"{raw[:100]!r} is not the id of a {self.opts.verbose_name}; no "
                    f"{self.opts.verbose_name_plural} were changed.",
                    messages.ERROR,
                )
                return HttpResponseRedirect(request.get_full_path())
        return super().response_action(request, queryset)
