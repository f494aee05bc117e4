"""Terms: the words retrieval compares, as an information-retrieval engine sees them.

A text's terms are its words (letters and digits, case-folded, accents removed) minus the stop
words, each reduced to its Snowball (Porter 2) English stem, so `pins`, `pinning` and `pinned`
are one term and `What`, `did`, `the` are none. Both the index (at Remember) and the cue (at
Activate and Recall) go through this one function, and the learned adjustment compares cues by
the same terms (behaviour §12.1). A change of the stop words or the stemmer changes
`retrieval_policy_version` and needs the full-text index rebuilt (a migration).
"""

from __future__ import annotations

import re
import threading
import unicodedata

import Stemmer

STEMMER_NAME = "english"
TERMS_VERSION = "snowball-en+stop-v1"

_WORD = re.compile(r"[^\W_]+")

# Words that say how a sentence is built rather than what it is about: English function words
# (articles, pronouns, auxiliaries, prepositions, conjunctions), question words and the fillers
# of conversational questions (`what`, `when`, `did`, `ever`, `also`, `really`). Digits and
# single letters that carry meaning (`3`, `x`) are kept; a cue of only stop words finds only
# what the admission floor or meaning finds.
STOP_WORDS = frozenset(
    """
a about above after again against ago all almost also although always am among an and another any
anybody anyone anything anyway anywhere are aren aren't around as at
be became because become been before being below beside besides between both but by
can cannot can't could couldn couldn't
did didn didn't do does doesn doesn't doing done don don't down during
each either else ever every everybody everyone everything
few for from further
get gets getting got
had hadn hadn't has hasn hasn't have haven haven't having he her here hers herself him himself his how however
i if in into is isn isn't it it's its itself
just
least less let likely
many may maybe me might mine more most much must my myself
neither never no nobody none nor not nothing now
of off often on once only onto or other others otherwise our ours ourselves out over own
per perhaps
quite
rather really
s same shall she should shouldn shouldn't since so some somebody someone something sometimes somewhat still such
t than that that's the their theirs them themselves then there there's these they this those though through thus to too toward towards
under until up upon us
very via
was wasn wasn't we were weren weren't what whatever when whenever where whereas wherever whether which while who whoever whole whom whose why will with within without won won't would wouldn wouldn't
yet you your yours yourself yourselves
d ll m re ve
""".split()
)


_local = threading.local()


def _stemmer() -> Stemmer.Stemmer:
    # A PyStemmer object keeps a cache and is not safe to share between threads.
    stemmer = getattr(_local, "stemmer", None)
    if stemmer is None:
        stemmer = _local.stemmer = Stemmer.Stemmer(STEMMER_NAME)
    return stemmer


def words(text: str) -> list[str]:
    """Letters and digits, case-folded, accents removed (the full-text index's word breaks)."""
    folded = text.casefold()
    if not folded.isascii():
        folded = "".join(ch for ch in unicodedata.normalize("NFKD", folded) if not unicodedata.combining(ch))
    return _WORD.findall(folded)


def terms(text: str) -> list[str]:
    """The text's terms in order, repeats kept (term frequency counts them)."""
    kept = [w for w in words(text) if w not in STOP_WORDS]
    return _stemmer().stemWords(kept) if kept else []


def stem_words(kept: list[str]) -> list[str]:
    """The stems of words already split and filtered (as `terms` does), in one stemmer call."""
    stems: list[str] = _stemmer().stemWords(kept)
    return stems
