"""The lifecycle filter of commit trajectories (seed; behaviour §11.2).

The seed says entries that narrate Slowave's own lifecycle are silently dropped. The detector is
exact on purpose, so that genuine task steps that merely mention Slowave survive.
"""

from __future__ import annotations

import re

_PREFIXES = tuple(f"slowave_{tool}:" for tool in ("activate", "remember", "recall", "feedback", "commit"))
_PHRASES = frozenset(
    {
        "activated the slowave session",
        "committed the slowave session",
        "committed the session",
        "the slowave session was activated",
        "the slowave session was committed",
        "submitted complete retrieval feedback",
        "submitted retrieval feedback",
        "completed retrieval feedback",
        "completed lifecycle feedback",
    }
)
_ARG = r"(?:(?:sess|ctx|rec|sch|proc|cur|cont|fbe|evt|ep)_[a-z0-9_-]+|outcome (?:success|partial|failure))"
_TOOL_CALL = re.compile(
    r"(?:called|invoked|ran|used) (?:the )?slowave_(?:activate|remember|recall|feedback|commit)(?: tool)?"
    rf"(?: (?:for|on|with) {_ARG}(?:(?:, | and |, and ){_ARG})*)?"
)
_WS = re.compile(r"\s+")
_EDGE = " .,;:!?"


def normalized(summary: str) -> str:
    text = _WS.sub(" ", summary.lower())
    return text.strip(_EDGE)


def is_lifecycle_entry(summary: str) -> bool:
    if summary.strip().lower().startswith(_PREFIXES):
        return True
    form = normalized(summary)
    return form in _PHRASES or _TOOL_CALL.fullmatch(form) is not None


def filter_lifecycle(summaries: list[str]) -> tuple[list[int], int]:
    """Indexes of the entries that survive, and how many were dropped."""
    kept = [i for i, s in enumerate(summaries) if not is_lifecycle_entry(s)]
    return kept, len(summaries) - len(kept)
