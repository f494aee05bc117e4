"""Relevance and admission, with the normative admission floor (spec 12.1, 6.3, 10.7)."""
from __future__ import annotations

import pytest

from slowave.domain.relevance import (
    ADMISSION_THRESHOLD,
    Cue,
    admits,
    coverage,
    memory_relevance,
    text_relevance,
)

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


@pytest.mark.parametrize("rank", [None, 0.0, -0.5, -3.0, -1000.0])
@pytest.mark.parametrize("cue", [Cue("What is the deploy port? The deploy port is 8080"), Cue("zzz"),
                                 Cue("deploy", "port 8080")])
def test_relevance_in_unit_interval_and_reported_to_six_decimals(cue, rank):
    r = memory_relevance(cue, CONTENT, rank)
    assert 0.0 <= r <= 1.0
    assert r == round(r, 6)


def test_relevance_of_unrelated_cue_is_zero():
    assert memory_relevance(Cue("zzz"), CONTENT, None) == 0.0


def test_coverage_share_of_item_words():
    cue = Cue("deploy port").token_set
    assert coverage(cue, "deploy port") == 1.0
    assert coverage(cue, "deploy port is 8080") == 0.5
    assert coverage(cue, "") == 0.0


def test_text_relevance_best_among_texts():
    cue = Cue("deploy staging service")
    assert text_relevance(cue, "Deploy staging", "unrelated") == 1.0
    assert text_relevance(cue) == 0.0
    assert text_relevance(cue, "", "nothing here") == 0.0
    assert 0.0 <= text_relevance(cue, "deploy the api to production") <= 1.0
