"""Storage: SQLAlchemy tables and migrations, the stores of each aggregate (the only place with SQL)
behind the unit of work, and the executor that runs their statements."""
