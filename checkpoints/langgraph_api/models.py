"""The one thing the Platform keeps per thread that checkpoints do not: thread metadata."""

from django.db import models


class ThreadMetadata(models.Model):
    """A thread's Platform metadata, keyed by provider so every store has one."""

    provider = models.CharField(max_length=32)
    thread_id = models.TextField()
    metadata = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["provider", "thread_id"], name="lg_thread_meta_key")
        ]

    def __str__(self) -> str:
        return self.thread_id
