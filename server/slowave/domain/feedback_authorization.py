"""The feedback authorization model's per-target rules (seed; behaviour §10.2).

Feedback is authorised only for targets the named retrieval actually exposed, and each entry must
be coherent. A failing entry is not an error of the call: it is appended as a rejected row with
the first failing rule's code, and its valid siblings are still accepted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from slowave.domain.feedback_entries import UNSPECIFIED, MemoryEntry, ProcedureEntry
from slowave.domain.identifiers import CANONICAL_MEMORY_ID


@dataclass(frozen=True)
class Rejection:
    reason: str
    field: str
    hint: str


@dataclass(frozen=True)
class ReplacementState:
    """What the rules need to know about a named replacement memory."""

    scope: str
    active: bool


ReplacementLookup = Callable[[str], "ReplacementState | None"]

_HINTS = {
    "target_not_exposed": "assess only ids this retrieval returned, memories in memory_feedback and procedures in procedure_feedback",
    "invalid_memory_assessment": "set assessment to used, irrelevant or stale (or not_used, unassessable, already_known)",
    "invalid_relevance": "omit relevance or set relevant, irrelevant or uncertain",
    "used_requires_helped_no_effect_or_harmed_effect": "with used, set effect helped, no_effect or harmed, or omit it",
    "neutral_requires_unknown_or_absent_effect": "with not_used or unassessable, omit effect or set unknown",
    "unassessable_requires_reason": "explain in reason why usage cannot be determined",
    "already_known_requires_unknown_or_absent_effect": "with already_known, omit effect or set unknown",
    "already_known_requires_no_replacement": "omit replacement_memory_id with already_known",
    "irrelevant_requires_unknown_or_absent_effect": "with irrelevant, omit effect or set unknown",
    "stale_requires_unknown_or_absent_effect": "with stale, omit effect or set unknown",
    "stale_requires_valid_stale_reason": "set stale_reason: contradicted, superseded, outdated, unsupported or withdrawn",
    "stale_requires_reason": "explain in reason why the memory is stale",
    "superseded_requires_replacement_memory_id": "Remember the corrected claim, then name its id in replacement_memory_id",
    "stale_reason_requires_stale_assessment": "send stale_reason only with assessment stale",
    "replacement_requires_stale_assessment": "send replacement_memory_id only with assessment stale",
    "replacement_matches_retired_memory": "the replacement must be a different memory",
    "invalid_replacement_memory_id": "use the canonical id of the replacing memory, e.g. sch_42",
    "replacement_not_found": "Remember the corrected claim first and use the id it returns",
    "replacement_scope_mismatch": "the replacement must be in the retrieval's scope",
    "replacement_not_current": "the replacement is retired; name an active memory",
    "invalid_procedure_use": "set use to used or not_used (or unassessable)",
    "invalid_procedure_effect": "set effect: helped, no_effect, harmed or unknown",
    "used_procedure_requires_contribution": "describe in contribution how the procedure contributed",
    "incomplete_coverage": "assess the outstanding targets, or send coverage partial",
}


def _reject(reason: str, field: str) -> Rejection:
    return Rejection(reason, field, _HINTS[reason])


def memory_entry_rejection(
    entry: MemoryEntry,
    *,
    exposed: bool,
    retrieval_scope: str,
    lookup_replacement: ReplacementLookup,
) -> Rejection | None:
    """The first rule of behaviour §10.2 (memory table) that the entry breaks, in table order."""
    a, effect = entry.assessment, entry.effect
    if not exposed:
        return _reject("target_not_exposed", "memory_id")
    if a == UNSPECIFIED:
        return _reject("invalid_memory_assessment", "assessment")
    if entry.relevance == UNSPECIFIED:
        return _reject("invalid_relevance", "relevance")
    if a == "used" and effect is not None and effect not in ("helped", "no_effect", "harmed"):
        return _reject("used_requires_helped_no_effect_or_harmed_effect", "effect")
    if a in ("not_used", "unassessable") and effect not in (None, "unknown"):
        return _reject("neutral_requires_unknown_or_absent_effect", "effect")
    if a == "unassessable" and entry.reason is None:
        return _reject("unassessable_requires_reason", "reason")
    if a == "already_known" and effect not in (None, "unknown"):
        return _reject("already_known_requires_unknown_or_absent_effect", "effect")
    if a == "already_known" and entry.replacement_memory_id is not None:
        return _reject("already_known_requires_no_replacement", "replacement_memory_id")
    if a == "irrelevant" and effect not in (None, "unknown"):
        return _reject("irrelevant_requires_unknown_or_absent_effect", "effect")
    if a == "stale":
        if effect not in (None, "unknown"):
            return _reject("stale_requires_unknown_or_absent_effect", "effect")
        if entry.stale_reason in (None, UNSPECIFIED):
            return _reject("stale_requires_valid_stale_reason", "stale_reason")
        if entry.reason is None:
            return _reject("stale_requires_reason", "reason")
        if entry.stale_reason == "superseded" and entry.replacement_memory_id is None:
            return _reject("superseded_requires_replacement_memory_id", "replacement_memory_id")
    if entry.stale_reason is not None and a != "stale":
        return _reject("stale_reason_requires_stale_assessment", "stale_reason")
    if entry.replacement_memory_id is not None and a != "stale":
        return _reject("replacement_requires_stale_assessment", "replacement_memory_id")
    if a == "stale" and entry.replacement_memory_id is not None:
        return _replacement_rejection(entry, retrieval_scope, lookup_replacement)
    return None


def _replacement_rejection(
    entry: MemoryEntry, retrieval_scope: str, lookup_replacement: ReplacementLookup
) -> Rejection | None:
    replacement = entry.replacement_memory_id
    assert replacement is not None
    if replacement == entry.memory_id:
        return _reject("replacement_matches_retired_memory", "replacement_memory_id")
    if not CANONICAL_MEMORY_ID.match(replacement):
        return _reject("invalid_replacement_memory_id", "replacement_memory_id")
    state = lookup_replacement(replacement)
    if state is None:
        return _reject("replacement_not_found", "replacement_memory_id")
    if state.scope != retrieval_scope:
        return _reject("replacement_scope_mismatch", "replacement_memory_id")
    if not state.active:
        return _reject("replacement_not_current", "replacement_memory_id")
    return None


def procedure_entry_rejection(entry: ProcedureEntry, *, exposed: bool) -> Rejection | None:
    """The first rule of behaviour §10.2 (procedure table) that the entry breaks."""
    if not exposed:
        return _reject("target_not_exposed", "procedure_id")
    if entry.use == UNSPECIFIED:
        return _reject("invalid_procedure_use", "use")
    if entry.effect in (None, UNSPECIFIED):
        return _reject("invalid_procedure_effect", "effect")
    if entry.use == "used" and entry.contribution is None:
        return _reject("used_procedure_requires_contribution", "contribution")
    if entry.use == "unassessable" and entry.reason is None:
        return _reject("unassessable_requires_reason", "reason")
    return None


def incomplete_coverage() -> Rejection:
    return _reject("incomplete_coverage", "coverage")
