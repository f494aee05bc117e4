"""What every use case needs: the database, the clock, the settings."""
from __future__ import annotations

from dataclasses import dataclass, field

from slowave.clock import Clock, SystemClock
from slowave.config import Settings
from slowave.storage.database import Database


@dataclass
class ServiceContext:
    db: Database
    settings: Settings = field(default_factory=Settings)
    clock: Clock = field(default_factory=SystemClock)
