"""The full-text index's statements, one per backend: SQLite's contentless FTS5 table memories_fts,
PostgreSQL's content_tsv tsvector with its GIN index (migration 0006; the words written are
storage.search_terms'). Neither is in storage.tables: the migrations alone describe them."""

from __future__ import annotations

from sqlalchemy import BigInteger, Text, bindparam, column, distinct, func, literal, literal_column, select, table, true
from sqlalchemy.dialects.postgresql import ARRAY

from slowave.storage import tables as t
from slowave.storage.executor import Executor, PerDialect, not_indexed

_m = t.memories
# The FTS5 table: its hidden column of its own name takes commands (`delete`, `merge`, `optimize`),
# `rank` their argument.
FTS = table(
    "memories_fts", column("rowid", BigInteger), column("words", Text), column("memories_fts", Text), column("rank")
)
TSV = table("memories", column("number", BigInteger), column("content_tsv"))  # PostgreSQL's column
_fts, _tsv = FTS, TSV
_SIMPLE = literal_column("'simple'")  # the text search configuration (a regconfig, not a text value)

MEMORY_VIEW = (
    "number",
    "type",
    "content",
    "status",
    "stale_reason",
    "superseded_by",
    "positive_cues",
    "negative_cues",
    "source_kind",
    "source_session_id",
    "context_terms",
    "occurred_on",
    "own_terms",
    "occasion",
)
"""What retrieval reads of a memory (not the index columns, which would only cost time per row)."""

VIEW_COLUMNS = [_m.c[name] for name in MEMORY_VIEW]


def retrievable(driven: bool = False) -> tuple:
    """Memories of the scope that retrieval may return: active ones, and those retired as superseded
    (their replacements stand in). `driven`: the statement is driven by other lookups (full-text
    postings, primary keys), which SQLite would otherwise give up for a walk of the scope's index."""
    tenant, scope = (not_indexed(_m.c.tenant), not_indexed(_m.c.scope)) if driven else (_m.c.tenant, _m.c.scope)
    return tenant == bindparam("tenant"), scope == bindparam("scope"), _kept(_m.c)


def _kept(c):
    """Active, or retired as superseded (`retrievable`'s status test), on a table's or subquery's
    columns `c`."""
    return (c.status == "active") | (c.stale_reason == "superseded")


def _with_scope_columns(columns) -> tuple:
    """The columns, and those `_retrievable_in` tests: for a subquery that reads rows before they are
    known to be the scope's."""
    names = {c.name for c in columns}
    return (*columns, *(_m.c[n] for n in ("tenant", "scope", "status", "stale_reason") if n not in names))


def _retrievable_in(rows) -> tuple:
    """`retrievable`, tested on the columns of a subquery (`_with_scope_columns`)."""
    return rows.c.tenant == bindparam("tenant"), rows.c.scope == bindparam("scope"), _kept(rows.c)


def _index(dialect: str):
    if dialect == "sqlite":
        return _fts.insert().values(rowid=bindparam("n"), words=bindparam("w"))
    return (
        _tsv.update()
        .where(_tsv.c.number == bindparam("n"))
        .values(content_tsv=func.to_tsvector(_SIMPLE, bindparam("w", type_=Text)))
    )


INDEX_WORDS = PerDialect(_index)
"""Indexes a memory's words (parameters n: its number, w: storage.search_terms.index_text)."""


def _tsv_matches():
    """PostgreSQL: the memory's indexed words match the query q (see `query`)."""
    return literal_column("memories.content_tsv").op("@@")(func.to_tsquery(_SIMPLE, bindparam("q", type_=Text)))


def _newest_matches(dialect: str, columns: tuple = tuple(VIEW_COLUMNS)):
    if dialect != "sqlite":
        return None  # PostgreSQL asks RECENT_MATCHES, then MATCHES (MemorySearch.lexical_matches)
    return (
        select(*columns)
        .select_from(_fts.join(_m, _m.c.number == _fts.c.rowid))
        .where(literal_column("memories_fts").op("MATCH")(bindparam("q")), *retrievable(driven=True))
        .order_by(_fts.c.rowid.desc())
        .limit(bindparam("limit"))
    )


