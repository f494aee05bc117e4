"""Supersession (seed; behaviour §12.3): a memory retired `stale` + `superseded` points at the memory
that replaced it, and retrieval shows the replacement in its place.

The chain is followed to its first active memory, at most `MAX_REDIRECT_HOPS` links: a chain
longer than that, a dangling link, or a retirement for another reason ends it without a stand-in.
Nothing here does I/O; the caller passes how to read a memory by number.
"""

from __future__ import annotations

from collections.abc import Callable

from slowave.domain.retrieval import DIRECT, REDIRECT, Candidate, StoredMemory

MAX_REDIRECT_HOPS = 8


def active_successor(memory: StoredMemory, read: Callable[[int], StoredMemory | None]) -> StoredMemory | None:
    """The first active memory down `memory`'s supersession chain, or None."""
    for _ in range(MAX_REDIRECT_HOPS):
        if memory.stale_reason != "superseded" or memory.superseded_by is None:
            return None
        successor = read(memory.superseded_by)
        if successor is None:
            return None
        if successor.status == "active":
            return successor
        memory = successor
    return None


def stand_ins(
    admitted: dict[int, float],
    memories: dict[int, StoredMemory],
    replacement: Callable[[StoredMemory], StoredMemory | None],
) -> list[Candidate]:
    """Admitted memories, each retired-as-superseded one replaced by its active successor.

    A memory admitted on its own keeps its pathway `direct` and the better of its two relevances;
    of several redirects to one memory the strongest stands (ties: the lowest superseded number).
    `replacement` is `active_successor` bound to a reader (storage I/O); it may return None."""
    direct: dict[int, Candidate] = {}
    redirects: list[Candidate] = []
    for n, relevance in admitted.items():
        if memories[n].status == "active":
            direct[n] = Candidate(n, relevance)
        else:
            target = replacement(memories[n])
            if target is not None:
                memories[target.number] = target
                redirects.append(Candidate(target.number, relevance, REDIRECT, n))
    for c in sorted(redirects, key=lambda c: (-c.relevance, c.redirected_from)):
        own = direct.get(c.number)
        if own is None:
            direct[c.number] = c
        elif own.pathway == DIRECT:
            own.relevance = max(own.relevance, c.relevance)
    return list(direct.values())
