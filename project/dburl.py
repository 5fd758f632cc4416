"""The service's settings read database URLs with the app's own parser (``checkpoints.dburl``)."""

from checkpoints.dburl import SCHEMES, parse_database_url

__all__ = ["SCHEMES", "parse_database_url"]
