package chaos

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/redfence/redfence/chaos/internal/harness"
	"github.com/redfence/redfence/fencing"
	"github.com/redfence/redfence/internal/enum"
)

// Model names a sequential specification a history is checked against with
// porcupine.
type Model int

const (
	// MutexModel is a lease mutex. State: the holder's lease and when its
	// lease ends. A granted Acquire (Op.Held) is legal only if the lock is
	// free or the previous lease ended no later than this Acquire returned
	// (touching is allowed, as in Overlaps); it makes its lease the holder
	// until its ValidUntil. A Release of the holder's lease frees the lock;
	// a Release of any other lease changes nothing. Failed, unknown and
	// already-expired acquires are legal and change nothing: the lock's
	// liveness is measured separately. Other kinds are not part of it.
	MutexModel Model = iota + 1
	// RegisterModel is the fenced resource: a register with a fence. State:
	// the highest accepted token and the value. A FencedWrite with a token at
	// least the highest must be accepted (and sets both), one below must be
	// rejected (Fail with Note NoteStale); a write of unknown outcome may or
	// may not have been applied; a Read returns the value. Writes that failed
	// for another reason, and reads that did not succeed, are left out.
	RegisterModel
)

// String returns "mutex" or "register".
func (m Model) String() string { return enum.String([]string{"mutex", "register"}, m) }

// ErrUnknownModel is returned for a Model value that is neither MutexModel
// nor RegisterModel.
var ErrUnknownModel = errors.New("chaos: unknown model")

// Verdict is the outcome of a linearizability check.
type Verdict string

const (
	// Linearizable means the history is linearizable under the model.
	Linearizable Verdict = "ok"
	// Violation means no linearization exists: the history breaks the model.
	Violation Verdict = "violation"
	// CheckTimedOut means the checker ran out of time without finding either.
	CheckTimedOut Verdict = "unknown (timeout)"
)

// mutexState is the MutexModel's state. holder is the Acquire ID of the
// lease holding the lock, or -1.
type mutexState struct {
	holder   int
	leaseEnd time.Duration
}

type mutexInput struct {
	release bool
	lease   int // the Acquire's ID, or the Release's Lease
}

type mutexOutput struct {
	granted    bool // Op.Held
	ret        time.Duration
	validUntil time.Duration
	status     Status
	token      fencing.Token
}

type registerState struct {
	max   fencing.Token
	value string
}

type registerInput struct {
	write bool
	token fencing.Token
	value string // written value
}

type registerOutput struct {
	status Status // for writes: OK accepted, Fail rejected, Unknown
	value  string // for reads
}

func (m Model) porcupine() (porcupine.Model, error) {
	switch m {
	case MutexModel:
		return mutexModel(), nil
	case RegisterModel:
		return registerModel(), nil
	}
	return porcupine.Model{}, fmt.Errorf("%w: %d", ErrUnknownModel, int(m))
}

func mutexModel() porcupine.Model {
	return porcupine.Model{
		Init: func() any { return mutexState{holder: -1} },
		Step: func(state, input, output any) (bool, any) {
			s, in, out := state.(mutexState), input.(mutexInput), output.(mutexOutput)
			if in.release {
				if s.holder == in.lease {
					return true, mutexState{holder: -1}
				}
				return true, s
			}
			if !out.granted {
				return true, s
			}
			if s.holder >= 0 && s.leaseEnd > out.ret {
				return false, s
			}
			return true, mutexState{holder: in.lease, leaseEnd: out.validUntil}
		},
		DescribeOperation: func(input, output any) string {
			in, out := input.(mutexInput), output.(mutexOutput)
			if in.release {
				return fmt.Sprintf("release(lease %d) -> %v", in.lease, out.status)
			}
			if out.granted {
				return fmt.Sprintf("acquire -> lease %d token %d until %v", in.lease, out.token, out.validUntil)
			}
			return fmt.Sprintf("acquire -> %v", out.status)
		},
		DescribeState: func(state any) string {
			s := state.(mutexState)
			if s.holder < 0 {
				return "free"
			}
			return fmt.Sprintf("held by lease %d until %v", s.holder, s.leaseEnd)
		},
		DescribeOperationMetadata: describeMetadata,
	}
}

