"""Dense candidates: each scope's memory vectors cached per replica, and the nearest to a cue.

Vectors never change once stored, so a scope's cache is validated before every use by the newest
vector number in the request's transaction, and only newer rows are read. Below ANN_MIN_ROWS
vectors a search scans them all exactly. From there on a search asks an HNSW graph (usearch, int8)
for the rows it holds, scans exactly the rows stored since, and scans exactly the scope's *loose*
rows too: the LOOSE_SHARE of its vectors that fit the scope worst (lowest cosine to the nearest of
the scope's k-means centres, one per 1,000 vectors). A graph over a scope of many alike claims links an
unlike one into the bulk weakly or not at all, so no search reaches it, though it is the memory a
paraphrase sharing no word with the cue most likely means: measured at 100k claims (templated ones,
and random sentences), the graph missed every planted unusual claim that was the cue's exact
nearest, and every one of them was loose (bench/results/history.md, 2026-12-04).

The graph, the centres and the loose rows are built in the background, never on the request path,
and extended with newer rows a few at a time; when more than twice LOOSE_SHARE of the rows are
loose (the scope has taken in claims of a new kind), the centres are measured again. Every cosine
returned is exact (float32). Where graphs are saved (dense_graph_files), one process of a server
extends and saves them; its other processes take the saved graphs (`VectorIndex.follower`) and
scan the rows stored since exactly, rather than each adding every new row to a graph of its own.

Identical vectors share one node of the graph: the first row with a vector is its node, the later
ones its *twins*, returned with it. Claims that differ only in their numbers have one vector (the
encoder leaves number tokens out), and a graph holding many identical vectors is hard to search:
on bench/perf.py's 100k store, 4,250 distinct vectors among 100,000 rows, a memory at the cue's
best cosine was among the 16 candidates for 0.893 of 600 task cues with every row a node, and for
all of them with twins (bench/results/history.md, 2026-12-06).
"""

from __future__ import annotations

import bisect
import hashlib
import logging
import math
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from slowave.dense_graph_files import GraphFiles
from slowave.storage.unit_of_work import UnitOfWork

log = logging.getLogger(__name__)

ANN_MIN_ROWS = 20_000
"""Below this many vectors a scope is scanned exactly (≈ 1 ms); from it on, an HNSW graph serves."""
ANN_CONNECTIVITY = 32
"""Links per vector. On bench/perf.py's 100k store with the 5 % loose scan (bench/dense.py, 600 task
cues) 32 links found each cue's exact nearest for 0.935 of them, 0.992 where it has a cosine ≥ 0.7,
against 0.892 and 0.946 with 16, at the same search time (numbers still in the vectors, before twins;
with both, 1.000 either way); on random sentences recall@16 0.745 →
0.815 at +0.1–0.6 ms per search (noisy). At 100k on that store the graph takes 85 MB against 51 in
memory, 40 against 28 MB on disk, and 8.3 against 7.1 s to build (history, 2026-12-05)."""
ANN_EXPANSION_ADD = 128
ANN_EXPANSION_SEARCH = 256
SAVE_GROWTH = 1.1
"""A saved graph is saved again once the scope's graph holds this many times its rows."""
ANN_CATCH_UP_ROWS = 16
"""Rows added to a published graph per hold of the scope's lock (≈ 5 ms: searches wait at most that)."""
FOLLOWER_CHECK_SECONDS = 1.0
"""How often a following process (`VectorIndex.follower`) looks for a newer saved graph of a scope."""
FOLLOWER_TAIL_SHARE = 0.25
"""A following process adds rows to its graph itself once the rows its graph lacks pass this share
of those it holds (no newer saved graph came: the process that saves them serves no search of the
scope). Until then searches scan them exactly, as they scan any row a graph lacks."""
LOOSE_SHARE = 0.05
"""The share of a scope's vectors, those that fit it worst, that every search scans exactly.

A graph misses more than lone unlike claims. On bench/perf.py's 100k store (98k templated claims
and the retrieval corpus's 1.6k), a 16-link graph plus a 1 % loose scan returned the exact nearest
of 600 task cues for 0.718 of them, and for 0.800 of those whose nearest has a cosine of 0.7 or
more; half of the nearest it missed fit the scope's centres among its worst 2.4 %. Scanning the
worst 5 % (a kind of claim up to a twentieth of the scope) found 0.892 and 0.946 with 16 links, and
0.935 and 0.992 with 32 (0.840 and 0.962 at 1 %), at 0.42 ms per search against 0.28
(`python bench/dense.py`, its last table; bench/results/history.md, 2026-12-05)."""
CENTRE_ROWS = 1_000
"""Vectors per k-means centre when measuring how well each fits the scope. Coarse centres describe
the bulk and leave unlike claims far from all of them: planted claims among 20k and 100k vectors
were all loose with one centre per 1,000 vectors; with one per 200, two of five at 20k were not
(an unlike claim drew a centre of its own)."""
TRAINING_ITERATIONS = 8
TRAINING_SAMPLE = 32
"""Vectors sampled per centre to train the centres."""
_CHUNK = 4_096  # rows per matrix product with the centres (bounds its memory)


