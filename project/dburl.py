"""The service reads DATABASE_URL with the app's parser: it moved to checkpoints.dburl."""

from checkpoints.dburl import parse_database_url

__all__ = ["parse_database_url"]
