/**
 * One full cognitive cycle against a running Slowave server, from TypeScript: code generated from
 * the repository's protos by protoc-gen-es (buf.gen.yaml), called over the gRPC protocol with
 * connect-node's gRPC transport.
 *
 *     npm ci --prefix clients/ts && npm run --prefix clients/ts generate && npm run --prefix clients/ts build
 *     node clients/ts/dist/src/cycle.js [host:port]    # default: $SLOWAVE_ADDR, else 127.0.0.1:50051
 *
 * The steps and the transcript are those of clients/node/cycle.js: Activate → Remember → Commit; a
 * second Activate whose task contains the claim gets it back; a premature Commit is refused with
 * FAILED_PRECONDITION, and the `grpc-status-details-bin` trailer (a google.rpc.Status) is decoded
 * into its google.rpc.ErrorInfo and slowave.v1.IncompleteFeedback details; Feedback on exactly what
 * that detail lists; the identical Commit then succeeds. One JSON object per step, with protobuf
 * field names and full enum value names; `{"step": "error", ...}` and exit 1 on anything unexpected.
 *
 * Environment: SLOWAVE_ADDR, SLOWAVE_API_KEY (sent as `authorization: Bearer <key>`),
 * SLOWAVE_DEADLINE_MS (per call, default 30000).
 */
import { randomBytes } from "node:crypto";

import { fromBinary, type DescEnum, type MessageInitShape } from "@bufbuild/protobuf";
import { anyIs, anyUnpack } from "@bufbuild/protobuf/wkt";
import { base64Decode } from "@bufbuild/protobuf/wire";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";

import { ErrorInfoSchema } from "../gen/google/rpc/error_details_pb.js";
import { StatusSchema } from "../gen/google/rpc/status_pb.js";
import { IncompleteFeedbackSchema } from "../gen/slowave/v1/errors_pb.js";
import {
  CommitOperationSchema,
  Coverage,
  CoverageSchema,
  DispositionSchema,
  FeedbackStatusSchema,
  MemoryAssessment,
  MemoryService,
  TargetKindSchema,
  CommitRequestSchema,
  type TargetIds,
} from "../gen/slowave/v1/memory_service_pb.js";
import {
  Effect,
  MemoryStateSchema,
  MemoryType,
  Outcome,
  VerificationStatus,
} from "../gen/slowave/v1/resources_pb.js";

type Fields = Record<string, unknown>;

/** The full proto name of an enum value (`MEMORY_STATE_COLD_START`), as other languages print it. */
function enumName(schema: DescEnum, value: number): string {
  return schema.values.find((v) => v.number === value)?.name ?? String(value);
}

/** gRPC's canonical upper-case code names (Code.Canceled is CANCELLED on the wire). */
function codeName(code: Code): string {
  return code === Code.Canceled ? "CANCELLED" : Code[code].replace(/([a-z])([A-Z])/g, "$1_$2").toUpperCase();
}

function emit(step: string, fields: Fields): void {
  process.stdout.write(`${JSON.stringify({ step, ...fields })}\n`);
}

class StepFailed extends Error {
  constructor(readonly step: string, message: string, readonly extra: Fields = {}) {
    super(message);
  }
}

/** The google.rpc.Status a failed call carried in its `grpc-status-details-bin` trailer. */
function richStatus(err: ConnectError) {
  const bin = err.metadata.get("grpc-status-details-bin");
  return bin ? fromBinary(StatusSchema, base64Decode(bin)) : null;
}

function describeError(err: ConnectError): Fields {
  const status = richStatus(err);
  return {
    code: codeName(err.code),
    code_number: err.code,
    message: err.rawMessage,
    details: (status?.details ?? []).map((any) => ({ type: any.typeUrl.slice(any.typeUrl.lastIndexOf("/") + 1) })),
  };
}

function targets(t: TargetIds | undefined): Fields {
  return { memory_ids: t?.memoryIds ?? [], procedure_ids: t?.procedureIds ?? [] };
}

