"""Re-exports of the ORM saver under its old path (`checkpoints.store.orm`)."""

from checkpoints.dburl import alias_for_conn_string
from checkpoints.store.orm.ledger import forget_format_checks
from checkpoints.store.orm.saver import OrmSaver

__all__ = ["OrmSaver", "alias_for_conn_string", "forget_format_checks"]