@dataclass(frozen=True)
class _Fit:
    """How well vectors fit a scope: their cosine to the nearest of the scope's centres."""

    centres: Any  # (centres, dim) float32, unit rows
    cut: float
    """Vectors fitting below this are loose."""

    def of(self, rows: Any) -> Any:
        return _nearest(rows, self.centres)[1]


def _nearest(rows: Any, centres: Any) -> tuple[Any, Any]:
    """Each row's nearest centre and its cosine to it, a chunk of rows at a time (the whole matrix
    of cosines grows with rows x centres)."""
    import numpy as np

    index = np.empty(len(rows), dtype=np.int64)
    cosine = np.empty(len(rows), dtype=np.float32)
    for start in range(0, len(rows), _CHUNK):
        scores = rows[start : start + _CHUNK] @ centres.T
        best = np.argmax(scores, axis=1)
        index[start : start + _CHUNK] = best
        cosine[start : start + _CHUNK] = scores[np.arange(len(best)), best]
    return index, cosine


def _centres(rows: Any, count: int, seed: int) -> Any:
    """Spherical k-means centres of the rows (trained on a seeded sample when there are many)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    sample = rows
    if len(rows) > count * TRAINING_SAMPLE:
        sample = rows[np.sort(rng.choice(len(rows), count * TRAINING_SAMPLE, replace=False))]
    centres = sample[rng.choice(len(sample), count, replace=False)].copy()
    for _ in range(TRAINING_ITERATIONS):
        nearest = _nearest(sample, centres)[0]
        sums = np.zeros_like(centres)
        np.add.at(sums, nearest, sample)
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        centres = np.where(norms > 0, sums / np.where(norms > 0, norms, 1), centres)  # an empty centre stays
    return np.ascontiguousarray(centres, dtype=np.float32)


def _among(ascending: Any, values: Any) -> Any:
    """Which of `values` are in the ascending array (a binary search each)."""
    import numpy as np

    if not len(ascending):
        return np.zeros(len(values), dtype=bool)
    at = np.minimum(np.searchsorted(ascending, values), len(ascending) - 1)
    return ascending[at] == values


def _fit_and_loose(rows: Any) -> tuple[_Fit, Any]:
    """The scope's fit, measured on its rows, and the positions of the LOOSE_SHARE that fit worst."""
    import numpy as np

    count = max(1, min(len(rows) // 2, math.ceil(len(rows) / CENTRE_ROWS)))
    centres = _centres(rows, count, seed=len(rows))
    fits = _nearest(rows, centres)[1]
    loose = int(len(rows) * LOOSE_SHARE)
    if not loose:
        return _Fit(centres, cut=0.0), np.empty(0, dtype=np.int64)
    cut = float(np.partition(fits, loose)[loose])
    return _Fit(centres, cut), np.flatnonzero(fits < cut)


@dataclass
class _Scope:
    """One scope's vectors: ascending numbers, their float32 rows (capacity-doubling buffers; rows
    [0, size) are never rewritten), and — from ANN_MIN_ROWS on — an HNSW graph over the first
    `ann_rows` of them (keyed by row position), the scope's fit, and its loose rows among them."""

    dim: int
    key: tuple[str, str] = ("", "")
    """(tenant, scope)."""
    latest: int = 0
    size: int = 0
    numbers: Any = None
    matrix: Any = None
    ann: Any = None
    ann_rows: int = 0
    fit: _Fit | None = None
    loose_positions: Any = None
    loose_vectors: Any = None
    building: bool = False
    saved_rows: int = 0
    """Rows of the graph last saved or loaded (dense_graph_files)."""
    looked_at: float = 0.0
    """When a following process last looked for a newer saved graph (monotonic seconds)."""
    graph_ready: threading.Event = field(default_factory=threading.Event)
    """Set once the first graph is published (built or loaded); extending it comes after."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    twins: dict[int, list[int]] = field(default_factory=dict)
    """The graph's node of a vector (its first row) -> the later rows with the same vector, ascending."""
    scan_nodes_below: int = ANN_MIN_ROWS
    """While the scope has fewer distinct vectors than this, searches scan its nodes exactly."""
    nodes: tuple[int, Any, Any] = (0, None, None)
    """(count, positions, vectors) of the nodes registered so far, published whole: their rows,
    ascending, and — while fewer than `scan_nodes_below` — a copy of their vectors, contiguous for
    one product (None from then on: the graph serves). Entries below `count` are never rewritten."""
    loose_rows: int = 0
    """How many rows fit the scope worst (`loose_positions` holds the nodes among them only)."""
    _nodes: dict[bytes, int] = field(default_factory=dict)
    """Digest of a vector -> its node, for the rows registered so far (`graph_keys`)."""
    _registered: int = 0

    def append(self, numbers: Any, rows: Any) -> None:
        import numpy as np

        need = self.size + len(numbers)
        if self.matrix is None or need > len(self.matrix):
            capacity = max(need, 2 * (len(self.matrix) if self.matrix is not None else 0), 1024)
            matrix = np.empty((capacity, self.dim), dtype=np.float32)
            nums = np.empty(capacity, dtype=np.int64)
            if self.size:
                matrix[: self.size] = self.matrix[: self.size]
                nums[: self.size] = self.numbers[: self.size]
            self.matrix, self.numbers = matrix, nums
        self.matrix[self.size : need] = rows
        self.numbers[self.size : need] = numbers
        self.size = need

    def graph_keys(self, start: int, end: int) -> Any:
        """The rows of [start, end) that are nodes of the graph: those whose vector no earlier row
        has. The others are recorded as twins of that row's node. Rows are registered in order, by
        the one thread that builds or extends the graph (a saved graph's rows too: its process kept
        the same first rows, as rows never change); rows asked for again, after a graph add that
        failed, get the same answer and are not recorded twice."""
        import numpy as np

        assert start <= self._registered, (start, self._registered)
        nodes, twins, keys, known = self._nodes, self.twins, [], self._registered
        for position in range(start, end):
            # 16 bytes of blake2b: no two different vectors of a scope share one.
            key = hashlib.blake2b(self.matrix[position].tobytes(), digest_size=16).digest()
            node = nodes.setdefault(key, position)
            if node == position:
                keys.append(position)
            elif position >= known:  # rows asked again (a graph add that failed) are twins already
                twins.setdefault(node, []).append(position)
        self._registered = max(known, end)
        fresh = [p for p in keys if p >= known]  # rows asked again are registered nodes already
        if fresh:
            self._add_nodes(np.asarray(fresh, dtype=np.int64))
        return np.asarray(keys, dtype=np.uint64)

    def _add_nodes(self, rows: Any) -> None:
        """Appends nodes (ascending, after every registered one) and publishes the new view; the
        buffers grow by doubling, and a search holding the old view reads rows that never change."""
        import numpy as np

        count, positions, vectors = self.nodes
        need = count + len(rows)
        keep_vectors = need < self.scan_nodes_below
        if positions is None or need > len(positions):
            capacity = max(need, 2 * (len(positions) if positions is not None else 0), 1024)
            grown = np.empty(capacity, dtype=np.int64)
            grown[:count] = positions[:count] if count else grown[:0]
            positions = grown
            if keep_vectors:
                grown_vectors = np.empty((capacity, self.dim), dtype=np.float32)
                grown_vectors[:count] = vectors[:count] if count else grown_vectors[:0]
                vectors = grown_vectors
        positions[count:need] = rows
        if keep_vectors:
            vectors[count:need] = self.matrix[rows]
        self.nodes = (need, positions, vectors if keep_vectors else None)

    def nodes_among(self, rows: Any) -> Any:
        """The rows (ascending, registered) that are nodes, not twins."""
        count, positions, _ = self.nodes
        return rows[_among(positions[:count], rows)] if count else rows[:0]

    def newest_rows(self, nodes: Any, scores: Any, below: int, limit: int) -> tuple[Any, Any]:
        """The `limit` rows under `below` (the rows the graph covers; later ones are scanned anyway)
        of the best of `nodes`, each with its node's score: a node's newest twins first, then the
        node itself, then the next node's — the newest of equally near rows."""
        import numpy as np

        twins = self.twins
        order = np.argsort(-scores, kind="stable")
        if not twins:
            return nodes[order[:limit]], scores[order[:limit]]
        rows: list[int] = []
        row_scores: list[float] = []
        for node, score in zip(nodes[order].tolist(), scores[order].tolist()):
            later = twins.get(node)
            if later:
                end = bisect.bisect_left(later, below)
                taken = later[max(0, end - (limit - len(rows))) : end][::-1]
                rows += taken
                row_scores += [score] * len(taken)
            if len(rows) < limit:
                rows.append(node)
                row_scores.append(score)
            if len(rows) >= limit:
                break
        return np.asarray(rows, dtype=np.int64), np.asarray(row_scores, dtype=scores.dtype)

    def measured(self, fit: _Fit, loose: Any, rows: int) -> None:
        """Publishes a fit measured over rows [0, rows) and their loose positions (under the lock)."""
        import numpy as np

        self.fit = fit
        self.loose_rows = len(loose)
        loose = self.nodes_among(loose)  # a twin fits as its node does: scanning the node finds both
        self.loose_positions, self.loose_vectors = loose, np.ascontiguousarray(self.matrix[:rows][loose])

    def loose_among(self, start: int, rows: Any) -> tuple[int, Any]:
        """How many of registered rows [start, start + len(rows)) are loose, and the nodes among
        those (read only: measured outside the lock, then `take_loose`)."""
        import numpy as np

        loose = start + np.flatnonzero(self.fit.of(rows) < self.fit.cut)
        return len(loose), self.nodes_among(loose)

    def take_loose(self, start: int, rows: Any, found: tuple[int, Any] | None = None) -> None:
        """Adds the loose ones among registered rows [start, start + len(rows)), as `loose_among`
        found them (or finds them now), under the lock."""
        import numpy as np

        count, loose = found if found is not None else self.loose_among(start, rows)
        self.loose_rows += count
        if len(loose):  # new arrays, published whole: a search may hold the old ones
            self.loose_positions = np.concatenate([self.loose_positions, loose])
            self.loose_vectors = np.concatenate([self.loose_vectors, rows[loose - start]])


def graph_parameters(dim: int) -> dict:
    """What a graph is built with; a saved graph is loaded only if it was built with the same."""
    return {
        "ndim": dim,
        "metric": "ip",
        "dtype": "i8",
        "connectivity": ANN_CONNECTIVITY,
        "expansion_add": ANN_EXPANSION_ADD,
    }


def _new_graph(dim: int) -> Any:
    from usearch.index import Index

    return Index(**graph_parameters(dim), expansion_search=ANN_EXPANSION_SEARCH)


class VectorIndex:
    """Per-replica cache of each scope's vectors, validated against the database before use."""

    def __init__(self, encoder_id: str, ann_min_rows: int = ANN_MIN_ROWS, background: bool = True) -> None:
        self.encoder_id = encoder_id
        self.ann_min_rows = ann_min_rows
        self.background = background
        self._scopes: dict[tuple[str, str], _Scope] = {}
        self._reading: dict[tuple[str, str], threading.Lock] = {}
        self._lock = threading.Lock()
        self.files: GraphFiles | None = None
        """Where graphs are saved for the next start and loaded from (None: built at every start)."""
        self.follower = False
        """With `files`: this process takes the graphs another process of the server extends and
        saves, instead of adding every new row to its own (api.app: every process but the one running
        the store's background work). Adding a row costs ≈ 0.25 ms at 100k rows, in every process
        that does it; with two processes the graphs were half of the server's CPU under a stream of
        batch Remembers (bench/results/history.md, 2026-12-06)."""

    def held(self, tenant: str, scope: str) -> int:
        """How many of the scope's vectors this process holds in memory."""
        with self._lock:
            entry = self._scopes.get((tenant, scope))
        return 0 if entry is None else entry.size

    def warm(self, uow: UnitOfWork, tenant: str, scope: str) -> int:
        """Reads the scope's vectors (and starts loading or building its graph) before a request asks
        for them; returns how many it holds (service.warm_up)."""
        entry = self._scope(uow, tenant, scope)
        return 0 if entry is None else entry.size

    def wait_for_saved_graph(self, tenant: str, scope: str, timeout: float) -> bool:
        """Waits up to `timeout` seconds for the scope's graph to load from its saved file (warm-up);
        not for a graph built from nothing, nor for the rows stored since the save to be added: both
        go on in the background while the exact scan serves what the graph lacks. True once loaded."""
        if self.files is None or not self.files.rows_saved(tenant, scope, self.encoder_id):
            return False
        with self._lock:
            entry = self._scopes.get((tenant, scope))
        return entry is not None and entry.graph_ready.wait(timeout)

    def _scope(self, uow: UnitOfWork, tenant: str, scope: str) -> _Scope | None:
        """The scope's cache, brought up to the newest vector of the request's transaction."""
        import numpy as np

        latest = uow.vectors.latest_number(tenant, scope, self.encoder_id)
        if latest == 0:
            return None
        with self._lock:
            entry = self._scopes.get((tenant, scope))
        if entry is not None and entry.latest >= latest:
            return self._caught_up(entry)
        with self._lock:
            reading = self._reading.setdefault((tenant, scope), threading.Lock())
        # One request per scope reads the rows it lacks; the others wait for it and then find the
        # cache caught up. (Each reading them all at once, sixteen requests arriving at a process
        # that had not served the scope yet read its 100k vectors sixteen times over: ≈ 1 s of
        # CPU each and 1.2 GB, measured by bench/perf.py.)
        with reading:
            with self._lock:
                entry = self._scopes.get((tenant, scope))
            if entry is not None and entry.latest >= latest:
                return self._caught_up(entry)
            rows = uow.vectors.after(tenant, scope, self.encoder_id, entry.latest if entry else 0)
            if not rows:
                return self._caught_up(entry) if entry is not None else None
            # One buffer for all the rows: an array per row and a stack of them took three times
            # as long (110k rows: 166 against 50 ms).
            matrix = np.frombuffer(b"".join([r.vector for r in rows]), dtype=np.float32).reshape(len(rows), -1)
            numbers = np.fromiter((r.number for r in rows), dtype=np.int64, count=len(rows))
            del rows
            with self._lock:
                entry = self._scopes.get((tenant, scope))
                if entry is None:
                    entry = self._scopes[(tenant, scope)] = _Scope(
                        matrix.shape[1], (tenant, scope), scan_nodes_below=self.ann_min_rows
                    )
            with entry.lock:
                fresh = numbers > entry.latest
                if fresh.any():
                    entry.append(numbers[fresh], matrix[fresh])
                    entry.latest = int(numbers[fresh][-1])
        return self._caught_up(entry)

    def _caught_up(self, entry: _Scope) -> _Scope:
        """Starts building or extending the scope's graph when it lacks rows (and is due)."""
        with entry.lock:
            work = entry.size >= self.ann_min_rows and entry.ann_rows < entry.size and not entry.building
            if work and self._following(entry) and not self._tail_too_long(entry):
                work = self._look_again(entry)  # only to look for a newer saved graph
            if work:
                entry.building = True
        if work and self.background:  # until then the exact scan serves the rows the graph lacks
            threading.Thread(target=self._catch_up, args=(entry,), name="slowave-ann-build", daemon=True).start()
        elif work:
            self._catch_up(entry)
        return entry

    def _catch_up(self, entry: _Scope) -> None:
        """Builds the scope's graph, fit and loose rows from a snapshot of its rows and publishes
        them, then adds the rows appended since, a few at a time."""
        try:
            if entry.ann is None:
                with entry.lock:
                    # Rows [0, n) of these buffers never change.
                    n, matrix, numbers = entry.size, entry.matrix, entry.numbers
                started = time.monotonic()
                loaded = self._load(entry, numbers, matrix, n)
                if loaded is not None:
                    graph, n = loaded
                    entry.saved_rows = n
                    entry.graph_keys(0, n)
                else:
                    graph = _new_graph(entry.dim)
                    keys = entry.graph_keys(0, n)
                    graph.add(keys, matrix[keys], threads=1)
                log.info(
                    "dense index: graph of %d vectors %s in %.2f s",
                    n,
                    "loaded" if loaded is not None else "built",
                    time.monotonic() - started,
                )
                fit, loose = _fit_and_loose(matrix[:n])
                with entry.lock:
                    entry.ann, entry.ann_rows = graph, n
                    entry.graph_ready.set()
                    entry.measured(fit, loose, n)
            if self._following(entry):
                self._take_saved(entry)
                with entry.lock:
                    if not self._tail_too_long(entry):
                        return  # the exact scan serves the rows the graph lacks meanwhile
            while True:
                with entry.lock:
                    look = self._following(entry) and self._look_again(entry)
                if look and self._take_saved(entry):
                    # Fallen back to adding rows itself (no newer graph had come): a graph saved
                    # meanwhile spares it the rest, as it would at the start of a round.
                    with entry.lock:
                        if not self._tail_too_long(entry):
                            return
                save = None
                with entry.lock:
                    start, end = entry.ann_rows, min(entry.size, entry.ann_rows + ANN_CATCH_UP_ROWS)
                    if self._save_due(entry):
                        # Saved while this thread still holds `building`: nothing adds to the
                        # graph meanwhile (searches may run beside the save). Due ones are saved
                        # before the graph has caught up too: under a steady stream of new rows it
                        # may never, and the processes that take its graphs wait for them.
                        save = (start, entry.numbers, entry.matrix)
                        entry.saved_rows = start
                    elif start >= end:
                        entry.building = False  # under the lock: an append after this starts a new round
                        break
                if save is not None:
                    self._save(entry, *save)
                    continue
                with entry.lock:
                    rows = entry.matrix[start:end]
                    keys = entry.graph_keys(start, end)
                    if len(keys):
                        entry.ann.add(keys, entry.matrix[keys], threads=1)
                    entry.take_loose(start, rows)
                    entry.ann_rows = end
                    n, matrix = end, entry.matrix
                    refit = entry.loose_rows > 2 * LOOSE_SHARE * n
                if refit:
                    # The scope has moved on from what its centres describe (claims of a new kind
                    # keep arriving, all loose): measure the fit again, so the scan stays ~LOOSE_SHARE.
                    fit, loose = _fit_and_loose(matrix[:n])
                    with entry.lock:
                        entry.measured(fit, loose, n)
        except Exception:  # pragma: no cover - the exact scan keeps serving what the graph lacks
            log.exception("dense index: building the HNSW graph failed; scanning exactly")
        finally:
            entry.building = False

    def _following(self, entry: _Scope) -> bool:
        """Whether this process takes the scope's saved graphs rather than extending its own. Not
        while the scope has fewer distinct vectors than a graph is searched from: its searches scan
        the nodes, and a row stored since the last save is one hash to register (a new node, one
        add), where scanning the rows a taken graph lacks cost every search of this process up to a
        tenth of the scope (saves come at SAVE_GROWTH), for good once the writes stop."""
        return self.follower and self.files is not None and entry.ann is not None and entry.nodes[2] is None

    @staticmethod
    def _look_again(entry: _Scope) -> bool:
        """Whether a following process looks for a newer saved graph now: at most once a
        FOLLOWER_CHECK_SECONDS per scope (marked as looked at when it does)."""
        now = time.monotonic()
        if now - entry.looked_at < FOLLOWER_CHECK_SECONDS:
            return False
        entry.looked_at = now
        return True

    @staticmethod
    def _tail_too_long(entry: _Scope) -> bool:
        return entry.size - entry.ann_rows > FOLLOWER_TAIL_SHARE * entry.ann_rows

    def _take_saved(self, entry: _Scope) -> bool:
        """Replaces the scope's graph by the saved one when that covers more of the scope's rows
        (and exactly those this process holds), so this process adds none of them itself; whether
        it did."""
        assert self.files is not None
        tenant, scope = entry.key
        with entry.lock:
            n, matrix, numbers, have = entry.size, entry.matrix, entry.numbers, entry.ann_rows
        if not have < self.files.rows_saved(tenant, scope, self.encoder_id) <= n:
            return False
        loaded = self._load(entry, numbers, matrix, n, delete_invalid=False)
        if loaded is None or loaded[1] <= have:
            return False
        graph, rows = loaded
        entry.graph_keys(have, rows)
        added = matrix[have:rows]
        loose = entry.loose_among(have, added)  # a tenth of the scope may be new: not under the lock
        with entry.lock:
            entry.ann, entry.ann_rows, entry.saved_rows = graph, rows, rows
            entry.take_loose(have, added, loose)
            refit = entry.loose_rows > 2 * LOOSE_SHARE * rows
        if refit:
            fit, loose_all = _fit_and_loose(matrix[:rows])
            with entry.lock:
                entry.measured(fit, loose_all, rows)
        log.info("dense index: took the saved graph of %d vectors (had %d)", rows, have)
        return True

    def _save_due(self, entry: _Scope) -> bool:
        """A graph is saved once built, and again when it has grown by SAVE_GROWTH since; by the
        process that extends and saves them, not by one that follows it."""
        return (
            self.files is not None
            and not self.follower
            and entry.ann_rows > 0
            and entry.ann_rows >= entry.saved_rows * SAVE_GROWTH
        )

    def _load(
        self, entry: _Scope, numbers: Any, matrix: Any, size: int, delete_invalid: bool = True
    ) -> tuple[Any, int] | None:
        if self.files is None:
            return None
        tenant, scope = entry.key
        try:
            return self.files.load(
                tenant,
                scope,
                self.encoder_id,
                graph_parameters(entry.dim),
                numbers,
                matrix,
                size,
                lambda: _new_graph(entry.dim),
                delete_invalid=delete_invalid,
            )
        except Exception:  # pragma: no cover - a cache: build or extend our own instead
            log.exception("dense index: loading the saved graph failed")
            return None

    def _save(self, entry: _Scope, rows: int, numbers: Any, matrix: Any) -> None:
        tenant, scope = entry.key
        try:
            self.files.save(
                tenant, scope, self.encoder_id, entry.ann, graph_parameters(entry.dim), numbers, matrix, rows
            )
        except Exception:  # pragma: no cover - a cache: the next start builds instead
            log.exception("dense index: saving the graph failed")

    def similarities(
        self, uow: UnitOfWork, tenant: str, scope: str, query: Any, also: list[int], limit: int
    ) -> dict[int, float]:
        """Exact cosine similarity of the `limit` nearest memories of the scope, and of those in `also`."""
        import numpy as np

        entry = self._scope(uow, tenant, scope)
        if entry is None:
            return {}
        query = np.asarray(query, dtype=np.float32)
        graph = loose_positions = loose_vectors = node_vectors = None
        with entry.lock:
            size, matrix, numbers = entry.size, entry.matrix, entry.numbers
            k = min(limit, size)
            scanned = 0
            if entry.ann is not None:
                scanned = entry.ann_rows
                count, node_positions, node_vectors = entry.nodes
                if node_vectors is None:
                    graph = np.asarray(entry.ann.search(query, min(k, scanned), threads=1).keys, dtype=np.int64)
                    loose_positions, loose_vectors = entry.loose_positions, entry.loose_vectors
                else:  # registration may run ahead of the graph: the nodes among the rows it covers
                    count = int(np.searchsorted(node_positions[:count], scanned))
        # Matrix-vector products through BLAS on one thread (the server limits it: slowave.api.blas).
        # On OpenBLAS's own threads a product of a few thousand rows left them spinning: the 5,000
        # loose rows at 100k kept a second core busy (server CPU 1.8 against 0.9 cores, one caller,
        # bench/perf.py); on one thread BLAS is twice as fast as einsum (5,000 × 128: 0.044
        # against 0.092 ms). Rows [0, size) of the buffers never change, so no lock.
        rest = matrix[scanned:size] @ query  # all rows, or those the graph lacks
        if scanned:
            if graph is None:
                # Fewer distinct vectors than a graph is worth: every node, exactly. (bench/scale.py's
                # 100k templated claims have 1,801, as claims differing only in numbers share one.)
                nodes, node_scores = node_positions[:count], node_vectors[:count] @ query
            else:
                # The graph's nodes and the loose ones (a node may be both).
                nodes = graph[~_among(loose_positions, graph)]
                node_scores = np.concatenate([matrix[nodes] @ query, loose_vectors @ query])
                nodes = np.concatenate([nodes, loose_positions])
            if k < len(nodes):  # the best rows are among the best nodes' rows: a twin has its node's cosine
                best = np.argpartition(-node_scores, k - 1)[:k]
                nodes, node_scores = nodes[best], node_scores[best]
            with entry.lock:
                rows, row_scores = entry.newest_rows(nodes, node_scores, scanned, k)
            positions = np.concatenate([rows, np.arange(scanned, size)])
            scores = np.concatenate([row_scores, rest])
        else:
            positions, scores = np.arange(size), rest
        if k < len(positions):
            best = np.argpartition(-scores, k - 1)[:k]
            positions, scores = positions[best], scores[best]
        # tolist: one conversion of each array, not a numpy scalar per element.
        result = dict(zip(numbers[positions].tolist(), scores.tolist()))
        if also:
            wanted = np.asarray(also, dtype=np.int64)
            pos = np.searchsorted(numbers[:size], wanted)  # numbers are ascending
            ok = pos < size
            ok[ok] = numbers[pos[ok]] == wanted[ok]
            if ok.any():
                result.update(zip(wanted[ok].tolist(), (matrix[pos[ok]] @ query).tolist()))
        return result
