'use strict';
/**
 * One full cognitive cycle against a running Slowave server, from Node.js (no build step).
 *
 *     npm ci --prefix clients/node              # once: the pinned dependencies of package-lock.json
 *     node clients/node/cycle.js [host:port]    # default: $SLOWAVE_ADDR, else 127.0.0.1:50051
 *
 * Activate → Remember → Commit; a second Activate whose task contains the claim gets it back; a
 * premature Commit is refused with FAILED_PRECONDITION, and the `grpc-status-details-bin` trailer
 * (a `google.rpc.Status`) is decoded into its `google.rpc.ErrorInfo` and
 * `slowave.v1.IncompleteFeedback` details; Feedback on exactly what that detail lists; the identical
 * Commit then succeeds.
 *
 * Prints one JSON object per step on its own line (`{"step": "activate", ...}`); on any unexpected
 * result it prints `{"step": "error", ...}` and exits 1.
 *
 * Environment: SLOWAVE_ADDR (target when no argument is given), SLOWAVE_API_KEY (sent as
 * `authorization: Bearer <key>` metadata on every call), SLOWAVE_DEADLINE_MS (per call, default 30000).
 *
 * Field names: the protos are loaded with `keepCase: true`, so requests and responses use the
 * protobuf field names exactly as written in `protos/slowave/v1/*.proto` (`session_id`, not
 * `sessionId`), the same names the contract and its JSON bridge use. Enums are read and written as
 * their full value names (`MEMORY_TYPE_FACT`).
 */
const crypto = require('crypto');
const fs = require('fs');
const path = require('path');

const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');
const protobuf = require('protobufjs');
const googleProtoFiles = require('google-proto-files');

// The contract, straight from the repository; google/rpc/*.proto from the google-proto-files
// package (neither grpc-js, proto-loader nor protobufjs ships them). google/protobuf/*.proto
// (Struct, Timestamp, Any, Duration) are protobufjs's bundled well-known types.
const CONTRACT_DIR = path.resolve(__dirname, '..', '..', 'protos');
const GOOGLE_DIR = path.dirname(googleProtoFiles.getProtoPath());

const packageDefinition = protoLoader.loadSync('slowave/v1/memory_service.proto', {
  includeDirs: [CONTRACT_DIR],
  keepCase: true, // protobuf field names as written in the .proto files
  enums: String, // enum values as names
  longs: String,
  defaults: true, // every non-optional scalar and every list present in responses
  oneofs: true, // `result` names the member of a oneof that is set
});
const { MemoryService } = grpc.loadPackageDefinition(packageDefinition).slowave.v1;

// protobufjs types for the status details, loaded from the same kind of .proto sources.
const detailRoot = new protobuf.Root();
detailRoot.resolvePath = (_origin, target) => {
  for (const dir of [CONTRACT_DIR, GOOGLE_DIR]) {
    const candidate = path.join(dir, target);
    if (fs.existsSync(candidate)) return candidate;
  }
  return target; // protobufjs falls back to its bundled google/protobuf types
};
detailRoot.loadSync(['google/rpc/status.proto', 'google/rpc/error_details.proto', 'slowave/v1/errors.proto'],
  { keepCase: true });
const Status = detailRoot.lookupType('google.rpc.Status');
const TO_OBJECT = { enums: String, longs: String, defaults: true, arrays: true };

/**
 * The `google.rpc.Status` of a failed call, from its `grpc-status-details-bin` trailer, with every
 * detail unpacked by its type URL (`type.googleapis.com/google.rpc.ErrorInfo` → ErrorInfo).
 * Unknown detail types are kept as `{type, value: null}`. Returns null when there is no trailer.
 */
function richStatus(err) {
  const [bin] = err && err.metadata ? err.metadata.get('grpc-status-details-bin') : [];
  if (!bin) return null;
  const status = Status.decode(bin);
  return {
    code: status.code,
    message: status.message,
    details: status.details.map((any) => {
      const type = any.type_url.slice(any.type_url.lastIndexOf('/') + 1);
      let T = null;
      try {
        T = detailRoot.lookupType(type);
      } catch (_unknown) {
        T = null;
      }
      return { type, value: T ? T.toObject(T.decode(any.value), TO_OBJECT) : null };
    }),
  };
}

function detail(status, type) {
  const found = status ? status.details.find((d) => d.type === type) : undefined;
  return found ? found.value : null;
}

function describeError(err) {
  const status = richStatus(err);
  return {
    code: grpc.status[err.code] || String(err.code),
    code_number: err.code,
    message: err.details,
    details: status ? status.details : [],
  };
}

class StepFailed extends Error {
  constructor(step, message, extra) {
    super(message);
    this.step = step;
    this.extra = extra || {};
  }
}

function emit(step, fields) {
  process.stdout.write(`${JSON.stringify({ step, ...fields })}\n`);
}

