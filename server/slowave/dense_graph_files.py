"""Saved dense graphs: a scope's HNSW graph kept on disk, so a restarted process loads it in a
fraction of a second instead of building it again (≈ 40 s at 100k vectors on this 2-core machine,
in every server process, while searches scan the rows it lacks exactly).

A file is a cache, never a source of truth. It holds one header line (JSON) and the graph as
usearch saved it; the header names the encoder, the graph's parameters, how many of the scope's
rows it covers, how many nodes it has (identical vectors share one: dense_index) and a digest of
those rows' numbers and float32 vectors. A graph is loaded only
when the scope's first rows, as just read from the database, have exactly that digest; any other
file (another encoder, rows erased or restored from a backup, a torn write) is deleted and the
graph built anew. A file is written whole and renamed into place.

The graphs hold quantised vectors of memories, which are derived from their content, so erasure
deletes the files of what it erases (`erase`); a process that still holds erased rows in memory
does not write them back: it saves only when the database holds as many of the scope's vectors,
up to its last row, as it has.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from slowave.config import Settings
    from slowave.storage.database import Database

log = logging.getLogger(__name__)

FORMAT = 2  # 2: one node per distinct vector, counted in the header ("nodes")
SUFFIX = ".graph"

CountVectors = Callable[[str, str, str, int], int]
"""(tenant, scope, encoder id, up to number) -> the scope's vectors in the database up to that number."""


def _hex(text: str, chars: int) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:chars]


def digest(numbers: Any, matrix: Any, rows: int) -> str:
    """What a saved graph is valid for: the numbers and float32 vectors of the scope's first `rows`."""
    h = hashlib.blake2b(digest_size=32)
    h.update(numbers[:rows].tobytes())
    h.update(matrix[:rows].tobytes())
    return h.hexdigest()


class GraphFiles:
    """The directory of saved graphs: one sub-directory per tenant, one file per scope and encoder
    (names are hashes: no tenant or scope text on disk)."""

    def __init__(self, directory: Path, count_vectors: CountVectors | None = None) -> None:
        self.directory = Path(directory)
        self.count_vectors = count_vectors

    def path(self, tenant: str, scope: str, encoder_id: str) -> Path:
        return self.directory / _hex(tenant, 32) / f"{_hex(scope, 32)}-{_hex(encoder_id, 12)}{SUFFIX}"

    def save(
        self, tenant: str, scope: str, encoder_id: str, graph: Any, params: dict, numbers: Any, matrix: Any, rows: int
    ) -> bool:
        """Writes the graph over the scope's first `rows` rows; False when the database no longer
        holds those rows (an erasure since they were read) or the file could not be written."""
        last = int(numbers[rows - 1])
        if self.count_vectors is not None and self.count_vectors(tenant, scope, encoder_id, last) != rows:
            log.info("dense graph not saved: the scope's vectors changed since they were read")
            return False
        header = {
            "format": FORMAT,
            "encoder": encoder_id,
            "rows": rows,
            "nodes": len(graph),
            "last_number": last,
            "digest": digest(numbers, matrix, rows),
            **params,
        }
        target = self.path(tenant, scope, encoder_id)
        temporary = target.with_name(f"{target.name}.{os.getpid()}.tmp")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(temporary, "wb") as out:
                out.write(json.dumps(header, sort_keys=True).encode("utf-8") + b"\n")
                out.write(graph.save())
            os.replace(temporary, target)
        except OSError as exc:
            log.warning("dense graph not saved to %s: %s", target, exc)
            temporary.unlink(missing_ok=True)
            return False
        self._drop_other_encoders(target)
        return True

    @staticmethod
    def _drop_other_encoders(target: Path) -> None:
        """The scope's graphs of other encoders: after a model change nothing loads them again (a
        process still running the old model read its graph when it started), and each is as large
        as this one."""
        scope_part = target.name.rsplit("-", 1)[0]
        for other in target.parent.glob(f"{scope_part}-*{SUFFIX}"):
            if other != target:
                other.unlink(missing_ok=True)

    def rows_saved(self, tenant: str, scope: str, encoder_id: str) -> int:
        """How many rows the saved graph of a scope covers, by its header alone (0: none saved).
        Cheap enough to ask once a second: one small read."""
        try:
            with self.path(tenant, scope, encoder_id).open("rb") as f:
                header = json.loads(f.readline())
        except (OSError, ValueError):
            return 0
        if not isinstance(header, dict) or header.get("format") != FORMAT or header.get("encoder") != encoder_id:
            return 0
        rows = header.get("rows")
        return rows if isinstance(rows, int) and rows > 0 else 0

    def load(
        self,
        tenant: str,
        scope: str,
        encoder_id: str,
        params: dict,
        numbers: Any,
        matrix: Any,
        size: int,
        new_graph: Callable[[], Any],
        delete_invalid: bool = True,
    ) -> tuple[Any, int] | None:
        """The saved graph and the rows it covers, when it is valid for the scope's rows [0, size);
        an invalid file is deleted, unless `delete_invalid` is False (a process taking the graphs
        another one saves: a file covering more rows than it has read yet is newer, not wrong)."""
        target = self.path(tenant, scope, encoder_id)
        try:
            data = target.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("dense graph %s unreadable: %s", target, exc)
            return None
        end = data.find(b"\n")
        try:
            header = json.loads(data[:end]) if end > 0 else {}
        except ValueError:
            header = {}
        rows = header.get("rows")
        valid = (
            header.get("format") == FORMAT
            and header.get("encoder") == encoder_id
            and all(header.get(k) == v for k, v in params.items())
            and isinstance(rows, int)
            and 0 < rows <= size
            and header.get("digest") == digest(numbers, matrix, rows)
        )
        graph = None
        if valid:
            graph = new_graph()
            try:
                graph.load(memoryview(data)[end + 1 :])
            except Exception as exc:  # a truncated or corrupt graph: build anew
                log.warning("dense graph %s not loadable: %s", target, exc)
                graph = None
        if graph is None or len(graph) != header.get("nodes"):
            if delete_invalid:
                log.info("dense graph %s does not match the scope's rows: deleted, building anew", target.name)
                target.unlink(missing_ok=True)
            return None
        return graph, rows

    def erase(self, tenant: str, scope: str | None = None) -> int:
        """Deletes the saved graphs of a scope (every encoder's), or of every scope of the tenant."""
        folder = self.directory / _hex(tenant, 32)
        pattern = f"{_hex(scope, 32)}-*" if scope is not None else "*"
        removed = 0
        for path in folder.glob(pattern):
            path.unlink(missing_ok=True)
            removed += 1
        return removed


def for_store(settings: Settings, db: Database) -> GraphFiles | None:
    """The saved graphs of a store, as `settings.graph_dir` places them (None: not saved)."""
    directory = settings.graph_directory(db.sqlite_path)
    if directory is None:
        return None

    def count_vectors(tenant: str, scope: str, encoder_id: str, upto: int) -> int:
        with db.transaction(read_only=True) as uow:
            return uow.vectors.count_upto(tenant, scope, encoder_id, upto)

    return GraphFiles(directory, count_vectors)
