"""Claim identity (behaviour §6): two claims are the same claim when their normalised texts are equal.

The identity is a digest of the normalised text, so it can be stored and compared through an index
(duplicate claims in a scope, the same knowledge gap asked again, a session's summary unchanged).
"""

from __future__ import annotations

import hashlib

from slowave.domain.text import normalize_claim


def claim_hash(content: str) -> str:
    """The hex sha256 of the claim's normalised text."""
    return hashlib.sha256(normalize_claim(content).encode("utf-8")).hexdigest()
