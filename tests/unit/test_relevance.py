"""Relevance and admission, with the normative admission floor (behaviour §12.1, 6.3, 10.7)."""

from __future__ import annotations

import pytest

from slowave.domain.relevance import (
    ADMISSION_THRESHOLD,
    OCCASION_WEIGHT,
    TOTAL_DOCS_TERM,
    TOTAL_WORDS_TERM,
    Cue,
    LexicalScorer,
    admits,
    memory_relevance,
    term_profile,
    term_share,
    text_relevance,
)
from slowave.domain.retrieval import CandidateScoring

CONTENT = "The deploy port is 8080"


# --------------------------------------------------------------------------- admission floor


@pytest.mark.parametrize(
    "cue",
    [
        Cue("What is the deploy port? The deploy port is 8080"),
        Cue("THE   DEPLOY\tPORT IS 8080, right?"),  # case and runs of white space are ignored
        Cue("unrelated words", "context: the deploy port is 8080 !"),  # semantic context counts
        Cue(CONTENT),
    ],
)
def test_floor_admits_content_contained_verbatim(cue):
    assert cue.contains(CONTENT)
    assert admits(cue, 0.0, CONTENT)  # whatever the relevance model says


def test_floor_uses_claim_normalisation_casefold():
    assert Cue("Die STRASSE ist gesperrt").contains("straße")


@pytest.mark.parametrize(
    "cue",
    [
        Cue("the deploy port 8080"),  # words present but not contiguous
        Cue("deploy port is 8080"),
        Cue("The deploy port is", "8080"),  # split across task and semantic context
        Cue("the deploy-port is 8080"),
    ],
)
def test_floor_requires_contiguous_substring_of_one_part(cue):
    assert not cue.contains(CONTENT)
    assert not admits(cue, ADMISSION_THRESHOLD - 0.01, CONTENT)


def test_blank_text_is_never_contained():
    assert not Cue("anything").contains("   ")


def test_threshold_admits_without_floor():
    cue = Cue("completely different")
    assert admits(cue, ADMISSION_THRESHOLD, CONTENT)
    assert admits(cue, 1.0, CONTENT)
    assert not admits(cue, ADMISSION_THRESHOLD - 1e-6, CONTENT)


# --------------------------------------------------------------------------- relevance model


def _stats(**docs: int) -> dict[str, int]:
    return {TOTAL_DOCS_TERM: 1000, TOTAL_WORDS_TERM: 8000, **docs}


_DEFAULT_CUE = Cue("the deploy port key")


def _scorer(cue: Cue = _DEFAULT_CUE, **docs: int) -> LexicalScorer:
    return LexicalScorer.for_cue(cue, _stats(**docs))


@pytest.mark.parametrize("stats", [None, _stats(), _stats(deploy=3, port=40), _stats(deploy=999, port=1000, the=1000)])
@pytest.mark.parametrize(
    "cue", [Cue("What is the deploy port? The deploy port is 8080"), Cue("zzz"), Cue("deploy", "port 8080")]
)
def test_relevance_in_unit_interval_and_reported_to_six_decimals(cue, stats):
    r = memory_relevance(cue, CONTENT, stats)
    assert 0.0 <= r <= 1.0
    assert r == round(r, 6)


def test_relevance_of_unrelated_cue_is_zero():
    assert memory_relevance(Cue("zzz"), CONTENT, None) == 0.0
    assert memory_relevance(Cue("zzz"), CONTENT, _stats(zzz=5)) == 0.0


def test_bm25_favours_rare_terms_short_texts_and_repeats():
    scorer = _scorer(Cue("the deploy port key"), deploy=3, port=400, key=50)
    assert scorer.share("the deploy key") > scorer.share("the port key")  # rarer term
    assert scorer.share("deploy key") > scorer.share("deploy key with many more words in it than usual")
    assert scorer.share("deploy deploy key") > scorer.share("deploy other key")
    assert scorer.share("nothing shared") == 0.0


