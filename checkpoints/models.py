"""Tables of the ORM checkpoint store."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from checkpoints.channels import ERROR, INTERRUPT, RESUME


class Thread(models.Model):
    """One LangGraph thread: its owner, last write and declared retention."""

    thread_id = models.TextField(unique=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="checkpoint_threads",
        # Led by owner, the (owner, last write, id) index below serves its lookups too.
        db_index=False,
    )
    created_at = models.DateTimeField()
    # Indexed with id (Meta.indexes): the lists order by both, the sweep scans it.
    last_write_at = models.DateTimeField()
    # Bumped by rollback; API callers send it back in If-Match.
    version = models.PositiveIntegerField(default=1)
    waiting_minutes = models.PositiveIntegerField(null=True, blank=True)
    finished_minutes = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["-last_write_at"]
        # The store service's token kinds (`checkpoints.store_service.access`).
        permissions = [
            ("store_worker_write", "Can read and write any thread through /store/v1/"),
            ("store_name_owner", "Can name a thread's owner in configurable.user_id"),
        ]
        # Lists order by last write, ties broken by id: one index serves both, so a deep
        # page is an index walk, never a sort of every thread.
        # Ordered by owner, the ties follow the same direction (ThreadChangeList), so one
        # index walks the list by owner either way, and a user's own threads newest first.
        indexes = [
            models.Index(fields=["last_write_at", "id"], name="thread_last_write_id"),
            models.Index(fields=["owner", "last_write_at", "id"], name="thread_owner_write_id"),
            # The few threads that declare their own waiting horizon: the status rule and
            # the sweep read their distinct horizons (a scan of every thread without it,
            # 20 ms of each status filter at 100,000 threads), then one range per horizon.
            models.Index(
                fields=["waiting_minutes", "last_write_at"],
                name="thread_declared_waiting",
                condition=models.Q(waiting_minutes__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return self.thread_id


class Checkpoint(models.Model):
    """One checkpoint; its channel values live in ChannelBlob rows."""

    # The composite unique key below starts with thread, so no index of its own.
    thread = models.ForeignKey(
        Thread, on_delete=models.CASCADE, related_name="checkpoints", db_index=False
    )
    checkpoint_ns = models.TextField(default="", blank=True)
    checkpoint_id = models.TextField()
    parent_checkpoint_id = models.TextField(null=True, blank=True)
    type = models.TextField()
    # The checkpoint without its channel values and versions (msgpack).
    checkpoint = models.BinaryField()
    # Channel -> version: a column of its own so one SQL statement can join the blobs.
    channel_versions = models.JSONField(default=dict)
    metadata = models.JSONField(default=dict)
    source = models.CharField(max_length=64, blank=True, default="")
    step = models.IntegerField(null=True)
    run_id = models.TextField(null=True, blank=True)
    durability = models.CharField(max_length=16)
    created_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["thread", "checkpoint_ns", "checkpoint_id"], name="checkpoint_key"
            )
        ]
        # PostgreSQL also gets a GIN index on metadata (migration 0002), so list(filter=...)
        # is answered by `metadata @> %s` without scanning the table.
        indexes = [
            models.Index(fields=["thread", "source", "step"], name="checkpoint_source_step"),
            models.Index(fields=["run_id"], name="checkpoint_run"),
            # The admin's store-wide checkpoint list is newest first by id.
            models.Index(fields=["checkpoint_id"], name="checkpoint_id_order"),
            # One thread's history across its namespaces, newest first, keyset-paged: without
            # it the planner walks the store-wide index above and filters out other threads.
            models.Index(fields=["thread", "checkpoint_id"], name="checkpoint_thread_order"),
        ]

    def __str__(self) -> str:
        return self.checkpoint_id


class ChannelBlob(models.Model):
    """One channel's value at one version; an unchanged channel is never written twice."""

    # The composite unique key below starts with thread, so no index of its own.
    thread = models.ForeignKey(
        Thread, on_delete=models.CASCADE, related_name="blobs", db_index=False
    )
    checkpoint_ns = models.TextField(default="", blank=True)
    channel = models.TextField()
    version = models.TextField()
    type = models.TextField()
    blob = models.BinaryField(null=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["thread", "checkpoint_ns", "channel", "version"], name="blob_key"
            )
        ]


class PendingWrite(models.Model):
    """A task's write recorded against a checkpoint, not yet applied."""

    # The composite unique key below starts with thread, so no index of its own.
    thread = models.ForeignKey(
        Thread, on_delete=models.CASCADE, related_name="writes", db_index=False
    )
    checkpoint_ns = models.TextField(default="", blank=True)
    checkpoint_id = models.TextField()
    task_id = models.TextField()
    task_path = models.TextField(default="", blank=True)
    idx = models.IntegerField()
    channel = models.TextField()
    type = models.TextField()
    blob = models.BinaryField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["thread", "checkpoint_ns", "checkpoint_id", "task_id", "idx"],
                name="write_key",
            )
        ]
        # The few threads holding an interrupt, a resume or an error: the admin's status
        # filter starts from them instead of asking every thread's head.
        indexes = [
            models.Index(
                fields=["channel", "thread"],
                name="write_status_channel",
                condition=models.Q(channel__in=[INTERRUPT, RESUME, ERROR]),
            )
        ]


class FinishedMark(models.Model):
    """A thread its owner marked finished; it is due for the sweep at due_at."""

    thread_id = models.TextField(unique=True)
    marked_at = models.DateTimeField()
    due_at = models.DateTimeField(db_index=True)
    owner = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["due_at"]

    def __str__(self) -> str:
        return self.thread_id


class StoreFormat(models.Model):
    """The format generation this store's checkpoints are written in."""

    generation = models.PositiveIntegerField()
    recorded_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"generation {self.generation}"


class AuditEvent(models.Model):
    """Who changed a thread or ran the sweep, when, how and from where."""

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    action = models.CharField(max_length=32, db_index=True)
    origin = models.CharField(max_length=16, help_text="admin, api, command, task or python")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    actor = models.CharField(max_length=150, blank=True, help_text="The user's name at the time.")
    remote_addr = models.GenericIPAddressField(null=True, blank=True)
    provider = models.CharField(max_length=16, blank=True)
    thread_id = models.TextField(blank=True, db_index=True)
    detail = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self) -> str:
        who = self.actor or self.origin
        return f"{self.action} {self.thread_id or ''} by {who} at {self.at:%Y-%m-%d %H:%M:%S}"


class StoreLease(models.Model):
    """A store-wide lock held as a row: who holds it and until when.

    Unlike a session's advisory lock it survives a transaction pooler handing the
    connection to someone else, and a crashed holder's lease simply runs out.
    """

    name = models.CharField(max_length=100, unique=True)
    owner = models.CharField(max_length=200)
    acquired_at = models.DateTimeField()
    expires_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.name} held by {self.owner} until {self.expires_at.isoformat()}"
