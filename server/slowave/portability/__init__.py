"""Moving and keeping a store's data: export and import (a versioned JSON Lines stream), copying a
whole store to another database (SQLite to PostgreSQL) with verification, online SQLite backups."""
