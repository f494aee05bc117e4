"""Shape records for the active memories that have none of the running parse.

Remember stores each claim's shape with it (domain.near_duplicates.shape_record); memories stored
before migration 0016, or under an earlier version of the parse, have none, and each comparison
with them parses the claim again (≈ 50 µs, ten comparisons per remembered claim). A server fills
them in when it starts, before it serves (the supervisor of several processes once, like the
vector backfill): 5.3 s for 100k memories, once per store and parse version. Parsed outside any
transaction, stored a batch per short write; a memory retired meanwhile (an erasure blanks its
text) is skipped, so no record outlives the words it was parsed from.
"""

from __future__ import annotations

import logging
import time

from slowave.domain.near_duplicates import parse_claim, shape_record
from slowave.service.context import ServiceContext

log = logging.getLogger(__name__)

BATCH = 1000


def backfill_shapes(ctx: ServiceContext, batch: int = BATCH) -> int:
    """Parses and stores the shape of every active memory without a record of the running
    version, oldest first, logged; returns how many. Run once per store before any process serves it."""
    started = time.monotonic()
    done = after = 0
    while True:
        with ctx.db.transaction(read_only=True) as view:
            rows = view.memories.without_shape(after, batch)
        if not rows:
            break
        records = {r.number: shape_record(parse_claim(r.content)) for r in rows}
        with ctx.db.transaction() as uow:
            uow.memories.set_shapes(records)
        done += len(rows)
        after = rows[-1].number
    if done:
        log.info("shape backfill: stored the claim shapes of %d memories in %.1f s", done, time.monotonic() - started)
    return done
