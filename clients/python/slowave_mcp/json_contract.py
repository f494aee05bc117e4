"""The JSON bridge of behaviour §4.6: one tool call in the seed's JSON shapes ↔ one MemoryService RPC.

Pure translation, no MCP and no network: `execute(tool, arguments, invoke)` validates and converts
the arguments, calls `invoke(rpc_name, request)` (which returns the response or raises
`grpc.RpcError`) at most once, and returns the seed envelope `{"ok": true, "data": …}` or
`{"ok": false, "error": {…}}`.

Batch forms (`slowave_feedback` `items`, `slowave_remember` `memories`): a translation problem
inside one item fails only that item, as the service does for an item breaking its own rules: the
item is not sent and is reported at its position, merged with the results of the items that were
sent; if no item remains, no RPC is made. Problems of the call as a whole fail the whole call, with
the item problems listed alongside.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf.message import Message

from slowave.v1 import memory_service_pb2 as pb
from slowave_mcp.json_to_proto import Problem, fill_message
from slowave_mcp.proto_to_json import error, render_message, render_rpc_error

BATCH_LIMIT = 100
_FEEDBACK_SCALAR_KEYS = ("retrieval_id", "memory_feedback", "procedure_feedback", "retrieval_quality", "missing")

Invoke = Callable[[str, Message], Message]


@dataclass(frozen=True)
class Tool:
    name: str
    rpc: str  # the MemoryService method
    request: type[Message]
    batch_key: str | None = None  # the list whose items fail one by one
    batch_item: type[Message] | None = None


TOOLS: dict[str, Tool] = {
    t.name: t
    for t in (
        Tool("slowave_activate", "Activate", pb.ActivateRequest),
        Tool("slowave_remember", "Remember", pb.RememberRequest, "memories", pb.RememberItem),
        Tool("slowave_recall", "Recall", pb.RecallRequest),
        Tool("slowave_feedback", "Feedback", pb.FeedbackRequest, "items", pb.FeedbackItem),
        Tool("slowave_commit", "Commit", pb.CommitRequest),
    )
}


@dataclass
class Translation:
    """What one tool call becomes before anything is sent."""

    tool: Tool
    request: Message
    whole: list[Problem] = field(default_factory=list)  # fail the call as a whole
    item_problems: dict[int, list[Problem]] = field(default_factory=dict)  # batch position → problems
    sent: list[int] = field(default_factory=list)  # batch positions sent, in request order
    batch_size: int = 0  # items in the JSON batch (0: scalar form, or an empty list)

    @property
    def nothing_to_send(self) -> bool:
        return self.batch_size > 0 and not self.sent


def translate(tool_name: str, arguments: Mapping[str, Any] | None) -> Translation:
    tool = TOOLS[tool_name]
    t = Translation(tool, tool.request())
    if arguments is not None and not isinstance(arguments, Mapping):
        t.whole.append(Problem("", "the arguments must be a JSON object"))
        return t
    args = dict(arguments or {})
    skip = frozenset({tool.batch_key}) if tool.batch_key else frozenset()
    fill_message(t.request, args, "", t.whole, skip=skip)
    if tool.batch_key and tool.batch_key in args:
        _translate_batch(t, args[tool.batch_key])
        _form_rules(t, args)
    return t


def _translate_batch(t: Translation, items: Any) -> None:
    key = t.tool.batch_key
    assert key is not None and t.tool.batch_item is not None
    if items is None:
        t.whole.append(Problem(key, "must not be null"))
        return
    if not isinstance(items, list):
        t.whole.append(Problem(key, "must be an array"))
        return
    t.batch_size = len(items)
    if len(items) > BATCH_LIMIT:
        # Checked here, not left to the service: dropping failed items would change the count it sees.
        t.whole.append(Problem(key, f"must have at most {BATCH_LIMIT} entries"))
    target = getattr(t.request, key)
    for i, item in enumerate(items):
        problems: list[Problem] = []
        message = t.tool.batch_item()
        if item is None:
            problems.append(Problem(f"{key}[{i}]", "must not be null"))
        else:
            fill_message(message, item, f"{key}[{i}]", problems)
        if problems:
            t.item_problems[i] = problems
        else:
            target.append(message)
            t.sent.append(i)


def _form_rules(t: Translation, args: dict[str, Any]) -> None:
    """The batch form rules (6.1, 8.1, 8.3), with the service's paths.

    Needed in the bridge because protobuf lists carry no presence (`"items": []` beside a
    `retrieval_id` would otherwise pass as the scalar form), and because a batch whose every item
    failed translation is never sent, so the service cannot check them.
    """
    if t.tool.name == "slowave_feedback":
        present = [k for k in _FEEDBACK_SCALAR_KEYS if k in args]
        t.whole.extend(Problem(k, "the scalar feedback fields and `items` are exclusive") for k in present)
        if args.get("coverage") == "complete" and (present or t.batch_size):
            t.whole.append(Problem("coverage", "must stay at its default (partial) with `items`"))
    elif t.tool.name == "slowave_remember" and t.batch_size:
        if "content" in args or "type" in args:
            t.whole.extend(Problem(k, "the scalar fields and `memories` are exclusive") for k in ("content", "type"))
        elif "occurred_at" in args:
            t.whole.append(Problem("occurred_at", "is for the scalar form; set it on each item of `memories`"))


def execute(tool_name: str, arguments: Mapping[str, Any] | None, invoke: Invoke) -> dict[str, Any]:
    """One tool call, end to end: the seed envelope for `arguments`."""
    if tool_name not in TOOLS:
        raise KeyError(tool_name)
    t = translate(tool_name, arguments)
    if t.whole:
        problems = t.whole + _flat_item_problems(t)
        return error(
            "invalid_input",
            "invalid input: " + ", ".join(p.path or "<request>" for p in t.whole),
            False,
            field_errors=[{"path": p.path, "message": p.message} for p in problems],
        )
    if t.nothing_to_send:
        return {"ok": True, "data": {"results": _merge(t, [])}}
    try:
        response = invoke(t.tool.rpc, t.request)
    except grpc.RpcError as err:
        envelope = render_rpc_error(err)
        if "field_errors" in envelope["error"]:
            envelope["error"]["field_errors"] += [
                {"path": p.path, "message": p.message} for p in _flat_item_problems(t)
            ]
        return envelope
    return render_success(t, response)


def render_success(t: Translation, response: Message) -> dict[str, Any]:
    """`data` is the response as JSON, except the Feedback and Remember forms (4.6): the scalar form
    is the record itself, the batch form `{"results": [{"ok", "data" | "error"}…]}`."""
    if t.tool.batch_key is None:
        return {"ok": True, "data": render_message(response)}
    which = response.WhichOneof("result")
    if which in ("record", "memory"):
        return {"ok": True, "data": render_message(getattr(response, which))}
    if which == "batch":
        results = list(response.batch.results)
        if len(results) != len(t.sent):
            return error("internal_error", f"the service answered {len(results)} results for {len(t.sent)} items", True)
        return {"ok": True, "data": {"results": _merge(t, results)}}
    return error("internal_error", "the service answered without a result", True)


def _merge(t: Translation, results: list[Message]) -> list[dict[str, Any]]:
    """Service results and bridge item failures, back at their positions in the agent's list."""
    merged: dict[int, dict[str, Any]] = {}
    for i, problems in t.item_problems.items():
        merged[i] = error("invalid_input", _item_message(problems), False)
    for position, result in zip(t.sent, results):
        which = result.WhichOneof("result")
        if which == "data":
            merged[position] = {"ok": True, "data": render_message(result.data)}
        else:
            e = result.error
            merged[position] = error(e.code, e.message, e.retryable)
    out = []
    for i in range(t.batch_size):
        entry = merged[i]
        if t.tool.name == "slowave_remember":
            entry = {"index": i, **entry}
        out.append(entry)
    return out


def _item_message(problems: list[Problem]) -> str:
    return "invalid item: " + "; ".join(f"{p.path}: {p.message}" for p in problems)


def _flat_item_problems(t: Translation) -> list[Problem]:
    return [p for i in sorted(t.item_problems) for p in t.item_problems[i]]
