"""Episode formation, the synchronous first stage of consolidation (seed; behaviour §11.5)."""

from __future__ import annotations


def pair_events(event_numbers: list[int]) -> list[tuple[int, int | None]]:
    """In write order the first event forms an episode alone, each later one with its predecessor.

    So n events form n episodes and no two coincide.
    """
    return [(n, event_numbers[i - 1] if i else None) for i, n in enumerate(event_numbers)]