def test_bm25_is_lucene_okapi_over_stemmed_terms_as_a_share_of_the_ideal():
    import math

    from slowave.domain.relevance import BM25_B, BM25_K1

    idf = math.log(1 + (1000 - 9 + 0.5) / (9 + 0.5))
    # "The deploy port is 8080" has the terms deploy, port, 8080; 8000 terms over 1000 memories.
    expected = idf * (BM25_K1 + 1) / (1 + BM25_K1 * (1 - BM25_B + BM25_B * 3 / 8))
    assert _scorer(Cue("deploying"), deploy=9).share("The deploy port is 8080") == pytest.approx(expected / idf)


def test_other_word_forms_match():
    scorer = _scorer(Cue("what version pinning policy do we have for dependencies"), version=30, pin=2, depend=5)
    assert (
        scorer.relevance("The payments service pins every dependency to an exact version.", False)
        >= ADMISSION_THRESHOLD
    )


def test_a_question_of_function_words_and_specific_words_admits_the_memory_with_the_specific_words():
    scorer = _scorer(Cue("Which Python version do the workers use?"), python=4, version=30, worker=6, use=80)
    assert scorer.relevance("The worker fleet runs Python 3.11 on Debian.", False) >= ADMISSION_THRESHOLD
    assert scorer.relevance("The web team uses React.", False) < ADMISSION_THRESHOLD


def test_session_context_adds_to_own_evidence_and_never_stands_in_for_it():
    from slowave.domain.relevance import session_context

    cue = Cue("Which checkout failed after the canary rollout?")
    scorer = _scorer(cue, rollout=3, canari=3, fail=40, checkout=20)
    context = session_context(["We started the canary rollout on Monday."])
    assert context == "start canari rollout monday"
    alone = scorer.relevance("It failed the checkout flow.", False)
    assert scorer.relevance("It failed the checkout flow.", False, context) > alone > 0
    assert scorer.relevance("Unrelated words entirely.", False, context) == 0.0


def test_names_weigh_at_least_the_name_floor_of_the_average_stored_term():
    from slowave.domain.relevance import NAME_FLOOR

    cue = Cue("What did Caroline research?")
    plain = LexicalScorer.for_cue(Cue("what did caroline research"), _stats(carolin=500, research=10))
    named = LexicalScorer.for_cue(cue, _stats(carolin=500, research=10))
    average = (plain.weights["carolin"] + plain.weights["research"]) / 2
    assert named.weights["carolin"] == pytest.approx(NAME_FLOOR * average)
    assert named.weights["carolin"] > plain.weights["carolin"]
    assert named.weights["research"] == plain.weights["research"]
    # A rare name keeps its own, higher weight.
    rare = LexicalScorer.for_cue(cue, _stats(carolin=2, research=10))
    assert rare.weights["carolin"] > rare.weights["research"]


def test_cue_words_absent_from_the_store_still_count_in_the_score():
    # Only "the" occurs in the store: a text sharing just that word must not cover the cue.
    cue = Cue("Which database engine does the billing system use?")
    assert (
        LexicalScorer.for_cue(cue, _stats(the=900)).relevance("The payments ledger is in PostgreSQL", False)
        < ADMISSION_THRESHOLD
    )


def test_contained_text_counts_as_fully_matched():
    # "port 80" occurs verbatim inside "port 8080", though the word 80 does not
    scorer = _scorer(Cue("set the port 8080"), port=40)
    assert scorer.relevance("port 80", True) >= 0.7 > scorer.relevance("port 80", False)


def test_term_share_of_item_terms():
    cue = Cue("deploy port").token_set
    assert term_share(cue, "deploy port") == 1.0
    assert term_share(cue, "deploy port is 8080") == 2 / 3  # "is" is a stop word
    assert term_share(cue, "") == 0.0


def test_text_relevance_best_among_texts():
    cue = Cue("deploy staging service")
    assert text_relevance(cue, "Deploy staging", "unrelated") == 1.0
    assert text_relevance(cue) == 0.0
    assert text_relevance(cue, "", "nothing here") == 0.0
    assert 0.0 <= text_relevance(cue, "deploy the api to production") <= 1.0


def test_semantic_paraphrase_at_cosine_030_is_admitted_on_meaning_alone():
    from slowave.domain.relevance import fused_relevance

    assert fused_relevance(0.0, 0.30) >= ADMISSION_THRESHOLD > fused_relevance(0.0, 0.28)


