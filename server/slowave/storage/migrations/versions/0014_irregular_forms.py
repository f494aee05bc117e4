"""Irregular forms in the stored terms: the stem of `built` becomes `build`, of `bought` `buy`.

`slowave.domain.terms` now maps the stems of irregular English forms to their base's stem
(IRREGULAR_STEMS). Everything stored as terms is mapped the same way, so the index holds exactly
what the running code asks for: each memory's own terms and session context (and its full-text
entry, written again), each occasion's terms (its revision bumped, so no process keeps an old
profile), each cue's term set (the learned adjustment compares cues by them), and the scope
statistics of every term the mapping touches, counted again from the memories. The mapping works
on the stored terms alone — no text is read again — so what an erasure removed stays removed.

Revision ID: 0014
Revises: 0013
"""

from __future__ import annotations

from collections import Counter

import sqlalchemy as sa
from alembic import op

from slowave.domain.relevance import context_term
from slowave.domain.terms import IRREGULAR_STEMS, regular
from slowave.storage.memories import TERM_CHARS
from slowave.storage.search_terms import index_text, scope_key

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

_BATCH = 2000


def _mapped(stored: str | None) -> str | None:
    return None if stored is None else " ".join(regular(stored.split()))


def upgrade() -> None:
    bind = op.get_bind()
    postgres = bind.dialect.name == "postgresql"
    touched = set(IRREGULAR_STEMS) | set(IRREGULAR_STEMS.values())
    counts: Counter[tuple[str, str, str]] = Counter()
    last = 0
    while True:
        rows = bind.execute(
            sa.text(
                "SELECT number, tenant, scope, own_terms, context_terms FROM memories "
                "WHERE number > :last ORDER BY number LIMIT :batch"
            ),
            {"last": last, "batch": _BATCH},
        ).all()
        if not rows:
            break
        last = rows[-1][0]
        updates, unindex, index = [], [], []
        for number, tenant, scope, own, context in rows:
            new_own, new_context = _mapped(own), _mapped(context)
            own_terms, context_terms = (new_own or "").split(), (new_context or "").split()
            counts.update((tenant, scope, w[:TERM_CHARS]) for w in set(own_terms) if w in touched)
            counts.update((tenant, scope, context_term(w)[:TERM_CHARS]) for w in set(context_terms) if w in touched)
            if (new_own, new_context) == (own, context):
                continue
            key = scope_key(tenant, scope)
            updates.append({"n": number, "own": new_own, "context": new_context})
            unindex.append({"n": number, "w": index_text(key, (own or "").split(), (context or "").split())})
            index.append({"n": number, "w": index_text(key, own_terms, context_terms)})
        if not updates:
            continue
        bind.execute(
            sa.text("UPDATE memories SET own_terms = :own, context_terms = :context WHERE number = :n"), updates
        )
        if postgres:
            bind.execute(
                sa.text("UPDATE memories SET content_tsv = to_tsvector('simple', :w) WHERE number = :n"), index
            )
        else:  # a contentless index: an entry is removed by naming the words it was indexed with
            bind.execute(
                sa.text("INSERT INTO memories_fts(memories_fts, rowid, words) VALUES ('delete', :n, :w)"), unindex
            )
            bind.execute(sa.text("INSERT INTO memories_fts(rowid, words) VALUES (:n, :w)"), index)

    # The scope statistics of every touched term, counted again over the memories (any status, as
    # Remember counts them and only an erasure takes them back).
    names = sorted({w[:TERM_CHARS] for w in touched} | {context_term(w)[:TERM_CHARS] for w in touched})
    delete = sa.text("DELETE FROM scope_terms WHERE term IN :terms").bindparams(sa.bindparam("terms", expanding=True))
    bind.execute(delete, {"terms": names})
    scope_terms = sa.table("scope_terms", sa.column("tenant"), sa.column("scope"), sa.column("term"), sa.column("docs"))
    rows_ = [{"tenant": t, "scope": s, "term": w, "docs": n} for (t, s, w), n in sorted(counts.items())]
    for i in range(0, len(rows_), 5000):
        bind.execute(sa.insert(scope_terms), rows_[i : i + 5000])

    occasions = bind.execute(sa.text("SELECT number, terms FROM occasions")).all()
    changed = [{"n": n, "w": new} for n, w in occasions if (new := _mapped(w)) != w]
    for i in range(0, len(changed), _BATCH):
        bind.execute(
            sa.text("UPDATE occasions SET terms = :w, revision = revision + 1 WHERE number = :n"),
            changed[i : i + _BATCH],
        )

    cues = bind.execute(sa.text("SELECT number, terms FROM cues")).all()
    changed = []
    for n, stored in cues:
        new = " ".join(sorted(set(regular(stored.split()))))
        if new != stored:
            changed.append({"n": n, "w": new})
    for i in range(0, len(changed), _BATCH):
        bind.execute(sa.text("UPDATE cues SET terms = :w WHERE number = :n"), changed[i : i + _BATCH])


def downgrade() -> None:
    raise NotImplementedError("0014 maps stored terms one way; restore a backup taken before upgrading")
