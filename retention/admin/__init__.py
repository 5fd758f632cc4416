"""Retention in the admin: marks, parks, holds, the sweep page and its history.

The thread admin of `checkpoints.admin` is extended through its hook (``threads``), so the
dependency keeps pointing from retention to checkpoints. Importing this package registers
every admin (Django's autodiscover imports it).
"""

from retention.admin import records, sweeps, threads

__all__ = ["records", "sweeps", "threads"]
