"""A live server speaking the LangGraph threads API on each real provider, and SDK clients."""

from __future__ import annotations

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import Permission, User
from rest_framework.authtoken.models import Token

from checkpoints.models import Thread
from checkpoints.store.postgres.saver import PostgresStore  # noqa: E402
from checkpoints.store.registry import get_saver
from tests.services import need_service


class PgAliasSaver(PostgresStore):
    """The ORM saver on the test PostgreSQL alias."""

    @classmethod
    def build(cls, *, provider, conn_string=None, using=None, **options):
        return super().build(provider=provider, using="pg", **options)


GRAPH = "tests.checkpoints.langgraph_api.graphs:builder"
LG_PROVIDERS = ["sqlite", "postgres", "redis"]


def provider_settings(request, provider: str) -> dict:
    if provider == "sqlite":
        return {"PROVIDER": "sqlite", "CONN_STRING": None}
    if provider == "postgres":
        need_service(django_settings.POSTGRES_UNAVAILABLE)
        # The test database's own alias ("pg"), which the test may use; a conn string would
        # register a new alias the test isolation refuses.
        return {
            "PROVIDER": "postgres",
            "CONN_STRING": None,
            "SAVERS": {"postgres": "tests.checkpoints.langgraph_api.conftest.PgAliasSaver"},
        }
    return {"PROVIDER": "redis", "CONN_STRING": request.getfixturevalue("redis_url")}


@pytest.fixture(params=LG_PROVIDERS)
def lg(request, live_server, settings):
    """The service's /langgraph on ``provider``, with alice, bob and staff tokens."""
    settings.CHECKPOINTS = {
        **settings.CHECKPOINTS,
        **provider_settings(request, request.param),
        "GRAPHS": {"agent": GRAPH},
    }
    users = {
        "alice": User.objects.create_user("alice", password="pw"),
        "bob": User.objects.create_user("bob", password="pw"),
        "staff": User.objects.create_user("staff", password="pw", is_staff=True),
    }
    for codename in ("change_thread", "delete_thread", "add_checkpoint", "change_checkpoint"):
        users["staff"].user_permissions.add(
            Permission.objects.get(content_type__app_label="checkpoints", codename=codename)
        )
    if request.param == "postgres":
        # The Thread rows' owners live beside them in the store's database.
        for user in users.values():
            User.objects.using("pg").create(
                pk=user.pk, username=user.username, is_staff=user.is_staff
            )
    tokens = {name: Token.objects.create(user=user).key for name, user in users.items()}
    return LG(request.param, f"{live_server.url}/langgraph", tokens, users)


class LG:
    def __init__(self, provider, url, tokens, users):
        self.provider, self.url, self.tokens, self.users = provider, url, tokens, users

    def sync(self, who: str = "alice"):
        from langgraph_sdk import get_sync_client

        return get_sync_client(url=self.url, api_key=self.tokens[who])

    def aclient(self, who: str = "alice"):
        from langgraph_sdk import get_client

        return get_client(url=self.url, api_key=self.tokens[who])

    @property
    def isolates(self) -> bool:
        """Owners are recorded (ORM providers); on redis only staff see threads."""
        return self.provider != "redis"

    def owner(self) -> str:
        return "alice" if self.isolates else "staff"

    def claim(self, thread_id: str, owner: str | None = None) -> None:
        """Make ``owner`` (default: the provider's usual caller) own a thread written
        directly through the saver, where owners are recorded."""
        if self.isolates:
            saver = get_saver()
            who = self.users[owner or self.owner()]
            Thread.objects.using(saver.db_alias).filter(thread_id=thread_id).update(owner=who)

    def run_graph(self, thread_id: str, topic: str = "checkpoints", owner: str | None = None):
        """A real LangGraph run onto the service's saver, owned by ``owner``."""
        from tests.checkpoints.langgraph_api.graphs import builder

        saver = get_saver()
        graph = builder.compile(checkpointer=saver)
        config = {"configurable": {"thread_id": thread_id}}
        graph.invoke({"topic": topic}, config)
        who = self.users[owner or self.owner()]
        if self.isolates:
            Thread.objects.using(saver.db_alias).filter(thread_id=thread_id).update(owner=who)
        return graph, config
