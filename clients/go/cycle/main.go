// Command cycle runs one full cognitive cycle against a running Slowave server from Go, through
// stubs generated from the repository's protos (buf.gen.yaml: protoc-gen-go and
// protoc-gen-go-grpc, import path slowave.dev/go/slowave/v1).
//
//	npx buf generate -o clients                   # the stubs, under clients/go/src
//	GO111MODULE=off GOPATH=$PWD/clients/go:/usr/share/gocode go build -o cycle ./clients/go/cycle
//	./cycle [host:port]                           # default: $SLOWAVE_ADDR, else 127.0.0.1:50051
//
// The steps are those of clients/node/cycle.js: Activate → Remember → Commit; a second Activate
// whose task contains the claim gets it back; a premature Commit is refused with
// FAILED_PRECONDITION, whose google.rpc.Status details (ErrorInfo, slowave.v1.IncompleteFeedback)
// are decoded; Feedback on exactly what that detail lists; the identical Commit then succeeds.
//
// It prints one JSON object per step on its own line ({"step": "activate", ...}), with protobuf
// field names and full enum value names, the same transcript as the Node client; on any unexpected
// result it prints {"step": "error", ...} and exits 1.
//
// Environment: SLOWAVE_ADDR, SLOWAVE_API_KEY (sent as `authorization: Bearer <key>`),
// SLOWAVE_DEADLINE_MS (per call, default 30000).
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	slowavev1 "slowave.dev/go/slowave/v1"
)

type fields map[string]interface{}

func emit(step string, f fields) {
	f["step"] = step
	line, _ := json.Marshal(f)
	fmt.Println(string(line))
}

// stepFailed ends the cycle: the step that failed, why, and the decoded status if a call failed.
type stepFailed struct {
	step, message string
	err           error
}

func (e *stepFailed) Error() string { return e.message }

func orEmpty(ids []string) []string {
	if ids == nil {
		return []string{}
	}
	return ids
}

// details are the google.rpc.Status details of a failed call, each by its message name.
func details(st *status.Status) []fields {
	out := []fields{}
	for _, any := range st.Proto().GetDetails() {
		name := any.GetTypeUrl()[strings.LastIndex(any.GetTypeUrl(), "/")+1:]
		out = append(out, fields{"type": name})
	}
	return out
}

func describe(err error) fields {
	st := status.Convert(err)
	return fields{"code": codeName(st.Code()), "code_number": int(st.Code()), "message": st.Message(), "details": details(st)}
}

type client struct {
	stub     slowavev1.MemoryServiceClient
	apiKey   string
	deadline time.Duration
}

func (c *client) ctx() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), c.deadline)
	if c.apiKey != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+c.apiKey)
	}
	return ctx, cancel
}

func failed(step, method string, err error) error {
	st := status.Convert(err)
	return &stepFailed{step, fmt.Sprintf("%s failed: %s %s", method, codeName(st.Code()), st.Message()), err}
}

// codeName is the canonical upper-case name gRPC uses on the wire and in other languages.
func codeName(c codes.Code) string {
	names := map[codes.Code]string{
		codes.OK: "OK", codes.Canceled: "CANCELLED", codes.Unknown: "UNKNOWN", codes.InvalidArgument: "INVALID_ARGUMENT",
		codes.DeadlineExceeded: "DEADLINE_EXCEEDED", codes.NotFound: "NOT_FOUND", codes.AlreadyExists: "ALREADY_EXISTS",
		codes.PermissionDenied: "PERMISSION_DENIED", codes.ResourceExhausted: "RESOURCE_EXHAUSTED",
		codes.FailedPrecondition: "FAILED_PRECONDITION", codes.Aborted: "ABORTED", codes.OutOfRange: "OUT_OF_RANGE",
		codes.Unimplemented: "UNIMPLEMENTED", codes.Internal: "INTERNAL", codes.Unavailable: "UNAVAILABLE",
		codes.DataLoss: "DATA_LOSS", codes.Unauthenticated: "UNAUTHENTICATED",
	}
	if name, ok := names[c]; ok {
		return name
	}
	return strconv.Itoa(int(c))
}

func str(s string) *string { return &s }