def test_exact_words_decide_between_semantic_near_duplicates():
    from slowave.domain.relevance import fused_relevance

    # Two claims of one template are near neighbours of the cue; the one naming what the cue names wins.
    assert fused_relevance(0.8, 0.95) > fused_relevance(0.3, 0.95) > fused_relevance(0.3, 0.2)
    assert fused_relevance(0.0, 1.0) < 1.0


def test_cue_names_are_joined_words_words_with_digits_and_capitalised_words_after_the_first():
    from slowave.domain.relevance import cue_names

    assert cue_names("Which service reads deploy/media-transcoder/runtime.json?") == [
        "deploy/media-transcoder/runtime.json"
    ]
    assert cue_names("What happened after moving ledger-worker to Python 3.12.1?") == [
        "ledger-worker",
        "python",
        "3.12.1",
    ]
    assert cue_names("What did SEC-5165 reveal on 2024-08-23?") == ["sec-5165", "2024-08-23"]
    assert cue_names("Who produces to metrics.updates.v1 for Kafka") == ["metrics.updates.v1", "kafka"]
    assert cue_names("Whom do I page when the picture scaling worker breaks?") == []  # "I" is one letter
    assert cue_names("Deploy the thing") == []  # the first word is capitalised as any sentence start


def test_a_name_is_mentioned_only_as_a_whole_span():
    from slowave.domain.relevance import mentions

    assert mentions("moving ledger-worker to python 3.12.1 doubled cold starts", "ledger-worker")
    assert mentions("moving ledger-worker to python 3.12.1 doubled cold starts", "3.12.1")
    assert not mentions("two ledger-workers", "ledger-worker")
    assert not mentions("python 3.12.10", "3.12.1")
    assert mentions("ledger-worker", "ledger-worker")


def _names(cue: Cue, *contents: str):
    from slowave.domain.relevance import CueNames, LexicalScorer

    return CueNames.among(cue, LexicalScorer.for_cue(cue, {"": 100}), list(contents))


def test_semantic_evidence_follows_what_the_cue_names():
    from slowave.domain.relevance import fused_relevance

    cue = Cue("Which port does billing-api listen on?")
    named, neighbour = "billing-api listens on port 8443.", "search-api listens on port 9000."
    names = _names(cue, named, neighbour)
    assert names.share(named) == 1.0 and names.share(neighbour) == 0.0
    # The neighbour is as close in meaning (cosine 0.9) but keeps only its lexical evidence.
    assert fused_relevance(0.3, 0.9, names.share(neighbour)) == 0.3
    assert fused_relevance(0.3, 0.9, names.share(named)) > 0.8


def test_a_name_no_candidate_mentions_is_ordinary_wording():
    # "sign-in" is name-like in form, but nothing in the scope mentions it: no candidate loses
    # its semantic evidence for lacking it, so paraphrases keep working.
    names = _names(Cue("Which SQL engine sits under the sign-in front door?"), "auth-gateway now uses Postgres 15.")
    assert names.weights == {} and names.share("auth-gateway now uses Postgres 15.") == 1.0


def test_names_weigh_by_the_specificity_of_their_words():
    from slowave.domain.relevance import CueNames, LexicalScorer

    cue = Cue("Does geo-lookup use Kafka?")
    # "kafka" occurs in half the scope, "geo" and "lookup" in one memory each.
    scorer = LexicalScorer.for_cue(cue, {"": 100, "kafka": 50, "geo": 1, "lookup": 1})
    names = CueNames.among(cue, scorer, ["geo-lookup uses Redis.", "search-api uses Kafka."])
    assert names.share("geo-lookup uses Redis.") > 0.7 > 0.3 > names.share("search-api uses Kafka.") > 0


def test_names_shares_found_once_are_the_shares_computed_alone():
    from slowave.domain.relevance import CueNames, LexicalScorer

    cue = Cue("Does geo-lookup call search-api or Kafka?")
    scorer = LexicalScorer.for_cue(cue, {"": 100, "kafka": 50, "geo": 1, "lookup": 1, "search": 9, "api": 30})
    contents = ["geo-lookup calls search-api.", "search-api uses Kafka.", "geo-lookups only.", "Kafka, kafka!", ""]
    names = CueNames.among(cue, scorer, contents)
    alone = CueNames(names.weights)  # no shares kept: each share computed from the text
    assert names.shares and all(names.share(c) == alone.share(c) for c in contents)


