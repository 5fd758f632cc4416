"""PostgreSQL: its saver, statements, libpq path, pool, space and new-store schema steps."""