def _index_first(dialect: str, columns: tuple = tuple(VIEW_COLUMNS)):
    """SQLite's index streams matches newest first either way. PostgreSQL is made to ask the GIN
    index for every match, then take the newest: left to choose, it walks the scope newest first
    testing each memory, expecting to meet `limit` matches soon. It estimates a word missing from
    its statistics (a rare one: a ticket, a port, a version, a name) to match a fixed share of
    the scope, so a query ORing a few rare words looked like thousands of matches; they matched
    few, and the walk read the whole scope (measured at 100k memories: a task quoting one claim,
    10 rare words, 83 matches, estimated 3,897: 144 ms walking, 0.8 ms from the index)."""
    if dialect == "sqlite":
        return _newest_matches(dialect, columns)
    # The scope is tested after the lookup, so that the GIN index is the only one that can answer:
    # with the scope's conditions beside the words, PostgreSQL read a scope it had no statistics
    # for yet (a new one, filling) row by row through the scope's index instead. The index is
    # partitioned by scope (storage.search_terms): it holds no other scope's memories for the words.
    hits = (
        select(*_with_scope_columns(columns))
        .where(_tsv_matches())
        .cte("hits")
        .prefix_with("MATERIALIZED", dialect="postgresql")
    )
    return (
        select(*(hits.c[c.name] for c in columns))
        .where(*_retrievable_in(hits))
        .order_by(hits.c.number.desc())
        .limit(bindparam("limit"))
    )


MATCHES = PerDialect(_index_first)
"""Retrievable memories of the scope whose words match the query q (see `query`), newest first;
for queries of rare words (their matches are few: every one is read)."""

NEWEST_MATCHES = PerDialect(_newest_matches)
"""SQLite: MATCHES for queries of common words, whose matches may be most of the scope: the newest,
read in order until `limit` (PostgreSQL: RECENT_MATCHES, then MATCHES if it found too few)."""

NEWEST_FIRST = -_m.c.number
"""The order of ix_memories_scope_newest (PostgreSQL, migration 0018), which the primary key cannot
give: the scope's newest memories are read from that index, never by walking the table's."""

RECENT_WINDOW = 1024
"""How many of the scope's newest memories RECENT_MATCHES reads (through ix_memories_scope_newest):
≈ 1 ms to read and test them all in a scope of 217k memories, so a window that holds too few
matches costs about that before the GIN index is asked; and it is asked only when matches are
rarer than `limit` in 1,024 among the newest (at `limit` 64, fewer than 1 in 16 memories: where
matches are spread evenly, the GIN index then reads at most that share of the scope)."""


def _scope_window(*columns):
    """The scope's RECENT_WINDOW newest memories (`window`), any status, as a subquery."""
    return (
        select(*columns)
        .where(_m.c.tenant == bindparam("tenant"), _m.c.scope == bindparam("scope"))
        .order_by(NEWEST_FIRST)
        .limit(bindparam("window"))
        .subquery("recent")
    )


def _recent_matches(dialect: str):
    """PostgreSQL: the matches of q among the scope's RECENT_WINDOW newest memories (`window`),
    newest first, at most `limit`. When they are `limit`, they are the newest matches of the whole
    scope. The scope's own newest are read (the index of migration 0018): the table's newest were
    mostly other scopes' once several were written to, and the GIN index then answered again.

    All-of queries are of common words, and PostgreSQL estimates that common words match together
    as often as chance has it. Words that never occur together (two templates' words, two topics)
    looked like thousands of matches, and it walked the whole scope newest first: 403 ms at 170k
    memories for two words in 45k memories each, none together. Reading the GIN index first instead
    costs as many row reads as there are matches: 168 ms for two words together in 24k memories,
    which the walk answers in 2.7. The window bounds the walk; the index answers what it leaves."""
    if dialect == "sqlite":
        return None
    recent = _scope_window(*VIEW_COLUMNS, literal_column("memories.content_tsv").label("tsv"))
    matched = recent.c.tsv.op("@@")(func.to_tsquery(_SIMPLE, bindparam("q", type_=Text)))
    return (
        select(*(recent.c[name] for name in MEMORY_VIEW))
        .where(_kept(recent.c), matched)
        .order_by(-recent.c.number)  # the window's own order: read until `limit` matches
        .limit(bindparam("limit"))
    )


RECENT_MATCHES = PerDialect(_recent_matches)
"""PostgreSQL: NEWEST_MATCHES among the scope's RECENT_WINDOW newest memories (see `_recent_matches`)."""


FLAG_COLUMNS = (_m.c.number, _m.c.status, _m.c.content, _m.c.own_terms)


def _flag_statement(dialect: str):
    # The GIN index answers first, then the newest are taken: at 100k memories, a claim's rare
    # words (a new ticket, port or version) made PostgreSQL walk the whole scope (87 ms per query,
    # 7 s for a batch of 100 claims), see `_index_first`. A batch's all-of queries first try the
    # newest memories (MemorySearch._flag_matches_on_postgresql).
    return _index_first(dialect, FLAG_COLUMNS)


