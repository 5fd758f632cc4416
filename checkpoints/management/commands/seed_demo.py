"""Write demo threads with a real LangGraph graph and make an admin login."""

import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from checkpoints.demo import build_demo_graph
from checkpoints.store.registry import get_saver


class Command(BaseCommand):
    help = (
        "Create the 'admin' superuser (a new one gets a random password, printed) and a few "
        "demo threads. An existing admin keeps its password unless --password is given."
    )

    def add_arguments(self, parser):
        parser.add_argument("--password", help="set the admin's password to this")

    def handle(self, *args, password=None, **options):
        User = get_user_model()
        admin, created = User.objects.get_or_create(
            username="admin", defaults={"is_staff": True, "is_superuser": True}
        )
        admin.is_staff = admin.is_superuser = True
        if created and not password:
            password = secrets.token_urlsafe(9)
        if password:
            admin.set_password(password)
        admin.save()

        saver = get_saver()
        graph = build_demo_graph(saver)
        topics = ["retention", "time travel", "needs approval: sweep notice"]
        for index, topic in enumerate(topics, start=1):
            config = {"configurable": {"thread_id": f"demo-{index}", "user_id": admin.pk}}
            if saver.get_tuple(config) is None:
                graph.invoke({"topic": topic, "messages": [f"user: tell me about {topic}"]}, config)
                if not topic.startswith("needs approval"):
                    graph.invoke({"messages": ["user: and once more"]}, config)
        self.stdout.write(
            self.style.SUCCESS(f"Demo threads written to the {saver.provider} store.")
        )
        # A second demo run must not lock out the first login: the password is kept.
        shown = password or "unchanged (seed_demo --password NEW sets another)"
        self.stdout.write(f"login: admin  password: {shown}")
