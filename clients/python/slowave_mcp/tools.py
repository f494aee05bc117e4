"""What an agent reads about each tool: its description and its input JSON Schema.

The schemas are derived from the request descriptors (field names, JSON types, enum words, nesting),
so they cannot drift from the `.proto` files; the prose below is written for the agent, after the
seed documents.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import struct_pb2, timestamp_pb2
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from slowave_client.values import enum_words
from slowave_mcp.json_contract import TOOLS

INSTRUCTIONS = """\
Slowave is your long-term memory. It learns from your feedback. Run one cycle per task:
1. slowave_activate once, first: it opens a session and returns the memories and procedures that fit the task.
2. slowave_remember any durable, standalone claim worth keeping for future tasks; slowave_recall to look
   something up mid-task.
3. slowave_feedback on everything a retrieval returned (each retrieval_id): used, irrelevant or stale for
   memories; use and effect for procedures. Honest feedback changes what later tasks get.
4. slowave_commit once, last, with the verified outcome. It is refused (code incomplete_feedback, with the
   outstanding ids) until every returned memory and procedure has feedback.
Every result is {"ok": true, "data": ...} or {"ok": false, "error": {"code", "message", "retryable", ...}};
identifiers are opaque: echo them unchanged."""

DESCRIPTIONS = {
    "slowave_activate": """\
Start a task: opens a new Slowave session and returns the memories (standalone claims) and procedures
(reusable methods) relevant to it, best first. Call it once, at the beginning of every task, with the
user's request verbatim as `task`.

Keep from the result: `session_id` (for slowave_remember, slowave_recall, slowave_commit), `retrieval_id`
(for slowave_feedback) and `continuity_id` (send it on the next slowave_activate of this conversation).
Everything returned in `memories` and `procedures` is exposed: each needs an assessment with
slowave_feedback before slowave_commit will succeed. `more_available` with `continue_from` means further
pages exist (read them with slowave_recall `continue_from` only if you need them; unread pages need no
feedback). `warnings` are advisory (e.g. `failed_procedure`, `known_gap`, `scope_fragmentation`,
`conflicting_memories`: two memories of the page look like two versions of one fact).""",
    "slowave_remember": """\
Store durable, standalone claims in the session's scope so future tasks can retrieve them: facts,
decisions, constraints, preferences, lessons, warnings. Write each claim so it is meaningful without this
conversation (name the thing, the value and the reason). Remembered claims are not exposed and need no
feedback.

Scalar form: `content` + `type` (+ optional `occurred_at`). Batch form: `memories`, a list of up to 100
{content, type, occurred_at?} objects; the result is {"results": [{"index", "ok", "data" | "error"}]}, each
item stored or failed on its own. `data.disposition` is `created`, or `matched` when an equivalent claim
already existed (its memory_id is returned). To correct an outdated memory: remember the corrected claim,
then assess the old one `stale` / `superseded` with `replacement_memory_id` = the new id. A created claim
also lists `possibly_supersedes`: active memories that look like an older version of the same fact (same
wording, another value); check each and retire those that no longer hold that way. `similar` lists
memories saying nearly the same thing. Both are hints only: nothing is retired for you.""",
    "slowave_recall": """\
Look something up in the middle of a task (`query`), or read the next page of an earlier result
(`continue_from`); the two modes are exclusive.

A fresh query creates a new retrieval (a new `rec_…` `retrieval_id`) whose memories and procedures need
slowave_feedback like those of slowave_activate. A continuation page keeps the originating `retrieval_id`:
its items join that retrieval and are assessed under it. `evidence` lists source records behind the first
page (never feedback targets); `evidence_mode: full` includes their text.""",
    "slowave_feedback": """\
Record what actually happened with the memories and procedures a retrieval returned. Every memory and
procedure exposed by slowave_activate or slowave_recall must be assessed before slowave_commit succeeds.
Feedback is append-only evidence that changes future retrievals; it cannot be retracted. The task outcome
does not belong here (slowave_commit owns it).

