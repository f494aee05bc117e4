"""Terms: the words retrieval compares, as an information-retrieval engine sees them.

A text's terms are its words (letters and digits, case-folded, accents removed) minus the stop
words, each reduced to its Snowball (Porter 2) English stem, so `pins`, `pinning` and `pinned`
are one term and `What`, `did`, `the` are none. A stemmer strips suffixes and knows no irregular
forms, so the stems of those are mapped to their base's: `built` is `build`, `bought` is `buy`,
`went` is `go`, `children` is `child` (IRREGULAR_FORMS). Both the index (at Remember) and the cue (at
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
TERMS_VERSION = "snowball-en+irregular-v1+stop-v1"

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


# English irregular verbs and plurals: each line a base word, then the forms that mean it. Left
# out: forms that as often mean something else (`lay`, `bound`, `ground`, `wound`, `rose`, `born`,
# `sat`), and forms that are stop words (`was`, `did`, `got`, `won`). A change is a new
# TERMS_VERSION and a migration that maps the stored terms (0014 did it for this list).
IRREGULAR_FORMS = """
arise arose arisen
awake awoke awoken
beat beaten
begin began begun
bend bent
bite bitten
bleed bled
blow blew blown
break broke broken
breed bred
bring brought
build built
burn burnt
buy bought
catch caught
choose chose chosen
cling clung
come came
creep crept
deal dealt
dig dug
draw drew drawn
dream dreamt
drink drank drunk
drive drove driven
eat ate eaten
fall fell fallen
feed fed
feel felt
fight fought
find found
flee fled
fly flew flown
forbid forbade forbidden
forget forgot forgotten
forgive forgave forgiven
freeze froze frozen
give gave given
go went gone
grow grew grown
hang hung
hear heard
hide hid hidden
hold held
keep kept
kneel knelt
know knew known
lead led
lean leant
leap leapt
learn learnt
leave left
lend lent
light lit
lose lost
make made
mean meant
meet met
mistake mistook mistaken
overcome overcame
pay paid
prove proven
rebuild rebuilt
redo redid redone
rewrite rewrote rewritten
ride rode ridden
ring rang rung
run ran
say said
see saw seen
seek sought
sell sold
send sent
shake shook shaken
shine shone
shoot shot
show shown
shrink shrank shrunk
sing sang sung
sink sank sunk
sleep slept
slide slid
speak spoke spoken
speed sped
spend spent
spin spun
spring sprang sprung
stand stood
steal stole stolen
stick stuck
sting stung
stink stank stunk
strike struck stricken
strive strove striven
swear swore sworn
sweep swept
swim swam swum
swing swung
take took taken
teach taught
tear tore torn
tell told
think thought
throw threw thrown
undergo underwent undergone
understand understood
undertake undertook undertaken
undo undid undone
wake woke woken
wear wore worn
weave wove woven
weep wept
withdraw withdrew withdrawn
write wrote written
child children
man men
woman women
mouse mice
foot feet
tooth teeth
person people
"""

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


def _irregular_stems() -> dict[str, str]:
    """The stem of each irregular form -> the stem of its base, where the two differ. Mapping stems
    rather than words keeps the stored terms mappable on their own (migration 0014), and every
    other form of the word (`builds`, `building`) stems to the base's stem already."""
    stemmer = Stemmer.Stemmer(STEMMER_NAME)
    out = {}
    for line in IRREGULAR_FORMS.strip().splitlines():
        base, *forms = line.split()
        for form in forms:
            if form in STOP_WORDS:
                continue
            stem, target = stemmer.stemWord(form), stemmer.stemWord(base)
            if stem != target:
                out[stem] = target
    # Mapped once, a term stays: no base is itself a form (mapping twice would change it again).
    assert not set(out.values()) & set(out), "a base stem is also an irregular form's stem"
    return out


IRREGULAR_STEMS = _irregular_stems()


def regular(stems: list[str]) -> list[str]:
    """Stems with those of irregular forms replaced by their base's (IRREGULAR_FORMS)."""
    get = IRREGULAR_STEMS.get
    return [get(s, s) for s in stems]


def terms(text: str) -> list[str]:
    """The text's terms in order, repeats kept (term frequency counts them)."""
    kept = [w for w in words(text) if w not in STOP_WORDS]
    return regular(_stemmer().stemWords(kept)) if kept else []


def stem_words(kept: list[str]) -> list[str]:
    """The terms of words already split and filtered (as `terms` does), in one stemmer call."""
    return regular(_stemmer().stemWords(kept))
