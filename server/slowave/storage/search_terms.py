"""How words are written into the full-text index: partitioned by tenant and scope.

Each indexed word carries a key derived from its memory's tenant and scope, so a word's posting
list holds only that scope's memories. Two things follow: one tenant's words can never change what
another tenant's queries cost or return (the index statistics are per scope, like the service's own
term counts in `scope_terms`), and a query in a small scope never walks the postings of a large
one. Tokens are plain ASCII letters and digits, read the same by SQLite FTS5's `ascii` tokenizer and
PostgreSQL's `simple` configuration: an ASCII word is written as is, any other word as the hex of
its UTF-8, behind a marker that keeps the two forms apart and says the field: `a`/`u` for the
memory's own terms, `c`/`v` for its session context (relevance.LexicalScorer).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from functools import lru_cache


@lru_cache(maxsize=4096)
def scope_key(tenant: str, scope: str) -> str:
    """12 characters naming the (tenant, scope) partition; starts with a letter, so every token is
    a word to PostgreSQL's parser."""
    return "s" + hashlib.sha256(f"{tenant}\0{scope}".encode()).hexdigest()[:11]


def index_token(key: str, term: str, context: bool = False) -> str:
    """The indexed form of one term (as `domain.terms` produces it) in one partition and field."""
    if term.isascii():
        return f"{key}{'c' if context else 'a'}{term}"
    return f"{key}{'v' if context else 'u'}{term.encode('utf-8').hex()}"


def index_text(key: str, terms: Iterable[str], context_terms: Iterable[str] = ()) -> str:
    """A memory's distinct terms, and those of its session context, as the index stores them."""
    own = [index_token(key, w) for w in sorted(set(terms))]
    return " ".join(own + [index_token(key, w, context=True) for w in sorted(set(context_terms))])
