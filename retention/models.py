"""Parks, holds and the sweep's history, kept in the default database for the admin."""

from __future__ import annotations

from django.db import models


class Park(models.Model):
    """A run waiting on an interrupt until its deadline; the `parks` filter spares its thread."""

    thread_id = models.TextField(db_index=True)
    deadline = models.DateTimeField(db_index=True)
    created_at = models.DateTimeField()
    owner = models.TextField(blank=True, default="")
    provider = models.CharField(max_length=16)

    class Meta:
        ordering = ["deadline"]

    def __str__(self) -> str:
        return f"{self.thread_id} until {self.deadline.isoformat()}"


class Hold(models.Model):
    """An operator keeping a thread for investigation: the sweep spares it while it lasts.

    Kept after release (``released_at``) so the admin shows who held what, and why; the
    audit trail records each hold and release too. One unreleased hold per thread and store.
    """

    thread_id = models.TextField()
    provider = models.CharField(max_length=16)
    reason = models.TextField()
    # None: until released.
    until = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()
    created_by = models.CharField(max_length=150)
    released_at = models.DateTimeField(null=True, blank=True)
    released_by = models.CharField(max_length=150, blank=True, default="")

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["provider", "thread_id"],
                condition=models.Q(released_at__isnull=True),
                name="hold_one_open_per_thread",
            )
        ]
        # The sweep and the status rule ask for a store's open holds by thread.
        indexes = [
            models.Index(
                fields=["provider", "thread_id", "until"],
                condition=models.Q(released_at__isnull=True),
                name="hold_open_thread",
            )
        ]

    def __str__(self) -> str:
        return f"{self.thread_id} held by {self.created_by}"


class SweepRun(models.Model):
    """One sweep that was not a dry run: what it deleted, spared, skipped or failed on."""

    # What a finished run reports, in the order the admin and the API show it.
    RESULT_FIELDS = (
        "status",
        "started_at",
        "finished_at",
        "provider",
        "dry_run",
        "waiting_minutes",
        "finished_minutes",
        "swept_count",
        "finished_swept",
        "waiting_swept",
        "written_during",
        "skipped",
        "bytes_freed",
        "error",
        "triggered_by",
    )

    RUNNING = "running"
    OK = "ok"
    FAILED = "failed"
    INTERRUPTED = "interrupted"
    # A fanned-out sweep that found the store's lease held: it deleted nothing.
    REFUSED = "refused"
    STATUSES = [
        (RUNNING, RUNNING),
        (OK, OK),
        (FAILED, FAILED),
        (INTERRUPTED, INTERRUPTED),
        (REFUSED, REFUSED),
    ]

    status = models.CharField(max_length=12, choices=STATUSES, default=OK, db_index=True)
    started_at = models.DateTimeField(db_index=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    provider = models.CharField(max_length=16)
    dry_run = models.BooleanField(default=False)
    waiting_minutes = models.PositiveIntegerField()
    finished_minutes = models.PositiveIntegerField()
    swept_count = models.PositiveIntegerField(default=0)
    finished_swept = models.PositiveIntegerField(default=0)
    waiting_swept = models.PositiveIntegerField(default=0)
    # Threads past a horizon it kept because they were written after it judged them.
    written_during = models.PositiveIntegerField(default=0)
    skipped = models.TextField(null=True, blank=True)
    # Bytes the store gave back to the file system after the deletes (SQLite's
    # incremental_vacuum); null where the store does not measure it.
    bytes_freed = models.BigIntegerField(null=True, blank=True)
    error = models.TextField(blank=True, default="")
    triggered_by = models.CharField(max_length=150, blank=True, default="")
    # A fanned-out run: the token its lease is held under, and how many batches it queued.
    lease_token = models.CharField(max_length=200, blank=True, default="")
    batches_total = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-started_at"]
        permissions = [("run_sweep", "Can run the checkpoint sweep")]

    def __str__(self) -> str:
        return f"sweep {self.started_at.isoformat()} ({self.provider})"


class SweepBatch(models.Model):
    """One batch of a fanned-out sweep run: its attempts, where it ran, what it did."""

    QUEUED = "queued"
    RUNNING = "running"
    RETRYING = "retrying"
    OK = "ok"
    FAILED = "failed"
    STATUSES = [(s, s) for s in (QUEUED, RUNNING, RETRYING, OK, FAILED)]
    DONE = (OK, FAILED)

    run = models.ForeignKey(SweepRun, on_delete=models.CASCADE, related_name="batches")
    index = models.PositiveIntegerField()
    thread_count = models.PositiveIntegerField()
    status = models.CharField(max_length=12, choices=STATUSES, default=QUEUED)
    attempts = models.PositiveIntegerField(default=0)
    # Deleted threads add up over attempts (a failed attempt may have deleted some); the
    # spared ones are those of the last attempt, which asked the filters again.
    deleted = models.PositiveIntegerField(default=0)
    finished_swept = models.PositiveIntegerField(default=0)
    waiting_swept = models.PositiveIntegerField(default=0)
    spared = models.PositiveIntegerField(default=0)
    worker = models.CharField(max_length=200, blank=True, default="")
    error = models.TextField(blank=True, default="")
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["run", "index"]
        verbose_name_plural = "sweep batches"
        constraints = [
            models.UniqueConstraint(fields=["run", "index"], name="sweep_batch_run_index")
        ]

    def __str__(self) -> str:
        return f"batch {self.index} of sweep run {self.run_id} ({self.status})"


class SparedThread(models.Model):
    """A thread past a horizon that a live-thread filter claimed during one sweep."""

    HORIZONS = [("finished", "finished"), ("waiting", "waiting")]

    sweep_run = models.ForeignKey(SweepRun, on_delete=models.CASCADE, related_name="spared")
    # The batch of a fanned-out run that spared it (its retry replaces its rows).
    batch = models.ForeignKey(
        SweepBatch, null=True, blank=True, on_delete=models.CASCADE, related_name="spared_threads"
    )
    thread_id = models.TextField()
    horizon = models.CharField(max_length=16, choices=HORIZONS)
    owner = models.CharField(max_length=150)
    # Why, in words: the interrupt's question and how long it waited, who holds it and why.
    reason = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.thread_id} ({self.horizon}, {self.owner})"


class DeletedThread(models.Model):
    """A thread one sweep deleted: its run's record of which ids went, one row each."""

    HORIZONS = SparedThread.HORIZONS

    # Led by the run, the (run, id) index below serves its lookups too.
    sweep_run = models.ForeignKey(
        SweepRun, on_delete=models.CASCADE, related_name="deleted", db_index=False
    )
    # The batch of a fanned-out run whose attempt deleted it.
    batch = models.ForeignKey(
        SweepBatch, null=True, blank=True, on_delete=models.CASCADE, related_name="deleted_threads"
    )
    thread_id = models.TextField()
    horizon = models.CharField(max_length=16, choices=HORIZONS)

    class Meta:
        ordering = ["id"]
        # A run's ids are read a page at a time in deletion order (keyset on id).
        indexes = [models.Index(fields=["sweep_run", "id"], name="deleted_run_id")]

    def __str__(self) -> str:
        return f"{self.thread_id} ({self.horizon}) deleted by sweep run {self.sweep_run_id}"