func run(c *client, target string) error {
	suffix := make([]byte, 4)
	if _, err := rand.Read(suffix); err != nil {
		return err
	}
	scope := "project:go-cycle-" + hex.EncodeToString(suffix)
	claim := "The staging deploy listens on port 8443."
	ctx, cancel := c.ctx()
	defer cancel()

	// 1. Activate: a session for the first task (the scope is new, so COLD_START).
	first, err := c.stub.Activate(ctx, &slowavev1.ActivateRequest{
		Task: "Find out why staging deploys time out", InitialGoal: "Diagnose staging timeouts", Scope: scope,
	})
	if err != nil {
		return failed("activate", "Activate", err)
	}
	ids := []string{}
	for _, m := range first.GetMemories() {
		ids = append(ids, m.GetMemoryId())
	}
	f := fields{"target": target, "scope": scope, "session_id": first.GetSessionId(),
		"retrieval_id": first.GetRetrievalId(), "memory_state": first.GetMemoryState().String(), "memory_ids": ids}
	if c.apiKey != "" {
		f["api_key"] = true
	}
	emit("activate", f)

	// 2. Remember a durable claim learned during the task.
	fact := slowavev1.MemoryType_MEMORY_TYPE_FACT
	remembered, err := c.stub.Remember(ctx, &slowavev1.RememberRequest{
		SessionId: first.GetSessionId(), Scope: scope, Content: str(claim), Type: &fact,
	})
	if err != nil {
		return failed("remember", "Remember", err)
	}
	stored := remembered.GetMemory()
	if stored == nil {
		return &stepFailed{"remember", "unexpected result form (not memory)", nil}
	}
	emit("remember", fields{"memory_id": stored.GetMemoryId(), "disposition": stored.GetDisposition().String(), "content": claim})

	// 3. Commit the first task (it exposed nothing, so no feedback is owed).
	done, err := c.stub.Commit(ctx, &slowavev1.CommitRequest{
		SessionId: first.GetSessionId(), FinalGoal: "Diagnose staging timeouts", Outcome: slowavev1.Outcome_OUTCOME_SUCCESS,
		OutcomeSummary: "Staging timeouts came from probing the wrong port; the deploy listens on 8443.",
		Verification: &slowavev1.Verification{
			Status: slowavev1.VerificationStatus_VERIFICATION_STATUS_VERIFIED, Summary: "curl to :8443 answered 200.",
		},
	})
	if err != nil {
		return failed("commit", "Commit", err)
	}
	emit("commit", fields{"session_id": done.GetSessionId(), "committed": done.GetCommitted(),
		"operation": done.GetOperation().String(), "feedback_status": done.GetFeedbackStatus().String()})

	// 4. A later task whose cue contains the claim gets it back, exposed for feedback.
	second, err := c.stub.Activate(ctx, &slowavev1.ActivateRequest{
		Task: "Configure the health check. " + claim, InitialGoal: "Configure the health check", Scope: scope,
	})
	if err != nil {
		return failed("activate_again", "Activate", err)
	}
	memories, found := []fields{}, false
	for _, m := range second.GetMemories() {
		memories = append(memories, fields{"memory_id": m.GetMemoryId(), "content": m.GetContent(), "score": m.GetRanking().GetScore()})
		found = found || m.GetMemoryId() == stored.GetMemoryId()
	}
	procedures := []string{}
	for _, p := range second.GetProcedures() {
		procedures = append(procedures, p.GetProcedureId())
	}
	emit("activate_again", fields{"session_id": second.GetSessionId(), "retrieval_id": second.GetRetrievalId(),
		"memory_state": second.GetMemoryState().String(), "memories": memories, "procedure_ids": procedures})
	if !found {
		return &stepFailed{"activate_again", "the second Activate did not return " + stored.GetMemoryId(), nil}
	}

	// 5. Commit before feedback: refused, and the status details say exactly what is owed.
	commitRequest := &slowavev1.CommitRequest{
		SessionId: second.GetSessionId(), FinalGoal: "Configure the health check", Outcome: slowavev1.Outcome_OUTCOME_SUCCESS,
		OutcomeSummary: "The staging health check now probes port 8443.",
		Verification: &slowavev1.Verification{
			Status: slowavev1.VerificationStatus_VERIFICATION_STATUS_VERIFIED, Summary: "Probe is green.",
		},
	}
	_, refusal := c.stub.Commit(ctx, commitRequest)
	if refusal == nil {
		return &stepFailed{"commit_refused", "the Commit before feedback succeeded", nil}
	}
	st := status.Convert(refusal)
	var info *errdetails.ErrorInfo
	var owed *slowavev1.IncompleteFeedback
	types := []string{}
	// status.Details resolves each detail by its type URL in the registry of linked message types
	// (errdetails and the generated slowave/v1 package register theirs).
	for i, detail := range st.Details() {
		switch d := detail.(type) {
		case *errdetails.ErrorInfo:
			info = d
		case *slowavev1.IncompleteFeedback:
			owed = d
		case error:
			return &stepFailed{"commit_refused", "undecodable status detail " + st.Proto().GetDetails()[i].GetTypeUrl(), d}
		}
	}
	for _, any := range st.Proto().GetDetails() {
		types = append(types, any.GetTypeUrl()[strings.LastIndex(any.GetTypeUrl(), "/")+1:])
	}
	refused := fields{"code": codeName(st.Code()), "code_number": int(st.Code()), "message": st.Message(),
		"status_code": st.Proto().GetCode(), "status_message": st.Proto().GetMessage(), "detail_types": types,
		"error_info": nil, "outstanding": nil}
	if info != nil {
		refused["error_info"] = fields{"reason": info.GetReason(), "domain": info.GetDomain(), "metadata": info.GetMetadata()}
	}
	if owed != nil {
		outstanding := []fields{}
		for _, o := range owed.GetOutstanding() {
			outstanding = append(outstanding, fields{"retrieval_id": o.GetRetrievalId(),
				"memory_ids": orEmpty(o.GetMemoryIds()), "procedure_ids": orEmpty(o.GetProcedureIds())})
		}
		refused["outstanding"] = outstanding
	}
	emit("commit_refused", refused)
	if st.Code() != codes.FailedPrecondition || owed == nil || info == nil {
		return &stepFailed{"commit_refused", "expected FAILED_PRECONDITION with ErrorInfo and IncompleteFeedback", refusal}
	}

	// 6. Feedback on every retrieval the detail lists: the claim was used and helped; COMPLETE
	//    coverage assesses the other listed targets implicitly (neutral).
	complete, used, helped := slowavev1.Coverage_COVERAGE_COMPLETE, slowavev1.MemoryAssessment_MEMORY_ASSESSMENT_USED, slowavev1.Effect_EFFECT_HELPED
	for _, pending := range owed.GetOutstanding() {
		entries := []*slowavev1.MemoryFeedbackEntry{}
		for _, id := range pending.GetMemoryIds() {
			if id == stored.GetMemoryId() {
				entries = append(entries, &slowavev1.MemoryFeedbackEntry{MemoryId: id, Assessment: used, Effect: &helped})
			}
		}
		response, err := c.stub.Feedback(ctx, &slowavev1.FeedbackRequest{
			RetrievalId: str(pending.GetRetrievalId()), Coverage: &complete, MemoryFeedback: entries,
		})
		if err != nil {
			return failed("feedback", "Feedback", err)
		}
		record := response.GetRecord()
		rejected := []fields{}
		for _, r := range record.GetRejected() {
			rejected = append(rejected, fields{"target_kind": r.GetTargetKind().String(), "target_id": r.GetTargetId()})
		}
		targets := func(t *slowavev1.TargetIds) fields {
			return fields{"memory_ids": orEmpty(t.GetMemoryIds()), "procedure_ids": orEmpty(t.GetProcedureIds())}
		}
		emit("feedback", fields{"retrieval_id": record.GetRetrievalId(), "coverage": record.GetCoverage().String(),
			"strengthened": orEmpty(record.GetApplied().GetStrengthened()), "implicitly_assessed": targets(record.GetImplicitlyAssessed()),
			"outstanding": targets(record.GetOutstanding()), "rejected": rejected})
	}

	// 7. The identical Commit now succeeds.
	closed, err := c.stub.Commit(ctx, commitRequest)
	if err != nil {
		return failed("commit_again", "Commit", err)
	}
	emit("commit_again", fields{"session_id": closed.GetSessionId(), "committed": closed.GetCommitted(),
		"operation": closed.GetOperation().String(), "feedback_status": closed.GetFeedbackStatus().String()})
	return nil
}