def test_names_found_in_one_pass_are_those_each_text_mentions():
    """CueNames finds the candidates mentioning each name in one string when every content is
    ASCII; seeded random texts over a small alphabet (spans touching each other, the ends of texts,
    NUL and letters whose case folding changes their length) give exactly what `mentions` says."""
    import random

    from slowave.domain.relevance import _holders, folded, mentions

    rng = random.Random(20261207)
    for alphabet in ("ab-.1 x\n\0S", "ab-.1 xßİÄ"):
        for _ in range(2000):
            contents = ["".join(rng.choices(alphabet, k=rng.randrange(12))) for _ in range(rng.randrange(6))]
            names = list(dict.fromkeys("".join(rng.choices("ab-1sx.", k=rng.randrange(1, 4))) for _ in range(3)))
            want = {}
            for name in names:
                found = [i for i, c in enumerate(contents) if mentions(folded(c), name)]
                if found:
                    want[name] = found
            assert _holders(names, contents) == want, (contents, names)


def test_two_weak_channels_do_not_add_up_to_admission():
    from slowave.domain.relevance import fused_relevance, semantic_strength

    weak_cosine = 0.20  # semantic strength ≈ 0.18, below the threshold on its own
    assert semantic_strength(weak_cosine) < ADMISSION_THRESHOLD
    assert fused_relevance(0.30, weak_cosine) == 0.30 < ADMISSION_THRESHOLD
    # Once one channel stands on its own, the other corroborates it.
    assert fused_relevance(0.40, weak_cosine) > 0.40
    assert fused_relevance(0.30, 0.40) > semantic_strength(0.40) >= ADMISSION_THRESHOLD


def test_stored_own_terms_score_exactly_as_the_text_they_were_made_from():
    """Remember stores a memory's own terms (content plus its date's words) as the index holds
    them; scoring from them must give the numbers scoring the text gives."""
    from slowave.domain.dates import date_words
    from slowave.domain.relevance import LexicalScorer
    from slowave.domain.terms import terms

    cue = Cue("Which payments dependencies were pinned in January 2024, and by whom?")
    docs = {"": 50, " words": 400, "\t words": 100, "payment": 5, "depend": 3, "pin": 2, "januari": 4, "2024": 9}
    scorer = LexicalScorer.for_cue(cue, docs)
    for content, day in [
        ("We pinned the payments dependencies last week.", "2024-01-08"),
        ("Payments pinned payments, again and again.", None),
        ("Nothing in common here.", "2023-05-02"),
        ("the", None),
    ]:
        stored = " ".join(terms(f"{content} {date_words(day)}"))
        for context in (None, "pin payment depend"):
            assert scorer.relevance(content, False, context, date_words(day), stored) == scorer.relevance(
                content, False, context, date_words(day)
            )


# --------------------------------------------------------------------------- occasions


def _occasion_scoring(cue: Cue) -> CandidateScoring:
    stats = _stats(offsit=5, cost=40, total=60, **{" occasions": 100, " occasion words": 3000})
    return CandidateScoring(cue, LexicalScorer.for_cue(cue, stats))


def test_an_occasion_fills_a_share_of_what_relevance_lacks():
    scoring = _occasion_scoring(Cue("What was the total cost of the offsite?"))
    about = term_profile("total cost 40k offsit lisbon march")
    share = scoring.lexical_scorer.occasion_share(about)
    assert 0 < share <= 1
    raised = scoring.in_occasions({1: 0.5, 2: 0.5, 3: 1.0}, {1: 7, 3: 7}, {7: about})
    assert raised[1] == pytest.approx(0.5 + OCCASION_WEIGHT * share * 0.5, abs=1e-6)
    assert raised[2] == 0.5, "a memory without an occasion keeps its relevance"
    assert raised[3] == 1.0, "nothing goes above 1"
    assert scoring.in_occasions({1: 0.5}, {1: 8}, {8: term_profile("printer offic replac")}) == {1: 0.5}


def test_an_occasion_raises_only_admitted_memories():
    scoring = _occasion_scoring(Cue("total cost of the offsite"))
    assert scoring.in_occasions({}, {1: 7}, {7: term_profile("total cost offsit")}) == {}