function main() {
  const target = process.argv[2] || process.env.SLOWAVE_ADDR || '127.0.0.1:50051';
  const apiKey = process.env.SLOWAVE_API_KEY || '';
  const deadlineMs = Number(process.env.SLOWAVE_DEADLINE_MS || 30000);
  const client = new MemoryService(target, grpc.credentials.createInsecure());

  /** A unary call as a promise; every call carries the API key when one is configured. */
  const rpc = (method, request) => new Promise((resolve, reject) => {
    const metadata = new grpc.Metadata();
    if (apiKey) metadata.set('authorization', `Bearer ${apiKey}`);
    client[method](request, metadata, { deadline: Date.now() + deadlineMs }, (err, response) => {
      if (err) reject(err);
      else resolve(response);
    });
  });
  /** Like rpc(), but an error fails the named step with the decoded status. */
  const step = (name, method, request) => rpc(method, request).catch((err) => {
    throw new StepFailed(name, `${method} failed: ${grpc.status[err.code]} ${err.details}`, { error: describeError(err) });
  });

  const scope = `project:node-cycle-${crypto.randomBytes(4).toString('hex')}`;
  const claim = 'The staging deploy listens on port 8443.';
  const apiKeyNote = apiKey ? { api_key: true } : {};

  const run = async () => {
    // 1. Activate: a session for the first task (the scope is new, so COLD_START).
    const first = await step('activate', 'Activate', {
      task: 'Find out why staging deploys time out', initial_goal: 'Diagnose staging timeouts', scope,
    });
    emit('activate', {
      target, scope, ...apiKeyNote, session_id: first.session_id, retrieval_id: first.retrieval_id,
      memory_state: first.memory_state, memory_ids: first.memories.map((m) => m.memory_id),
    });

    // 2. Remember a durable claim learned during the task.
    const remembered = await step('remember', 'Remember', {
      session_id: first.session_id, scope, content: claim, type: 'MEMORY_TYPE_FACT',
    });
    if (remembered.result !== 'memory') throw new StepFailed('remember', `unexpected result form ${remembered.result}`);
    const stored = remembered.memory;
    emit('remember', { memory_id: stored.memory_id, disposition: stored.disposition, content: claim });

    // 3. Commit the first task (it exposed nothing, so no feedback is owed).
    const done = await step('commit', 'Commit', {
      session_id: first.session_id, final_goal: 'Diagnose staging timeouts', outcome: 'OUTCOME_SUCCESS',
      outcome_summary: 'Staging timeouts came from probing the wrong port; the deploy listens on 8443.',
      verification: { status: 'VERIFICATION_STATUS_VERIFIED', summary: 'curl to :8443 answered 200.' },
    });
    emit('commit', {
      session_id: done.session_id, committed: done.committed, operation: done.operation,
      feedback_status: done.feedback_status,
    });

    // 4. A later task whose cue contains the claim gets it back, exposed for feedback.
    const second = await step('activate_again', 'Activate', {
      task: `Configure the health check. ${claim}`, initial_goal: 'Configure the health check', scope,
    });
    emit('activate_again', {
      session_id: second.session_id, retrieval_id: second.retrieval_id, memory_state: second.memory_state,
      memories: second.memories.map((m) => ({ memory_id: m.memory_id, content: m.content, score: m.ranking.score })),
      procedure_ids: second.procedures.map((p) => p.procedure_id),
    });
    if (!second.memories.some((m) => m.memory_id === stored.memory_id)) {
      throw new StepFailed('activate_again', `the second Activate did not return ${stored.memory_id}`);
    }

    // 5. Commit before feedback: refused, and the status details say exactly what is owed.
    const commitRequest = {
      session_id: second.session_id, final_goal: 'Configure the health check', outcome: 'OUTCOME_SUCCESS',
      outcome_summary: 'The staging health check now probes port 8443.',
      verification: { status: 'VERIFICATION_STATUS_VERIFIED', summary: 'Probe is green.' },
    };
    let refusal = null;
    try {
      await rpc('Commit', commitRequest);
    } catch (err) {
      refusal = err;
    }
    if (refusal === null) throw new StepFailed('commit_refused', 'the Commit before feedback succeeded');
    const status = richStatus(refusal);
    const errorInfo = detail(status, 'google.rpc.ErrorInfo');
    const owed = detail(status, 'slowave.v1.IncompleteFeedback');
    emit('commit_refused', {
      code: grpc.status[refusal.code], code_number: refusal.code, message: refusal.details,
      status_code: status ? status.code : null, status_message: status ? status.message : null,
      detail_types: status ? status.details.map((d) => d.type) : [],
      error_info: errorInfo, outstanding: owed ? owed.outstanding : null,
    });
    if (refusal.code !== grpc.status.FAILED_PRECONDITION || owed === null || errorInfo === null) {
      throw new StepFailed('commit_refused', 'expected FAILED_PRECONDITION with ErrorInfo and IncompleteFeedback',
        { error: describeError(refusal) });
    }

    // 6. Feedback on every retrieval the detail lists: the claim was used and helped; COMPLETE
    //    coverage assesses the other listed targets implicitly (neutral).
    for (const pending of owed.outstanding) {
      const record = (await step('feedback', 'Feedback', {
        retrieval_id: pending.retrieval_id,
        coverage: 'COVERAGE_COMPLETE',
        memory_feedback: pending.memory_ids.filter((id) => id === stored.memory_id).map((id) => ({
          memory_id: id, assessment: 'MEMORY_ASSESSMENT_USED', effect: 'EFFECT_HELPED',
        })),
      })).record;
      emit('feedback', {
        retrieval_id: record.retrieval_id, coverage: record.coverage, strengthened: record.applied.strengthened,
        implicitly_assessed: record.implicitly_assessed, outstanding: record.outstanding,
        rejected: record.rejected,
      });
    }

    // 7. The identical Commit now succeeds.
    const closed = await step('commit_again', 'Commit', commitRequest);
    emit('commit_again', {
      session_id: closed.session_id, committed: closed.committed, operation: closed.operation,
      feedback_status: closed.feedback_status,
    });
  };

  return run().then(
    () => { client.close(); },
    (err) => {
      client.close();
      const failure = err instanceof StepFailed
        ? { failed_step: err.step, message: err.message, ...err.extra }
        : { failed_step: null, message: String(err && err.stack ? err.stack : err) };
      emit('error', failure);
      process.stderr.write(`cycle failed: ${failure.message}\n`);
      process.exitCode = 1;
    },
  );
}

main();
