"""The per-target rules of behaviour §10.2 over gRPC: scenarios 31, 32, 33 and one test per rejection code
(every row of both tables, each with its `field`).

Each test starts from a fresh scope holding three exposed memories, one procedure exposed by the
same activation, a retired memory and a memory of another scope. A rejected entry is appended as a
rejected row, reported in `rejected`, covers nothing and has no learning effect, while its valid
sibling in the same call is accepted.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from tests.integration.test_feedback import (
    CACHE,
    DEPLOY,
    LOGS,
    OTHER,
    PYTHON,
    entry,
    exposing,
    feedback,
    ids,
    learned_of,
    ledger,
    make_procedure,
    proc_entry,
    procedure_of,
    quiet_commit,
    rejected_tuples,
)
from tests.support import activate, new_scope, pb, res, seed_memories, used

GOAL = "Rotate credentials for payments gateway"
MEMORY, PROCEDURE = pb.TARGET_KIND_MEMORY, pb.TARGET_KIND_PROCEDURE
USED, IRRELEVANT, STALE = pb.MEMORY_ASSESSMENT_USED, pb.MEMORY_ASSESSMENT_IRRELEVANT, pb.MEMORY_ASSESSMENT_STALE
NOT_USED, UNASSESSABLE, ALREADY_KNOWN = (
    pb.MEMORY_ASSESSMENT_NOT_USED,
    pb.MEMORY_ASSESSMENT_UNASSESSABLE,
    pb.MEMORY_ASSESSMENT_ALREADY_KNOWN,
)


@dataclass
class World:
    scope: str
    task: str
    act: pb.ActivateResponse
    m1: str
    m2: str
    m3: str
    retired: str
    foreign: str  # a memory of another scope of the tenant
    proc: str

    @property
    def rid(self) -> str:
        return self.act.retrieval_id


@pytest.fixture
def world(stub, scope) -> World:
    m1, m2, m3, retired = seed_memories(stub, scope, [DEPLOY, PYTHON, CACHE, LOGS])
    (foreign,) = seed_memories(stub, new_scope(), [OTHER])
    r = exposing(stub, scope, [LOGS])
    rec = feedback(
        stub,
        r.retrieval_id,
        [entry(retired, STALE, stale_reason=pb.STALE_REASON_OUTDATED, reason="rotation is daily now")],
        coverage=pb.COVERAGE_COMPLETE,
    )
    assert list(rec.applied.retired) == [retired]
    quiet_commit(stub, r.session_id)
    proc = make_procedure(stub, scope, GOAL)
    task = f"{GOAL}. {DEPLOY} {PYTHON} {CACHE}"
    act = activate(stub, scope, task=task)
    assert sorted(ids(act.memories)) == sorted([m1, m2, m3])
    assert [p.procedure_id for p in act.procedures] == [proc]
    return World(scope, task, act, m1, m2, m3, retired, foreign, proc)


def assert_rejected(server, stub, world: World, bad, code: str, field: str, *, kind=MEMORY, target=None):
    """Sends the bad entry plus a valid sibling; checks the single rejection and its effects."""
    is_memory = isinstance(bad, pb.MemoryFeedbackEntry)
    target = target or (bad.memory_id if is_memory else bad.procedure_id).strip()
    sibling = world.m3 if target != world.m3 else world.m2
    last_seq = max((r.seq for r in ledger(server, world.rid)), default=0)
    rec = feedback(
        stub,
        world.rid,
        memory=[bad, used(sibling)] if is_memory else [used(sibling)],
        procedures=[] if is_memory else [bad],
    )
    assert rejected_tuples(rec) == [(kind, target, code, field)]
    assert rec.rejected[0].hint  # recovery advice is present (its text is unstable)
    assert len(rec.accepted_event_ids) == 2  # the sibling's row and the retrieval-level row
    assert list(rec.applied.strengthened) == [sibling]
    assert target not in rec.applied.unchanged and target not in rec.applied.retired
    # The rejected row is in the ledger, with its code and field, and covers nothing.
    rows = [r for r in ledger(server, world.rid) if r.seq > last_seq and not r.accepted]
    assert [(r.target_id, r.rejection_reason, r.rejection_field) for r in rows] == [(target, code, field)]
    exposed = {*ids(world.act.memories), *(p.procedure_id for p in world.act.procedures)}
    if target in exposed:
        assert target in [*rec.outstanding.memory_ids, *rec.outstanding.procedure_ids]
    return rec


def later(stub, world: World) -> pb.ActivateResponse:
    return activate(stub, world.scope, task=world.task)


def assert_memory_untouched(stub, world: World, memory_id: str) -> None:
    """Still retrievable (not retired) and without learned adjustment."""
    assert learned_of(later(stub, world), memory_id) == 0.0


# ------------------------------------------------------------------------------------------ scenarios


def test_s31_stale_requires_reason_and_replacement(server, stub, world):
    rec = feedback(
        stub,
        world.rid,
        [
            entry(world.m1, STALE, reason="wrong"),  # no stale_reason
            entry(world.m2, STALE, stale_reason=pb.STALE_REASON_OUTDATED),  # no reason
            entry(world.m3, STALE, stale_reason=pb.STALE_REASON_SUPERSEDED, reason="replaced"),  # no replacement
        ],
    )
    assert rejected_tuples(rec) == [
        (MEMORY, world.m1, "stale_requires_valid_stale_reason", "stale_reason"),
        (MEMORY, world.m2, "stale_requires_reason", "reason"),
        (MEMORY, world.m3, "superseded_requires_replacement_memory_id", "replacement_memory_id"),
    ]
    assert not rec.applied.retired and len(rec.accepted_event_ids) == 1
    assert sorted(rec.outstanding.memory_ids) == sorted([world.m1, world.m2, world.m3])
    again = later(stub, world)
    assert sorted(ids(again.memories)) == sorted([world.m1, world.m2, world.m3])  # none retired


def test_s31_blank_reason_counts_as_absent(server, stub, world):
    rec = feedback(stub, world.rid, [entry(world.m1, STALE, stale_reason=pb.STALE_REASON_OUTDATED, reason="   ")])
    assert rejected_tuples(rec) == [(MEMORY, world.m1, "stale_requires_reason", "reason")]


def test_s32_replacement_rules(server, stub, world):
    def superseded(replacement: str) -> pb.MemoryFeedbackEntry:
        return entry(
            world.m1,
            STALE,
            stale_reason=pb.STALE_REASON_SUPERSEDED,
            replacement_memory_id=replacement,
            reason="a newer claim",
        )

    cases = [
        (world.m1, "replacement_matches_retired_memory"),
        ("42", "invalid_replacement_memory_id"),
        ("sch_042", "invalid_replacement_memory_id"),
        ("sch_999999", "replacement_not_found"),
        (world.foreign, "replacement_scope_mismatch"),
        (world.retired, "replacement_not_current"),
    ]
    rec = feedback(stub, world.rid, [superseded(r) for r, _ in cases])
    assert rejected_tuples(rec) == [(MEMORY, world.m1, code, "replacement_memory_id") for _, code in cases]
    assert not rec.applied.retired and not rec.applied.replacements
    assert world.m1 in rec.outstanding.memory_ids
    # The correction sequence that passes: an active memory of the same scope (it need not be exposed).
    ok = feedback(stub, world.rid, [superseded(f"  {world.m2} ")])  # identifiers are trimmed
    assert not ok.rejected and list(ok.applied.retired) == [world.m1]
    assert list(ok.applied.replacements) == [f"{world.m1}->{world.m2}"]


def test_s33_procedure_use_effect_rules_and_neutral_uses(server, stub, world):
    pid = world.proc
    baseline = procedure_of(world.act, pid)
    assert baseline.evidence == res.ProcedureEvidence()
    rec = feedback(
        stub,
        world.rid,
        procedures=[
            proc_entry(pid, pb.PROCEDURE_USE_USED, effect=res.EFFECT_HELPED),  # no contribution
            proc_entry(pid, pb.PROCEDURE_USE_USED, contribution="followed it"),  # no effect
        ],
    )
    assert rejected_tuples(rec) == [
        (PROCEDURE, pid, "used_procedure_requires_contribution", "contribution"),
        (PROCEDURE, pid, "invalid_procedure_effect", "effect"),
    ]
    assert list(rec.outstanding.procedure_ids) == [pid]
    # not_used + helped and not_used + no_effect are seed-valid: accepted under two retrievals, so
    # each is that retrieval's effective assessment, yet neither effect counts.
    helped = feedback(
        stub,
        world.rid,
        procedures=[proc_entry(pid, pb.PROCEDURE_USE_NOT_USED, effect=res.EFFECT_HELPED, contribution="stored only")],
    )
    assert not helped.rejected and not helped.outstanding.procedure_ids
    second = later(stub, world)
    no_effect = feedback(
        stub, second.retrieval_id, procedures=[proc_entry(pid, pb.PROCEDURE_USE_NOT_USED, effect=res.EFFECT_NO_EFFECT)]
    )
    assert not no_effect.rejected and not no_effect.outstanding.procedure_ids
    after = procedure_of(later(stub, world), pid)
    ev = after.evidence
    assert (ev.not_used, ev.used, ev.unassessable) == (2, 0, 0)
    assert (ev.helped, ev.no_effect, ev.harmed, ev.unknown) == (0, 0, 0, 0)
    assert after.ranking.learned == baseline.ranking.learned == 0.015  # outcome term only (success + verified)
    assert not after.contributions


# ------------------------------------------------------------------------------------------ memory table


def test_rule_target_not_exposed_memory(server, stub, world):
    for not_exposed in (world.retired, world.foreign, "sch_999999", world.proc):
        server_rows = len(ledger(server, world.rid))
        rec = feedback(stub, world.rid, [used(not_exposed)])
        assert rejected_tuples(rec) == [(MEMORY, not_exposed, "target_not_exposed", "memory_id")]
        assert len(ledger(server, world.rid)) == server_rows + 2
    assert_rejected(server, stub, world, entry(world.foreign, USED), "target_not_exposed", "memory_id")
    rec = feedback(stub, world.rid, [used(f"  {world.foreign}  ")])
    assert rejected_tuples(rec) == [(MEMORY, world.foreign, "target_not_exposed", "memory_id")]  # trimmed id


def test_rule_target_not_exposed_is_first(server, stub, world):
    # Breaks rules 1, 2 and 14: only the first is reported.
    bad = entry(world.foreign, pb.MEMORY_ASSESSMENT_UNSPECIFIED, stale_reason=pb.STALE_REASON_OUTDATED)
    assert_rejected(server, stub, world, bad, "target_not_exposed", "memory_id")


def test_rule_target_exposed_by_another_retrieval_is_not_exposed(server, stub, world):
    # Exposure is per retrieval event (10.1, 10.6): `mine` exposes only m1; m2 and the procedure
    # were exposed by the world's activation, not by it.
    mine = activate(stub, world.scope, task=DEPLOY)
    assert ids(mine.memories) == [world.m1] and not mine.procedures
    rec = feedback(
        stub,
        mine.retrieval_id,
        [used(world.m2)],
        procedures=[proc_entry(world.proc, pb.PROCEDURE_USE_NOT_USED, effect=res.EFFECT_UNKNOWN)],
    )
    assert rejected_tuples(rec) == [
        (MEMORY, world.m2, "target_not_exposed", "memory_id"),
        (PROCEDURE, world.proc, "target_not_exposed", "procedure_id"),
    ]
    assert list(rec.outstanding.memory_ids) == [world.m1]


def test_rule_invalid_memory_assessment(server, stub, world):
    assert_rejected(
        server,
        stub,
        world,
        entry(world.m1, pb.MEMORY_ASSESSMENT_UNSPECIFIED),
        "invalid_memory_assessment",
        "assessment",
    )
    assert_memory_untouched(stub, world, world.m1)


def test_rule_invalid_memory_assessment_undefined_number(server, stub, world):
    assert_rejected(
        server,
        stub,
        world,
        entry(world.m1, 1234, stale_reason=pb.STALE_REASON_WITHDRAWN, reason="x"),
        "invalid_memory_assessment",
        "assessment",
    )
    assert_memory_untouched(stub, world, world.m1)


def test_rule_invalid_relevance(server, stub, world):
    assert_rejected(
        server, stub, world, entry(world.m1, USED, relevance=pb.RELEVANCE_UNSPECIFIED), "invalid_relevance", "relevance"
    )
    assert_memory_untouched(stub, world, world.m1)


def test_rule_invalid_relevance_undefined_number(server, stub, world):
    assert_rejected(server, stub, world, entry(world.m1, USED, relevance=77), "invalid_relevance", "relevance")


def test_rule_used_requires_helped_no_effect_or_harmed_effect(server, stub, world):
    assert_rejected(
        server,
        stub,
        world,
        entry(world.m1, USED, effect=res.EFFECT_UNKNOWN),
        "used_requires_helped_no_effect_or_harmed_effect",
        "effect",
    )
    assert_rejected_again = feedback(stub, world.rid, [entry(world.m1, USED, effect=res.EFFECT_UNSPECIFIED)])
    assert rejected_tuples(assert_rejected_again) == [
        (MEMORY, world.m1, "used_requires_helped_no_effect_or_harmed_effect", "effect")
    ]
    assert_memory_untouched(stub, world, world.m1)


def test_rule_neutral_requires_unknown_or_absent_effect(server, stub, world):
    assert_rejected(
        server,
        stub,
        world,
        entry(world.m1, NOT_USED, effect=res.EFFECT_HELPED),
        "neutral_requires_unknown_or_absent_effect",
        "effect",
    )
    rec = feedback(stub, world.rid, [entry(world.m2, UNASSESSABLE, effect=res.EFFECT_HARMED)])  # no reason either
    assert rejected_tuples(rec) == [(MEMORY, world.m2, "neutral_requires_unknown_or_absent_effect", "effect")]
    ok = feedback(stub, world.rid, [entry(world.m1, NOT_USED, effect=res.EFFECT_UNKNOWN)])
    assert not ok.rejected and list(ok.applied.unchanged) == [world.m1]


def test_rule_unassessable_requires_reason_memory(server, stub, world):
    assert_rejected(server, stub, world, entry(world.m1, UNASSESSABLE), "unassessable_requires_reason", "reason")
    ok = feedback(stub, world.rid, [entry(world.m1, UNASSESSABLE, reason="context was lost")])
    assert not ok.rejected


def test_rule_already_known_requires_unknown_or_absent_effect(server, stub, world):
    assert_rejected(
        server,
        stub,
        world,
        entry(world.m1, ALREADY_KNOWN, effect=res.EFFECT_NO_EFFECT, replacement_memory_id=world.m2),
        "already_known_requires_unknown_or_absent_effect",
        "effect",
    )


def test_rule_already_known_requires_no_replacement(server, stub, world):
    assert_rejected(
        server,
        stub,
        world,
        entry(world.m1, ALREADY_KNOWN, effect=res.EFFECT_UNKNOWN, replacement_memory_id=world.m2),
        "already_known_requires_no_replacement",
        "replacement_memory_id",
    )


def test_rule_irrelevant_requires_unknown_or_absent_effect(server, stub, world):
    assert_rejected(
        server,
        stub,
        world,
        entry(world.m1, IRRELEVANT, effect=res.EFFECT_HARMED),
        "irrelevant_requires_unknown_or_absent_effect",
        "effect",
    )
    assert_memory_untouched(stub, world, world.m1)  # no −0.05 from the rejected row


def test_rule_stale_requires_unknown_or_absent_effect(server, stub, world):
    assert_rejected(
        server,
        stub,
        world,
        entry(world.m1, STALE, effect=res.EFFECT_HELPED, stale_reason=pb.STALE_REASON_OUTDATED, reason="old"),
        "stale_requires_unknown_or_absent_effect",
        "effect",
    )
    assert_memory_untouched(stub, world, world.m1)


def test_rule_stale_requires_valid_stale_reason(server, stub, world):
    assert_rejected(
        server, stub, world, entry(world.m1, STALE, reason="old"), "stale_requires_valid_stale_reason", "stale_reason"
    )
    for reason in (pb.STALE_REASON_UNSPECIFIED, 42):  # present but UNSPECIFIED, or undefined
        rec = feedback(stub, world.rid, [entry(world.m1, STALE, stale_reason=reason, reason="old")])
        assert rejected_tuples(rec) == [(MEMORY, world.m1, "stale_requires_valid_stale_reason", "stale_reason")]
    assert_memory_untouched(stub, world, world.m1)


def test_rule_stale_requires_reason(server, stub, world):
    assert_rejected(
        server,
        stub,
        world,
        entry(world.m1, STALE, stale_reason=pb.STALE_REASON_CONTRADICTED),
        "stale_requires_reason",
        "reason",
    )
    assert_memory_untouched(stub, world, world.m1)


def test_rule_superseded_requires_replacement_memory_id(server, stub, world):
    assert_rejected(
        server,
        stub,
        world,
        entry(world.m1, STALE, stale_reason=pb.STALE_REASON_SUPERSEDED, reason="newer", replacement_memory_id="  "),
        "superseded_requires_replacement_memory_id",
        "replacement_memory_id",
    )
    assert_memory_untouched(stub, world, world.m1)


def test_rule_stale_reason_requires_stale_assessment(server, stub, world):
    assert_rejected(
        server,
        stub,
        world,
        entry(world.m1, USED, stale_reason=pb.STALE_REASON_OUTDATED),
        "stale_reason_requires_stale_assessment",
        "stale_reason",
    )
    # Present but UNSPECIFIED without STALE is the same rule (behaviour §13.2).
    rec = feedback(stub, world.rid, [entry(world.m1, IRRELEVANT, stale_reason=pb.STALE_REASON_UNSPECIFIED)])
    assert rejected_tuples(rec) == [(MEMORY, world.m1, "stale_reason_requires_stale_assessment", "stale_reason")]
    assert_memory_untouched(stub, world, world.m1)


def test_rule_replacement_requires_stale_assessment(server, stub, world):
    assert_rejected(
        server,
        stub,
        world,
        entry(world.m1, USED, replacement_memory_id=world.m2),
        "replacement_requires_stale_assessment",
        "replacement_memory_id",
    )
    # Rule 14 precedes rule 15.
    rec = feedback(
        stub,
        world.rid,
        [entry(world.m1, NOT_USED, stale_reason=pb.STALE_REASON_SUPERSEDED, replacement_memory_id=world.m2)],
    )
    assert rejected_tuples(rec) == [(MEMORY, world.m1, "stale_reason_requires_stale_assessment", "stale_reason")]
    assert_memory_untouched(stub, world, world.m1)


def _stale_replaced_by(world: World, replacement: str, reason=pb.STALE_REASON_SUPERSEDED) -> pb.MemoryFeedbackEntry:
    return entry(world.m1, STALE, stale_reason=reason, replacement_memory_id=replacement, reason="newer claim")


def test_rule_replacement_matches_retired_memory(server, stub, world):
    assert_rejected(
        server,
        stub,
        world,
        _stale_replaced_by(world, f" {world.m1} "),
        "replacement_matches_retired_memory",
        "replacement_memory_id",
    )
    assert_memory_untouched(stub, world, world.m1)


def test_rule_invalid_replacement_memory_id(server, stub, world):
    assert_rejected(
        server,
        stub,
        world,
        _stale_replaced_by(world, "sch_0"),
        "invalid_replacement_memory_id",
        "replacement_memory_id",
    )
    for bad in ("42", "sch_042", "SCH_1", "sch_1x", world.proc):
        rec = feedback(stub, world.rid, [_stale_replaced_by(world, bad)])
        assert rejected_tuples(rec) == [(MEMORY, world.m1, "invalid_replacement_memory_id", "replacement_memory_id")]
    assert_memory_untouched(stub, world, world.m1)


def test_rule_replacement_not_found(server, stub, world):
    assert_rejected(
        server, stub, world, _stale_replaced_by(world, "sch_999999"), "replacement_not_found", "replacement_memory_id"
    )
    assert_memory_untouched(stub, world, world.m1)


def test_rule_replacement_scope_mismatch(server, stub, world):
    assert_rejected(
        server,
        stub,
        world,
        _stale_replaced_by(world, world.foreign),
        "replacement_scope_mismatch",
        "replacement_memory_id",
    )
    assert_memory_untouched(stub, world, world.m1)


def test_rule_replacement_not_current(server, stub, world):
    assert_rejected(
        server,
        stub,
        world,
        _stale_replaced_by(world, world.retired),
        "replacement_not_current",
        "replacement_memory_id",
    )
    assert_memory_untouched(stub, world, world.m1)


def test_rule_replacement_validated_with_any_stale_reason(server, stub, world):
    # "A replacement is validated whenever present with STALE, whatever the reason."
    assert_rejected(
        server,
        stub,
        world,
        _stale_replaced_by(world, world.retired, pb.STALE_REASON_OUTDATED),
        "replacement_not_current",
        "replacement_memory_id",
    )


# ------------------------------------------------------------------------------------------ procedure table


def test_rule_target_not_exposed_procedure(server, stub, world):
    for not_exposed in ("proc_sess_000000000000", world.m1):
        rec = feedback(
            stub,
            world.rid,
            procedures=[proc_entry(not_exposed, pb.PROCEDURE_USE_USED, effect=res.EFFECT_HELPED, contribution="x")],
        )
        assert rejected_tuples(rec) == [(PROCEDURE, not_exposed, "target_not_exposed", "procedure_id")]
    assert_rejected(
        server,
        stub,
        world,
        proc_entry("proc_sess_000000000000", pb.PROCEDURE_USE_UNSPECIFIED),
        "target_not_exposed",
        "procedure_id",
        kind=PROCEDURE,
    )


def test_rule_invalid_procedure_use(server, stub, world):
    assert_rejected(
        server,
        stub,
        world,
        proc_entry(world.proc, pb.PROCEDURE_USE_UNSPECIFIED),
        "invalid_procedure_use",
        "use",
        kind=PROCEDURE,
    )
    rec = feedback(stub, world.rid, procedures=[proc_entry(world.proc, 9, effect=res.EFFECT_HELPED)])
    assert rejected_tuples(rec) == [(PROCEDURE, world.proc, "invalid_procedure_use", "use")]


def test_rule_invalid_procedure_effect(server, stub, world):
    assert_rejected(
        server,
        stub,
        world,
        proc_entry(world.proc, pb.PROCEDURE_USE_NOT_USED),
        "invalid_procedure_effect",
        "effect",
        kind=PROCEDURE,
    )
    for effect in (res.EFFECT_UNSPECIFIED, 31):
        rec = feedback(
            stub, world.rid, procedures=[proc_entry(world.proc, pb.PROCEDURE_USE_USED, effect=effect, contribution="x")]
        )
        assert rejected_tuples(rec) == [(PROCEDURE, world.proc, "invalid_procedure_effect", "effect")]


def test_rule_used_procedure_requires_contribution(server, stub, world):
    assert_rejected(
        server,
        stub,
        world,
        proc_entry(world.proc, pb.PROCEDURE_USE_USED, effect=res.EFFECT_HARMED, contribution=" "),
        "used_procedure_requires_contribution",
        "contribution",
        kind=PROCEDURE,
    )
    ev = procedure_of(later(stub, world), world.proc).evidence
    assert ev == res.ProcedureEvidence()  # rejected rows count for nothing


def test_rule_unassessable_requires_reason_procedure(server, stub, world):
    assert_rejected(
        server,
        stub,
        world,
        proc_entry(world.proc, pb.PROCEDURE_USE_UNASSESSABLE, effect=res.EFFECT_UNKNOWN),
        "unassessable_requires_reason",
        "reason",
        kind=PROCEDURE,
    )
    ok = feedback(
        stub,
        world.rid,
        procedures=[proc_entry(world.proc, pb.PROCEDURE_USE_UNASSESSABLE, effect=res.EFFECT_UNKNOWN, reason="forgot")],
    )
    assert not ok.rejected and not ok.outstanding.procedure_ids


def test_rule_any_effect_with_any_use_is_accepted(server, stub, world):
    entries = [
        proc_entry(world.proc, use, effect=effect, contribution="c", reason="r")
        for use in (pb.PROCEDURE_USE_USED, pb.PROCEDURE_USE_NOT_USED, pb.PROCEDURE_USE_UNASSESSABLE)
        for effect in (res.EFFECT_HELPED, res.EFFECT_NO_EFFECT, res.EFFECT_HARMED, res.EFFECT_UNKNOWN)
    ]
    rec = feedback(stub, world.rid, procedures=entries)
    assert not rec.rejected and len(rec.accepted_event_ids) == len(entries) + 1
    ev = procedure_of(later(stub, world), world.proc).evidence
    assert (ev.used, ev.helped, ev.not_used, ev.harmed) == (1, 1, 0, 0)  # only the first accepted row counts


# ------------------------------------------------------------------------------------------ retrieval level


def test_rule_incomplete_coverage(server, stub, world):
    rec = feedback(
        stub,
        world.rid,
        [entry(world.m1, pb.MEMORY_ASSESSMENT_UNSPECIFIED)],
        coverage=pb.COVERAGE_COMPLETE,
        retrieval_quality="kept for audit",
        missing=["audit gap"],
    )
    assert rejected_tuples(rec) == [
        (MEMORY, world.m1, "invalid_memory_assessment", "assessment"),
        (pb.TARGET_KIND_RETRIEVAL, world.rid, "incomplete_coverage", "coverage"),
    ]
    assert rec.coverage == pb.COVERAGE_PARTIAL and rec.requested_coverage == pb.COVERAGE_COMPLETE
    assert list(rec.outstanding.memory_ids) == [world.m1]
    others = [m for m in ids(world.act.memories) if m != world.m1]
    assert list(rec.implicitly_assessed.memory_ids) == others
    assert list(rec.implicitly_assessed.procedure_ids) == [world.proc]
    level = [r for r in ledger(server, world.rid) if r.target_kind == "retrieval"]
    assert [(r.accepted, r.rejection_reason, r.rejection_field, r.retrieval_quality) for r in level] == [
        (False, "incomplete_coverage", "coverage", "kept for audit")
    ]
    # The declaration succeeds once nothing is outstanding after the call.
    ok = feedback(stub, world.rid, [entry(world.m1, NOT_USED)], coverage=pb.COVERAGE_COMPLETE)
    assert ok.coverage == pb.COVERAGE_COMPLETE and not ok.rejected and not ok.implicitly_assessed.memory_ids
    assert quiet_commit(stub, world.act.session_id).operation == pb.COMMIT_OPERATION_CLOSED
