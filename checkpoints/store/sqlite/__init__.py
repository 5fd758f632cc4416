"""SQLite: its saver, statements, connections (tuning, durability, lending) and space."""