def test_a_longer_occasion_with_the_same_terms_says_less():
    scorer = _occasion_scoring(Cue("total cost of the offsite")).lexical_scorer
    short = "total cost offsit"
    long = short + " " + " ".join(f"filler{i}" for i in range(200))
    assert scorer.occasion_share(term_profile(long)) < scorer.occasion_share(term_profile(short))


def test_a_claims_subject_is_the_first_thing_it_names_among_its_opening_words():
    from slowave.domain.relevance import claim_subject

    assert claim_subject("Caroline: Thanks, Melanie! I painted it last week.") == "caroline"
    assert claim_subject("The payments-api pins every dependency.") == "payments-api"
    assert claim_subject("We moved to Redis 7.2 last week.") == "redis"
    assert claim_subject("Since v2.4 the exporter batches writes.") == "v2.4"
    assert claim_subject("Priya Raman leads the data team.") == "priya"
    # A capitalised first word is where a subject stands: an ordinary noun there is the subject.
    assert claim_subject("Backups of billing-db run nightly.") == "backups"
    # Stop words and one-letter words are not names; nothing named in the first four words.
    assert claim_subject("I think we should ask Kafka.") is None
    assert claim_subject("The") is None


def test_about_named_lowers_what_is_not_about_the_names_when_something_is():
    from types import SimpleNamespace

    from slowave.domain.relevance import ADMISSION_THRESHOLD, SUBJECT_WEIGHT, Cue
    from slowave.domain.retrieval import CandidateScoring

    def memories(*contents):
        return {i: SimpleNamespace(content=c) for i, c in enumerate(contents)}

    scoring = CandidateScoring.for_cue(Cue("What did Evan tell Sam about hobbies?"), {}, [], None)
    assert scoring.named == {"evan", "sam"}
    stored = memories("Evan: keep trying new hobbies.", "Sam: thanks, Evan.", "Melanie: Evan and Sam hike.", "Mel: hi")
    got = scoring.about_named({0: 0.6, 1: 0.7, 2: 0.9, 3: 0.4}, stored)
    # Memories about Evan or Sam keep their relevance; the others lack 1 / (1 - w) times more, down to
    # the admission threshold and never below it.
    assert got[0] == 0.6 and got[1] == 0.7
    assert got[2] == pytest.approx(1 - 0.1 / (1 - SUBJECT_WEIGHT), abs=1e-6)
    assert got[3] == ADMISSION_THRESHOLD
    # A verbatim match (relevance 1) keeps it; nothing changes when no memory is about a name.
    assert scoring.about_named({2: 1.0, 0: 0.5}, stored)[2] == 1.0
    assert scoring.about_named({2: 0.9, 3: 0.5}, stored) == {2: 0.9, 3: 0.5}
    unnamed = CandidateScoring.for_cue(Cue("which hobbies help?"), {}, [], None)
    assert unnamed.about_named({0: 0.6, 2: 0.9}, stored) == {0: 0.6, 2: 0.9}


def test_a_memory_asks_when_it_ends_with_a_question_mark():
    from slowave.domain import relevance as R

    assert R.asks("What other hobbies have you found?")
    assert R.asks("Should billing-db move to Postgres 16?  ")
    assert not R.asks("Is it done? Yes, since Friday.")
    assert not R.asks("billing-db moved to Postgres 16.")


def test_asking_lowered_grows_the_lack_of_asking_memories_down_to_the_threshold():
    from types import SimpleNamespace

    from slowave.domain import relevance as R

    contents = {1: "Which port does search-api use?", 2: "search-api listens on 9000.", 3: "Why?"}
    memories = {n: SimpleNamespace(content=c) for n, c in contents.items()}
    out = CandidateScoring.asking_lowered({1: 0.8, 2: 0.8, 3: 0.4}, memories)
    assert out[2] == 0.8
    assert out[1] == pytest.approx(1 - 0.2 / (1 - R.ASKING_WEIGHT), abs=1e-6)
    assert out[3] == ADMISSION_THRESHOLD  # lowered to the threshold, never below it
    assert CandidateScoring.asking_lowered({1: 1.0}, memories) == {1: 1.0}  # verbatim: certain