Scalar form: `retrieval_id` plus `memory_feedback` / `procedure_feedback` (and optional
`retrieval_quality`, `missing`, `coverage`). Batch form: `items`, a list of scalar-shaped objects (one per
retrieval); then omit every scalar field and leave top-level `coverage` at its default.

Memories: `used` (it directly shaped what you did), `irrelevant` (no bearing on this task), `stale` (no
longer accurate; needs `stale_reason` and `reason`, and `replacement_memory_id` for `superseded`).
Procedures: `use` (used / not_used) and `effect` (helped / no_effect / harmed / unknown) are separate
signals; `contribution` is required when used. `coverage: complete` declares you reviewed every exposed
target: unmentioned ones count as assessed (neutrally). Use it only when genuinely true.

Example: {"retrieval_id": "ctx_…", "memory_feedback": [{"memory_id": "sch_42", "assessment": "used"},
{"memory_id": "sch_17", "assessment": "irrelevant"}], "coverage": "complete"}

The result is the stored record: check `rejected` (entries refused, with `reason` and `field`) and
`outstanding` (targets still needing feedback). Batch: {"results": [{"ok", "data" | "error"}]}.""",
    "slowave_commit": """\
Close the task: record the verified outcome, optionally capture a reusable procedure and a trajectory.
Call it once, at the end of every task that began with slowave_activate.

It is refused with {"ok": false, "error": {"code": "incomplete_feedback", "retryable": true,
"outstanding": [{"retrieval_id", "memory_ids", "procedure_ids"}]}} while any returned memory or procedure
lacks feedback: submit slowave_feedback for each outstanding item, then retry the identical commit.