func registerModel() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Init: func() []any { return []any{registerState{}} },
		Step: func(state, input, output any) []any {
			s, in, out := state.(registerState), input.(registerInput), output.(registerOutput)
			if !in.write {
				if out.value == s.value {
					return []any{s}
				}
				return nil
			}
			applied := registerState{max: max(s.max, in.token), value: in.value}
			switch out.status {
			case OK:
				if in.token >= s.max {
					return []any{applied}
				}
				return nil
			case Fail:
				if in.token < s.max {
					return []any{s}
				}
				return nil
			default: // Unknown: it may not have reached the guard
				if in.token >= s.max {
					return []any{s, applied}
				}
				return []any{s}
			}
		},
		DescribeOperation: func(input, output any) string {
			in, out := input.(registerInput), output.(registerOutput)
			if in.write {
				verdict := map[Status]string{OK: "accepted", Fail: "rejected", Unknown: "unknown"}[out.status]
				return fmt.Sprintf("write(token %d, %q) -> %s", in.token, in.value, verdict)
			}
			return fmt.Sprintf("read -> %q", out.value)
		},
		DescribeState: func(state any) string {
			s := state.(registerState)
			return fmt.Sprintf("fence %d, value %q", s.max, s.value)
		},
		DescribeOperationMetadata: describeMetadata,
	}
	return nm.ToModel()
}

func describeMetadata(info any) string {
	op, ok := info.(Op)
	if !ok {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "op %d, client %d, %v, %v", op.ID, op.Client, op.Kind, op.Status)
	if op.Err != "" {
		fmt.Fprintf(&b, ", err: %s", op.Err)
	}
	if op.Note != "" {
		fmt.Fprintf(&b, ", note: %s", op.Note)
	}
	return b.String()
}

// porcupineOperations converts the operations of ops that belong to model
// (see MutexModel and RegisterModel) to porcupine operations: times in
// nanoseconds on the history's clock, an Unknown operation's Return set to
// +inf (math.MaxInt64), the Op itself as Metadata. Client IDs are kept
// (porcupine wants them zero-based for its visualization).
func porcupineOperations(model Model, ops []Op) ([]porcupine.Operation, error) {
	if model != MutexModel && model != RegisterModel {
		return nil, fmt.Errorf("%w: %d", ErrUnknownModel, int(model))
	}
	var out []porcupine.Operation
	for _, op := range ops {
		var in, o any
		switch {
		case model == MutexModel && op.Kind == Acquire:
			in = mutexInput{lease: op.ID}
			o = mutexOutput{granted: op.Held(), ret: op.Return, validUntil: op.ValidUntil, status: op.Status, token: op.Token}
		case model == MutexModel && op.Kind == Release:
			in = mutexInput{release: true, lease: op.Lease}
			o = mutexOutput{status: op.Status}
		case model == RegisterModel && op.Kind == FencedWrite:
			if op.Status == Fail && op.Note != NoteStale {
				continue // failed for another reason: the guard never judged it
			}
			in = registerInput{write: true, token: op.Token, value: op.Value}
			o = registerOutput{status: op.Status}
		case model == RegisterModel && op.Kind == Read:
			if op.Status != OK {
				continue
			}
			in = registerInput{}
			o = registerOutput{status: OK, value: op.Value}
		default:
			continue
		}
		ret := op.Return
		if op.Status == Unknown {
			ret = Inf
		}
		out = append(out, porcupine.Operation{
			ClientId: max(op.Client, 0),
			Input:    in,
			Call:     int64(op.Call),
			Output:   o,
			Return:   int64(ret),
			Metadata: op,
		})
	}
	return out, nil
}

// CheckLinearizable checks ops against model with porcupine, giving up
// after timeout (0: no limit): Linearizable, Violation, or CheckTimedOut
// when the check ran out of time. The error is non-nil only for an unknown
// model (wrapping ErrUnknownModel). WriteArtifacts draws the check's
// timelines.
func CheckLinearizable(model Model, ops []Op, timeout time.Duration) (Verdict, error) {
	v, _, err := checkLinearizable(model, ops, timeout)
	return v, err
}

