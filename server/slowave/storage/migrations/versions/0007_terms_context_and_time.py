"""Stemmed terms, session context and occurrence time in the full-text index.

Memories gain `occurred_at` / `occurred_on` (from the claim that created them) and
`context_terms` (the terms of the two claims stored just before it in the same session). The
full-text index and `scope_terms` are rebuilt with stemmed terms without stop words, each
memory's own field holding its date's words and its context field its session context.

Unlike earlier migrations this one reads `slowave.domain.terms` and `slowave.domain.dates`: the
index must hold exactly the terms the running code asks for, and copying a stemmer and a
stop-word list into a migration would fork them. A later change of terms brings its own rebuild.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

from slowave.domain.dates import date_words
from slowave.domain.terms import terms

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

_TOTAL_DOCS, _TOTAL_WORDS, _CONTEXT, _TOTAL_CONTEXT = "", " words", "\t", "\t words"
_WINDOW = 2  # service.remember.SESSION_CONTEXT_CLAIMS at the time of writing


def _key(tenant: str, scope: str) -> str:
    return "s" + hashlib.sha256(f"{tenant}\0{scope}".encode()).hexdigest()[:11]


def _token(key: str, term: str, context: bool) -> str:
    if term.isascii():
        return f"{key}{'c' if context else 'a'}{term}"
    return f"{key}{'v' if context else 'u'}{term.encode('utf-8').hex()}"


def upgrade() -> None:
    bind = op.get_bind()
    postgres = bind.dialect.name == "postgresql"
    with op.batch_alter_table("memories") as batch:
        batch.add_column(sa.Column("occurred_at", sa.DateTime(timezone=True)))
        batch.add_column(sa.Column("occurred_on", sa.String(10)))
        batch.add_column(sa.Column("context_terms", sa.Text()))

    # Each claim event in session order; a memory's context is the claims just before its first one.
    events = bind.execute(
        sa.text(
            "SELECT number, session_id, memory_number, content, occurred_at FROM source_events "
            "WHERE kind = 'claim' ORDER BY session_id, number"
        )
    ).all()
    first: dict[int, tuple[object, list[str]]] = {}
    previous: list[str] = []
    session = None
    for _, session_id, memory, content, occurred in events:
        if session_id != session:
            session, previous = session_id, []
        if memory is not None and memory not in first:
            first[memory] = (occurred, previous[-_WINDOW:])
        previous.append(content)

    memories = bind.execute(
        sa.text("SELECT number, tenant, scope, content, source_kind FROM memories ORDER BY number")
    ).all()
    counts: dict[tuple[str, str, str], int] = {}
    updates, index = [], []
    for number, tenant, scope, content, source_kind in memories:
        occurred, window = first.get(number, (None, []))
        if isinstance(occurred, str):  # SQLite hands back its stored text (naive UTC)
            occurred = datetime.fromisoformat(occurred)
        day = None
        if occurred is not None:
            occurred = occurred.replace(tzinfo=UTC) if occurred.tzinfo is None else occurred
            day = occurred.astimezone(UTC).date().isoformat()
            if not postgres:  # stored as tables.UtcDateTime stores it
                occurred = occurred.astimezone(UTC).replace(tzinfo=None)
        context = terms(" ".join(window)) if source_kind == "explicit_remember" and window else []
        own = terms(f"{content} {date_words(day)}")
        updates.append({"n": number, "at": occurred, "on": day, "ctx": " ".join(context) or None})
        key = _key(tenant, scope)
        index.append(
            {
                "n": number,
                "w": " ".join(
                    [_token(key, w, False) for w in sorted(set(own))]
                    + [_token(key, w, True) for w in sorted(set(context))]
                ),
            }
        )
        for term, n in (
            (_TOTAL_DOCS, 1),
            (_TOTAL_WORDS, len(own)),
            (_TOTAL_CONTEXT, len(context)),
            *((w[:128], 1) for w in set(own)),
            *(((_CONTEXT + w)[:128], 1) for w in set(context)),
        ):
            counts[(tenant, scope, term)] = counts.get((tenant, scope, term), 0) + n

    for i in range(0, len(updates), 1000):
        bind.execute(
            sa.text(
                "UPDATE memories SET occurred_at = :at, occurred_on = :on, context_terms = :ctx WHERE number = :n"
            ).bindparams(sa.bindparam("at", type_=sa.DateTime(timezone=True))),
            updates[i : i + 1000],
        )
    if postgres:
        fill = sa.text("UPDATE memories SET content_tsv = to_tsvector('simple', :w) WHERE number = :n")
    else:
        op.execute("DELETE FROM memories_fts")
        fill = sa.text("INSERT INTO memories_fts(rowid, words) VALUES (:n, :w)")
    for i in range(0, len(index), 1000):
        bind.execute(fill, index[i : i + 1000])
    op.execute("DELETE FROM scope_terms")
    rows = [{"tenant": k[0], "scope": k[1], "term": k[2], "docs": v} for k, v in counts.items()]
    scope_terms = sa.table("scope_terms", sa.column("tenant"), sa.column("scope"), sa.column("term"), sa.column("docs"))
    for i in range(0, len(rows), 5000):
        bind.execute(sa.insert(scope_terms), rows[i : i + 5000])


def downgrade() -> None:
    raise NotImplementedError("0007 rewrites the full-text index; restore a backup taken before upgrading")
