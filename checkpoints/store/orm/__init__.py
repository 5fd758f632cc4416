"""The ORM saver: checkpoints in Django's database (PostgreSQL or SQLite)."""
