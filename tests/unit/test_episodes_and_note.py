"""Episode pairing (behaviour §11.5) and the session_note threshold (behaviour §11.4)."""

from __future__ import annotations

import pytest

from slowave.domain.episodes import pair_events
from slowave.domain.session_note import SESSION_NOTE_MIN_EVENTS, session_note


def test_no_events_no_episodes():
    assert pair_events([]) == []


def test_first_event_forms_an_episode_alone():
    assert pair_events([7]) == [(7, None)]


def test_each_later_event_pairs_with_its_predecessor_in_write_order():
    assert pair_events([3, 4, 9, 12]) == [(3, None), (4, 3), (9, 4), (12, 9)]


@pytest.mark.parametrize("n", [1, 2, 3, 5, 32, 100])
def test_n_events_form_n_distinct_episodes(n):
    events = list(range(100, 100 + n))
    episodes = pair_events(events)
    assert len(episodes) == n
    assert len(set(episodes)) == n
    assert len({frozenset(e for e in ep if e is not None) for ep in episodes}) == n  # no two coincide


def test_pairing_follows_given_order_not_numeric_order():
    assert pair_events([5, 2, 8]) == [(5, None), (2, 5), (8, 2)]


def test_seed_with_trajectory_example_five_entries_plus_claims():
    """Commit "With trajectory": episodes_formed = 5 + remembered claims."""
    claims, trajectory = [1, 2], [3, 4, 5, 6, 7]
    assert len(pair_events(claims + trajectory)) == 7


# --------------------------------------------------------------------------- session_note


def test_threshold_is_three():
    assert SESSION_NOTE_MIN_EVENTS == 3


@pytest.mark.parametrize(
    ("events", "recalls", "present"),
    [
        (0, 0, False),
        (1, 0, False),
        (2, 0, False),  # Activate + Commit only
        (3, 0, True),  # Activate + 1 Remember + Commit without Recall
        (4, 0, True),
        (40, 0, True),
        (3, 1, False),  # one fresh Recall or one continuation read
        (4, 1, False),
        (10, 5, False),
        (2, 1, False),
    ],
)
def test_session_note_presence(events, recalls, present):
    note = session_note(events, recalls)
    assert (note is not None) is present
    if present:
        assert isinstance(note, str) and note.strip()
        assert "0 recall() calls" in note