FLAG_MATCHES = PerDialect(_flag_statement)
"""MATCHES with what Remember's flags read: the text, the status, and its own words as indexed
(own_terms), which tell which of several queries joined in one (`any_query`, SQLite only) a row
matches."""


def _flag_each(dialect: str):
    if dialect == "sqlite":
        return None  # SQLite joins the queries into one (`any_query`)
    # One lateral lookup per query: each query's matches from the GIN index (`OFFSET 0` keeps the
    # planner from walking the scope newest first, as in `_index_first`), then its newest. One
    # statement for a batch of 100 claims instead of 100: at 100k memories 40–42 ms against 71–95.
    asked = (
        func.unnest(bindparam("queries", type_=ARRAY(Text())))
        .table_valued("q", with_ordinality="i")
        .render_derived(name="asked")
    )
    hits = (
        select(*_with_scope_columns(FLAG_COLUMNS))
        .where(literal_column("memories.content_tsv").op("@@")(func.to_tsquery(_SIMPLE, asked.c.q)))
        .offset(literal_column("0"))
        .correlate(asked)
        .lateral("hits")
    )
    newest = (
        select(*(hits.c[c.name] for c in FLAG_COLUMNS))
        .where(*_retrievable_in(hits))
        .order_by(hits.c.number.desc())
        .limit(bindparam("limit"))
        .lateral("newest")
    )
    return (
        select(asked.c.i, *newest.c).select_from(asked).join(newest, true()).order_by(asked.c.i, newest.c.number.desc())
    )


FLAG_MATCHES_EACH = PerDialect(_flag_each)
"""PostgreSQL: FLAG_MATCHES for each of several queries (`queries`: `query` texts) in one
statement, each row with the position of its query (`i`, from 1); None on SQLite."""


def _recent_flag_rows():
    recent = _scope_window(*FLAG_COLUMNS, _m.c.stale_reason)
    return select(*(recent.c[c.name] for c in FLAG_COLUMNS)).where(_kept(recent.c)).order_by(recent.c.number.desc())


RECENT_FLAG_ROWS = _recent_flag_rows()
"""What Remember's flags read of the scope's retrievable memories among the RECENT_WINDOW newest
(`window`), newest first: a batch's all-of queries are tested on their own_terms (PostgreSQL)."""


def query(dialect: str, tokens: list[str], require_all: bool) -> str:
    """The index query for indexed tokens: all of them, or any of them. Tokens are letters and
    digits (storage.search_terms), so nothing in them reads as query syntax."""
    if dialect == "sqlite":
        return (" AND " if require_all else " OR ").join(tokens)
    return (" & " if require_all else " | ").join(tokens)


def any_query(dialect: str, queries: list[tuple[list[str], bool]]) -> str:
    """One index query matching what any of several `query`s (tokens, require_all) matches."""
    return (" OR " if dialect == "sqlite" else " | ").join(f"({query(dialect, t, a)})" for t, a in queries)


# SQLite's FTS5 index is a set of segments, one more per write transaction, which FTS5 merges four
# at a time as they pile up (`automerge`); a lookup reads every segment holding the term. At 100k
# memories the index had 14–17 segments, and an Activate's full-text query read each of them
# for each of its terms (about 50 lookups). Merged into one, the query took 0.30–0.43 ms instead
# of 0.54–0.59 in-process. PostgreSQL's GIN index needs nothing of the kind.
_SEGMENTS = select(func.count(distinct(column("segid")))).select_from(table("memories_fts_idx", column("segid")))
# `merge` with a negative page count merges all segments into one (an incremental `optimize`),
# writing about that many pages per statement, so each step is a short write transaction.
_MERGE = FTS.insert().values(memories_fts=literal("merge"), rank=bindparam("pages"))


class FullTextIndex:
    """Upkeep of SQLite's full-text index (storage.index_merger); nothing to do on PostgreSQL."""

    def __init__(self, ex: Executor) -> None:
        self.ex = ex

    def segments(self) -> int:
        return int(self.ex.scalar(_SEGMENTS) or 0) if self.ex.dialect == "sqlite" else 0

    def merge_step(self, pages: int) -> bool:
        """Merges about `pages` pages of the index's segments into one; False once nothing is
        left to merge (SQLite reports the pages written as changes: one means none)."""
        if self.ex.dialect != "sqlite":
            return False
        before = self.ex.total_changes()
        self.ex.run(_MERGE, {"pages": -pages})
        return self.ex.total_changes() - before > 1
