"""Every statement the stores run compiles for both backends (PostgreSQL ones are otherwise only
compiled by the PostgreSQL suite, on first use)."""

from __future__ import annotations

import importlib
import pkgutil

import pytest
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.sql import Executable
from sqlalchemy.sql.dml import UpdateBase

import slowave.storage
from slowave.storage.executor import PerDialect

_MODULES = [
    importlib.import_module(f"slowave.storage.{m.name}")
    for m in pkgutil.iter_modules(slowave.storage.__path__)
    if m.name not in ("migrations",)
]
_STATEMENTS = [
    (f"{module.__name__}.{name}", value)
    for module in _MODULES
    for name, value in vars(module).items()
    if isinstance(value, Executable | PerDialect)
]


@pytest.mark.parametrize("dialect", [sqlite.dialect(paramstyle="named"), postgresql.dialect()], ids=lambda d: d.name)
@pytest.mark.parametrize("name, stmt", _STATEMENTS, ids=[n for n, _ in _STATEMENTS])
def test_statement_compiles(name: str, stmt, dialect) -> None:
    if isinstance(stmt, PerDialect):
        stmt = stmt.get(dialect.name)
        if stmt is None:
            return
    compiled = stmt.compile(dialect=dialect)
    if dialect.name == "sqlite":  # the executor's plans bind each list as one parameter
        assert "POSTCOMPILE" not in compiled.string
    if isinstance(stmt, UpdateBase):  # as executed: the parameters' names are given as column keys
        stmt.compile(dialect=dialect, column_keys=list(compiled.params))
