"""Storage: SQLAlchemy tables, the repository (the only place with SQL), transactions, migrations."""