func main() {
	target := os.Getenv("SLOWAVE_ADDR")
	if len(os.Args) > 1 {
		target = os.Args[1]
	}
	if target == "" {
		target = "127.0.0.1:50051"
	}
	deadline := 30 * time.Second
	if ms, err := strconv.Atoi(os.Getenv("SLOWAVE_DEADLINE_MS")); err == nil && ms > 0 {
		deadline = time.Duration(ms) * time.Millisecond
	}
	conn, err := grpc.Dial(target, grpc.WithInsecure())
	if err != nil {
		emit("error", fields{"failed_step": nil, "message": err.Error()})
		os.Exit(1)
	}
	defer conn.Close()
	c := &client{stub: slowavev1.NewMemoryServiceClient(conn), apiKey: os.Getenv("SLOWAVE_API_KEY"), deadline: deadline}
	if err := run(c, target); err != nil {
		failure := fields{"failed_step": nil, "message": err.Error()}
		var sf *stepFailed
		if errors.As(err, &sf) {
			failure["failed_step"] = sf.step
			if sf.err != nil {
				if _, isStatus := status.FromError(sf.err); isStatus {
					failure["error"] = describe(sf.err)
				}
			}
		}
		emit("error", failure)
		fmt.Fprintln(os.Stderr, "cycle failed:", err)
		conn.Close()
		os.Exit(1)
	}
}