// checkLinearizable is CheckLinearizable, with porcupine's linearization
// info for porcupine.Visualize (with model.porcupine()).
func checkLinearizable(model Model, ops []Op, timeout time.Duration) (Verdict, porcupine.LinearizationInfo, error) {
	m, err := model.porcupine()
	if err != nil {
		return "", porcupine.LinearizationInfo{}, err
	}
	pops, err := porcupineOperations(model, ops)
	if err != nil {
		return "", porcupine.LinearizationInfo{}, err
	}
	// The verbose check waits for its workers before returning, even on a
	// timeout, so no goroutine outlives this call.
	res, info := porcupine.CheckOperationsVerbose(m, pops, timeout)
	switch res {
	case porcupine.Ok:
		return Linearizable, info, nil
	case porcupine.Illegal:
		return Violation, info, nil
	}
	return CheckTimedOut, info, nil
}

// combineVerdicts returns Violation if any verdict is Violation, else
// CheckTimedOut if any is not Linearizable, else Linearizable.
func combineVerdicts(vs ...Verdict) Verdict {
	out := Linearizable
	for _, v := range vs {
		switch {
		case v == Violation:
			return Violation
		case v != Linearizable:
			out = CheckTimedOut
		}
	}
	return out
}

// faultAnnotations returns the Fault operations of ops as porcupine
// annotations (tag "faults"), to draw fault windows on a timeline. A window
// never healed ends at the last finite time in ops.
func faultAnnotations(ops []Op) []porcupine.Annotation {
	var last time.Duration
	for _, op := range ops {
		if op.Return != Inf {
			last = max(last, op.Return)
		}
		last = max(last, op.Call)
	}
	var out []porcupine.Annotation
	for _, op := range ops {
		if op.Kind != Fault {
			continue
		}
		end := op.Return
		if end == Inf {
			end = last
		}
		out = append(out, porcupine.Annotation{
			Tag:             "faults",
			Start:           int64(op.Call),
			End:             int64(end),
			Description:     op.Note,
			Details:         fmt.Sprintf("%v .. %v", op.Call, end),
			BackgroundColor: "#f6c6c6",
		})
	}
	return out
}

// WriteArtifacts writes what is needed to inspect and replay a run into dir
// (created if missing): history.json (WriteJSON), mutex.html and
// register.html (porcupine timelines, with fault windows drawn), and
// summary.txt (the seed, the results given, double grants, fenced-resource
// violations and both models' verdicts). Each linearizability check gives up
// after timeout (0: no limit).
func WriteArtifacts(dir string, seed int64, h *History, timeout time.Duration, results ...Result) error {
	if h == nil {
		return invalidHistory("WriteArtifacts with a nil history")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("chaos: artifacts: %w", err)
	}
	ops := h.Ops()
	if err := writeFile(filepath.Join(dir, "history.json"), h.WriteJSON); err != nil {
		return err
	}
	var summary strings.Builder
	fmt.Fprintf(&summary, "seed: %d\nops: %d\n", seed, len(ops))
	if len(results) > 0 {
		summary.WriteString("\n")
		if err := harness.WriteTable(&summary, results); err != nil {
			return err
		}
		summary.WriteString("\n")
	}
	overlaps := Overlaps(ops)
	fmt.Fprintf(&summary, "double grants: %d\n", len(overlaps))
	for _, o := range overlaps {
		fmt.Fprintf(&summary, "  %s\n", o)
	}
	viol := FencedViolations(ops)
	fmt.Fprintf(&summary, "fenced violations: %d\n", len(viol))
	for _, v := range viol {
		fmt.Fprintf(&summary, "  %s\n", v)
	}
	ann := faultAnnotations(ops)
	for _, model := range []Model{MutexModel, RegisterModel} {
		verdict, info, err := checkLinearizable(model, ops, timeout)
		if err != nil {
			return err
		}
		fmt.Fprintf(&summary, "%s model: %s\n", model, verdict)
		info.AddAnnotations(ann)
		pm, err := model.porcupine()
		if err != nil {
			return err
		}
		name := filepath.Join(dir, model.String()+".html")
		if err := writeFile(name, func(w io.Writer) error { return porcupine.Visualize(pm, info, w) }); err != nil {
			return err
		}
	}
	return writeFile(filepath.Join(dir, "summary.txt"), func(w io.Writer) error {
		_, err := io.WriteString(w, summary.String())
		return err
	})
}

func writeFile(name string, write func(io.Writer) error) (err error) {
	f, err := os.Create(name)
	if err != nil {
		return fmt.Errorf("chaos: artifacts: %w", err)
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("chaos: artifacts: %w", cerr)
		}
	}()
	if err := write(f); err != nil {
		return fmt.Errorf("chaos: artifacts: %s: %w", filepath.Base(name), err)
	}
	return nil
}
