"""The unit of work: one database transaction (see Database.transaction) and the stores of each
aggregate on it. Every statement of the service runs through one of these stores."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypeAlias

from sqlalchemy import Connection, func, select

from slowave.storage import tables as t
from slowave.storage.consolidation import ConsolidationStore
from slowave.storage.cue_evidence import CueEvidenceStore
from slowave.storage.erasure import ErasureStore
from slowave.storage.events import EventStore
from slowave.storage.executor import Executor
from slowave.storage.full_text import FullTextIndex
from slowave.storage.gaps import GapStore
from slowave.storage.ledger import LedgerStore
from slowave.storage.memories import MemoryStore
from slowave.storage.memory_search import MemorySearch
from slowave.storage.procedures import ProcedureStore
from slowave.storage.retrievals import RetrievalStore
from slowave.storage.sessions import SessionStore
from slowave.storage.tenancy import TenancyStore
from slowave.storage.vectors import VectorStore

Row: TypeAlias = Any
"""A stored row as the stores return it: a tuple whose fields are also attributes named for the
columns (a named tuple from the driver path, storage.executor; SQLAlchemy's Row where a statement
falls back to SQLAlchemy's execution)."""

_COUNTS = {name: select(func.count()).select_from(table) for name, table in t.metadata.tables.items()}


class UnitOfWork:
    def __init__(self, connection: Connection, read_only: bool = False) -> None:
        ex = self._ex = Executor(connection, read_only)
        self.sessions = SessionStore(ex)
        self.memories = MemoryStore(ex)
        self.search = MemorySearch(ex)
        self.occasions = self.memories.occasions
        self.vectors = VectorStore(ex)
        self.events = EventStore(ex)
        self.retrievals = RetrievalStore(ex)
        self.ledger = LedgerStore(ex)
        self.cues = CueEvidenceStore(ex)
        self.procedures = ProcedureStore(ex)
        self.gaps = GapStore(ex)
        self.consolidation = ConsolidationStore(ex)
        self.tenancy = TenancyStore(ex)
        self.erasure = ErasureStore(ex)
        self.full_text = FullTextIndex(ex)

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        """The block's writes are undone alone if it raises (the error goes on to the caller)."""
        with self._ex.savepoint():
            yield

    def table_counts(self) -> dict[str, int]:
        """Rows per table (observation: admin, tests)."""
        return {name: self._ex.scalar(stmt) for name, stmt in _COUNTS.items()}