`outcome_summary` is surfaced to future tasks: make it a standalone sentence. Include `procedure` only for a
clear, repeatable sequence of steps you genuinely followed that would help a later task in this scope.
`trajectory` narrates your task's actions and observations (at most 32 entries), never Slowave calls
("Called slowave_recall", "Committed the session"): those are filtered out and counted in
`trajectory_lifecycle_filtered`.""",
}

_FIELD_DOCS = {
    "ActivateRequest.task": "The user's request, verbatim; it is the retrieval cue. Nonblank, at most 4096 bytes.",
    "ActivateRequest.initial_goal": "A concise, action-led interpretation of the task. Nonblank, at most 4096 bytes.",
    "ActivateRequest.scope": (
        "Where the memories live, `kind:id`, e.g. `project:<repository name>` for coding work. "
        "Use the same scope for the whole session; scopes compare exactly (case-sensitive)."
    ),
    "ActivateRequest.page_size": "Maximum memories per page, 1..10 (default 5).",
    "ActivateRequest.continuity_id": (
        "The `continuity_id` returned by the previous slowave_activate of this "
        "conversation; omit it on the conversation's first activation."
    ),
    "ActivateRequest.task_context": (
        "Structured conditions of the task (environment, language, framework, tools…), "
        "used to pick applicable procedures. Keys lowercase `[a-z][a-z0-9_.:-]*`; values "
        "strings, numbers, booleans, objects or lists of scalars; no nulls."
    ),
    "ActivateRequest.semantic_context": "Optional clarification of the information need, added to the cue.",
    "RememberRequest.session_id": "The `session_id` returned by slowave_activate.",
    "RememberRequest.scope": "The session's scope, exactly as sent to slowave_activate.",
    "RememberRequest.content": "Scalar form: one durable claim, meaningful without context (at most 16384 bytes).",
    "RememberRequest.type": "Scalar form: the kind of claim.",
    "RememberRequest.occurred_at": (
        "Scalar form only: when the fact was observed at its source, RFC 3339 with an "
        "offset, e.g. 2026-08-20T09:30:00Z."
    ),
    "RememberRequest.memories": "Batch form, instead of content/type: up to 100 claims, each stored independently.",
    "RememberItem.content": "One durable claim, meaningful without context.",
    "RememberItem.type": "The kind of claim.",
    "RememberItem.occurred_at": "Optional: when the fact was observed, RFC 3339 with an offset.",
    "RecallRequest.session_id": "The `session_id` returned by slowave_activate.",
    "RecallRequest.scope": "The session's scope, exactly as sent to slowave_activate.",
    "RecallRequest.query": "Fresh mode: what you need to know now. Nonblank, at most 4096 bytes.",
    "RecallRequest.page_size": "Fresh mode only: maximum memories per page, 1..10 (default 5).",
    "RecallRequest.task_context": "Fresh mode only: merged into the session's task context (top-level keys overwrite).",
    "RecallRequest.semantic_context": "Fresh mode only: added to the query.",
    "RecallRequest.evidence_mode": "Fresh mode only: `full` also returns the text of the evidence records (default `references`).",
    "RecallRequest.continue_from": (
        "Continuation mode, instead of query: a `continue_from` cursor from an earlier "
        "slowave_activate or slowave_recall result."
    ),
    "FeedbackRequest.retrieval_id": "Scalar form: the `retrieval_id` returned by slowave_activate or slowave_recall.",
    "FeedbackRequest.items": (
        "Batch form: up to 100 scalar-shaped feedback objects, one per retrieval. Exclusive "
        "with every scalar field; top-level coverage must stay partial."
    ),
    "FeedbackItem.retrieval_id": "The `retrieval_id` returned by slowave_activate or slowave_recall.",
    "MemoryFeedbackEntry.memory_id": "The `sch_N` id from the `memories` array of that retrieval.",
    "MemoryFeedbackEntry.assessment": (
        "used: directly consulted, it shaped what you did. irrelevant: no bearing on this "
        "task. stale: no longer accurate (needs stale_reason and reason; retires the "
        "memory). Neutral: not_used, unassessable (needs reason), already_known."
    ),
    "MemoryFeedbackEntry.stale_reason": "Required with stale. superseded also needs replacement_memory_id.",
    "MemoryFeedbackEntry.replacement_memory_id": "With stale + superseded: the `sch_N` id of the memory that replaces this one.",
    "MemoryFeedbackEntry.reason": "Required with stale and unassessable: a concise explanation in your own words.",
    "MemoryFeedbackEntry.relevance": "Optional, stored only: whether the memory was on topic.",
    "MemoryFeedbackEntry.effect": "Optional. With used: helped (default), no_effect or harmed. Otherwise omit it or send unknown.",
    "ProcedureFeedbackEntry.procedure_id": "The procedure id from the `procedures` array of that retrieval.",
    "ProcedureFeedbackEntry.use": "used: followed or referenced. not_used: retrieved but not applied. unassessable: needs reason.",
    "ProcedureFeedbackEntry.effect": "Required: the observed effect of the procedure on the task.",
    "ProcedureFeedbackEntry.contribution": "Required when use is used: how the procedure contributed.",
    "ProcedureFeedbackEntry.reason": "Optional explanation (required with unassessable), useful for harmed or no_effect.",
    "CommitRequest.session_id": "The `session_id` returned by slowave_activate.",
    "CommitRequest.final_goal": "The confirmed goal, as understood after the work (may refine initial_goal). Nonblank.",
    "CommitRequest.outcome": "success: completed as intended. partial: partly completed. failure: not completed.",
    "CommitRequest.outcome_summary": (
        "A standalone sentence on what actually happened; future tasks will see it. Nonblank."
    ),
    "CommitRequest.verification": "How the outcome was verified.",
    "CommitRequest.procedure": (
        "Optional reusable method you genuinely followed. Needs a summary or at least one step."
    ),
    "CommitRequest.trajectory": (
        "Optional trace of the task's actions and observations, at most 32 entries. Never "
        "narrate Slowave calls: such entries are filtered out."
    ),
    "Verification.status": "verified: confirmed by observation or tests. partially_verified. unverified: none possible.",
    "Verification.summary": "What verification was done and what it showed. Nonblank.",
    "Verification.evidence_refs": "Optional references: test-run ids, CI build URLs, log files.",
    "CommitProcedure.goal": "The objective the procedure accomplishes (default: final_goal).",
    "CommitProcedure.summary": "A concise description of the approach.",
    "CommitProcedure.context": "When it applies: environment, language, framework, tool versions.",
    "CommitProcedure.steps": "The steps that were executed, in order.",
    "CommitProcedure.caveats": "Safety notes, known failure modes, conditions under which not to use it.",
    "TrajectoryEntry.kind": "action: something you did. observation: something you observed as a result.",
    "TrajectoryEntry.summary": "One step of the task, nonblank, at most 1000 characters.",
    "TrajectoryEntry.status": "The outcome of this step (default unknown).",
}
# The scalar feedback fields mean the same in a batch item.
_FEEDBACK_FIELD_DOCS = {
    "memory_feedback": "Per-memory assessments (at most 200).",
    "procedure_feedback": "Per-procedure assessments (at most 200); usage and effect are separate signals.",
    "retrieval_quality": "Optional free-text assessment of the retrieval as a whole.",
    "missing": "Optional: knowledge you expected but the retrieval did not return.",
    "coverage": (
        "partial (default): only the listed targets are assessed; the rest stay outstanding. complete: "
        "you reviewed every exposed target; unmentioned ones count as assessed (neutrally)."
    ),
}
for _message in ("FeedbackRequest", "FeedbackItem"):
    _FIELD_DOCS.update({f"{_message}.{f}": doc for f, doc in _FEEDBACK_FIELD_DOCS.items()})

_REQUIRED = {
    "ActivateRequest": ["task", "initial_goal", "scope"],
    "RememberRequest": ["session_id", "scope"],
    "RememberItem": ["content", "type"],
    "RecallRequest": ["session_id", "scope"],
    "FeedbackItem": ["retrieval_id"],
    "MemoryFeedbackEntry": ["memory_id", "assessment"],
    "ProcedureFeedbackEntry": ["procedure_id", "use", "effect"],
    "CommitRequest": ["session_id", "final_goal", "outcome", "outcome_summary", "verification"],
    "Verification": ["status", "summary"],
    "TrajectoryEntry": ["kind", "summary"],
}

_LIMITS = {
    "ActivateRequest.page_size": {"minimum": 1, "maximum": 10},
    "RecallRequest.page_size": {"minimum": 1, "maximum": 10},
    "RememberRequest.memories": {"maxItems": 100},
    "FeedbackRequest.items": {"maxItems": 100},
    "CommitRequest.trajectory": {"maxItems": 32},
}


def input_schema(tool_name: str) -> dict[str, Any]:
    return _object_schema(TOOLS[tool_name].request.DESCRIPTOR)


def _object_schema(descriptor: Descriptor) -> dict[str, Any]:
    properties = {}
    for fd in descriptor.fields:
        key = f"{descriptor.name}.{fd.name}"
        schema = {"type": "array", "items": _element_schema(fd)} if fd.is_repeated else _element_schema(fd)
        schema.update(_LIMITS.get(key, {}))
        if key in _FIELD_DOCS:
            schema["description"] = _FIELD_DOCS[key]
        properties[fd.name] = schema
    schema = {"type": "object", "properties": properties, "additionalProperties": False}
    if descriptor.name in _REQUIRED:
        schema["required"] = _REQUIRED[descriptor.name]
    return schema


def _element_schema(fd: FieldDescriptor) -> dict[str, Any]:
    if fd.cpp_type == FieldDescriptor.CPPTYPE_MESSAGE:
        if fd.message_type.full_name == timestamp_pb2.Timestamp.DESCRIPTOR.full_name:
            return {"type": "string", "format": "date-time"}
        if fd.message_type.full_name == struct_pb2.Struct.DESCRIPTOR.full_name:
            return {"type": "object"}
        return _object_schema(fd.message_type)
    if fd.cpp_type == FieldDescriptor.CPPTYPE_ENUM:
        return {"type": "string", "enum": list(enum_words(fd.enum_type))}
    if fd.cpp_type == FieldDescriptor.CPPTYPE_STRING:
        return {"type": "string"}
    if fd.cpp_type == FieldDescriptor.CPPTYPE_BOOL:
        return {"type": "boolean"}
    if fd.cpp_type in (FieldDescriptor.CPPTYPE_DOUBLE, FieldDescriptor.CPPTYPE_FLOAT):
        return {"type": "number"}
    return {"type": "integer"}
