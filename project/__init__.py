"""The Checkpoint Store project; loading it loads the Celery app so tasks bind to it."""

from project.celery import app as celery_app

__all__ = ("celery_app",)
