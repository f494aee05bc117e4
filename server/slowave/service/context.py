"""What every use case needs: the database, the clock, the settings."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from slowave.clock import Clock, SystemClock
from slowave.config import Settings
from slowave.storage.database import Database

if TYPE_CHECKING:
    from slowave.embedding import SemanticChannel


@dataclass
class ServiceContext:
    db: Database
    settings: Settings = field(default_factory=Settings)
    clock: Clock = field(default_factory=SystemClock)
    semantic: SemanticChannel | None = None
    """The optional embedding channel; None means lexical-only retrieval."""
