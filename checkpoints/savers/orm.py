"""Re-exports of the ORM saver under its old path (`checkpoints.store.orm`)."""

from checkpoints.store.orm.saver import OrmSaver, alias_for_conn_string, forget_format_checks

__all__ = ["OrmSaver", "alias_for_conn_string", "forget_format_checks"]