async function run(target: string, apiKey: string, deadlineMs: number): Promise<void> {
  const transport = createGrpcTransport({ baseUrl: `http://${target}` });
  const client = createClient(MemoryService, transport);
  const headers: Record<string, string> = apiKey ? { authorization: `Bearer ${apiKey}` } : {};
  const options = () => ({ timeoutMs: deadlineMs, headers });
  /** A call whose failure fails the named step with the decoded status. */
  async function step<T>(name: string, method: string, call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (e) {
      const err = ConnectError.from(e);
      throw new StepFailed(name, `${method} failed: ${codeName(err.code)} ${err.rawMessage}`, {
        error: describeError(err),
      });
    }
  }

  const scope = `project:ts-cycle-${randomBytes(4).toString("hex")}`;
  const claim = "The staging deploy listens on port 8443.";

  // 1. Activate: a session for the first task (the scope is new, so COLD_START).
  const first = await step("activate", "Activate", () =>
    client.activate(
      { task: "Find out why staging deploys time out", initialGoal: "Diagnose staging timeouts", scope },
      options(),
    ),
  );
  emit("activate", {
    target,
    scope,
    ...(apiKey ? { api_key: true } : {}),
    session_id: first.sessionId,
    retrieval_id: first.retrievalId,
    memory_state: enumName(MemoryStateSchema, first.memoryState),
    memory_ids: first.memories.map((m) => m.memoryId),
  });

  // 2. Remember a durable claim learned during the task.
  const remembered = await step("remember", "Remember", () =>
    client.remember({ sessionId: first.sessionId, scope, content: claim, type: MemoryType.FACT }, options()),
  );
  if (remembered.result.case !== "memory") {
    throw new StepFailed("remember", `unexpected result form ${remembered.result.case}`);
  }
  const stored = remembered.result.value;
  emit("remember", {
    memory_id: stored.memoryId,
    disposition: enumName(DispositionSchema, stored.disposition),
    content: claim,
  });

  // 3. Commit the first task (it exposed nothing, so no feedback is owed).
  const done = await step("commit", "Commit", () =>
    client.commit(
      {
        sessionId: first.sessionId,
        finalGoal: "Diagnose staging timeouts",
        outcome: Outcome.SUCCESS,
        outcomeSummary: "Staging timeouts came from probing the wrong port; the deploy listens on 8443.",
        verification: { status: VerificationStatus.VERIFIED, summary: "curl to :8443 answered 200." },
      },
      options(),
    ),
  );
  emit("commit", {
    session_id: done.sessionId,
    committed: done.committed,
    operation: enumName(CommitOperationSchema, done.operation),
    feedback_status: enumName(FeedbackStatusSchema, done.feedbackStatus),
  });

  // 4. A later task whose cue contains the claim gets it back, exposed for feedback.
  const second = await step("activate_again", "Activate", () =>
    client.activate(
      { task: `Configure the health check. ${claim}`, initialGoal: "Configure the health check", scope },
      options(),
    ),
  );
  emit("activate_again", {
    session_id: second.sessionId,
    retrieval_id: second.retrievalId,
    memory_state: enumName(MemoryStateSchema, second.memoryState),
    memories: second.memories.map((m) => ({ memory_id: m.memoryId, content: m.content, score: m.ranking?.score })),
    procedure_ids: second.procedures.map((p) => p.procedureId),
  });
  if (!second.memories.some((m) => m.memoryId === stored.memoryId)) {
    throw new StepFailed("activate_again", `the second Activate did not return ${stored.memoryId}`);
  }

  // 5. Commit before feedback: refused, and the status details say exactly what is owed.
  const commitRequest: MessageInitShape<typeof CommitRequestSchema> = {
    sessionId: second.sessionId,
    finalGoal: "Configure the health check",
    outcome: Outcome.SUCCESS,
    outcomeSummary: "The staging health check now probes port 8443.",
    verification: { status: VerificationStatus.VERIFIED, summary: "Probe is green." },
  };
  let refusal: ConnectError | null = null;
  try {
    await client.commit(commitRequest, options());
  } catch (e) {
    refusal = ConnectError.from(e);
  }
  if (refusal === null) throw new StepFailed("commit_refused", "the Commit before feedback succeeded");
  const status = richStatus(refusal);
  const details = status?.details ?? [];
  const info = details.filter((any) => anyIs(any, ErrorInfoSchema)).map((any) => anyUnpack(any, ErrorInfoSchema))[0];
  const incomplete = details
    .filter((any) => anyIs(any, IncompleteFeedbackSchema))
    .map((any) => anyUnpack(any, IncompleteFeedbackSchema))[0];
  emit("commit_refused", {
    code: codeName(refusal.code),
    code_number: refusal.code,
    message: refusal.rawMessage,
    status_code: status ? status.code : null,
    status_message: status ? status.message : null,
    detail_types: details.map((any) => any.typeUrl.slice(any.typeUrl.lastIndexOf("/") + 1)),
    error_info: info ? { reason: info.reason, domain: info.domain, metadata: info.metadata } : null,
    outstanding: incomplete
      ? incomplete.outstanding.map((o) => ({
          retrieval_id: o.retrievalId,
          memory_ids: o.memoryIds,
          procedure_ids: o.procedureIds,
        }))
      : null,
  });
  if (refusal.code !== Code.FailedPrecondition || !incomplete || !info) {
    throw new StepFailed("commit_refused", "expected FAILED_PRECONDITION with ErrorInfo and IncompleteFeedback", {
      error: describeError(refusal),
    });
  }

  // 6. Feedback on every retrieval the detail lists: the claim was used and helped; COMPLETE
  //    coverage assesses the other listed targets implicitly (neutral).
  for (const pending of incomplete.outstanding) {
    const response = await step("feedback", "Feedback", () =>
      client.feedback(
        {
          retrievalId: pending.retrievalId,
          coverage: Coverage.COMPLETE,
          memoryFeedback: pending.memoryIds
            .filter((id) => id === stored.memoryId)
            .map((id) => ({ memoryId: id, assessment: MemoryAssessment.USED, effect: Effect.HELPED })),
        },
        options(),
      ),
    );
    if (response.result.case !== "record") throw new StepFailed("feedback", "unexpected result form");
    const record = response.result.value;
    emit("feedback", {
      retrieval_id: record.retrievalId,
      coverage: enumName(CoverageSchema, record.coverage),
      strengthened: record.applied?.strengthened ?? [],
      implicitly_assessed: targets(record.implicitlyAssessed),
      outstanding: targets(record.outstanding),
      rejected: record.rejected.map((r) => ({
        target_kind: enumName(TargetKindSchema, r.targetKind),
        target_id: r.targetId,
      })),
    });
  }

  // 7. The identical Commit now succeeds.
  const closed = await step("commit_again", "Commit", () => client.commit(commitRequest, options()));
  emit("commit_again", {
    session_id: closed.sessionId,
    committed: closed.committed,
    operation: enumName(CommitOperationSchema, closed.operation),
    feedback_status: enumName(FeedbackStatusSchema, closed.feedbackStatus),
  });
}

const target = process.argv[2] || process.env.SLOWAVE_ADDR || "127.0.0.1:50051";
run(target, process.env.SLOWAVE_API_KEY || "", Number(process.env.SLOWAVE_DEADLINE_MS || 30000)).catch(
  (err: unknown) => {
    const failure =
      err instanceof StepFailed
        ? { failed_step: err.step, message: err.message, ...err.extra }
        : { failed_step: null, message: String(err instanceof Error ? err.stack : err) };
    emit("error", failure);
    process.stderr.write(`cycle failed: ${failure.message}\n`);
    process.exitCode = 1;
  },
);
