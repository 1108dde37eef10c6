package chaos

import (
	"fmt"

	"github.com/redfence/redfence/internal/argerr"
)

// invalidError is chaos's invalid-argument error: the module's one shape,
// an *argerr.Error (redlock.ConfigError) with Pkg "chaos" wrapping
// redlock.ErrInvalid, that also wraps chaos's own sentinel for what was
// invalid (ErrInvalidScenario, ErrInvalidWorkload, ErrInvalidHistory) and
// any error the message wrapped. Its text is the sentinel's, a colon and
// the details: "chaos: invalid scenario: ...".
type invalidError struct {
	arg    *argerr.Error
	kind   error
	detail error
}

// Error implements error.
func (e *invalidError) Error() string { return e.arg.Error() }

// Unwrap returns the *argerr.Error, the sentinel and the details.
func (e *invalidError) Unwrap() []error { return []error{e.arg, e.kind, e.detail} }

// invalid returns an invalidError for kind, one of the invalid-argument
// sentinels, named field ("scenario", "workload", "history"): format and
// args, as fmt.Errorf takes them (%w included), give the details.
func invalid(kind error, field, format string, args ...any) error {
	detail := fmt.Errorf(format, args...)
	return &invalidError{arg: &argerr.Error{Pkg: "chaos", Field: field, Msg: detail.Error()}, kind: kind, detail: detail}
}

// Shorthands for the three kinds.
func invalidScenario(format string, args ...any) error {
	return invalid(ErrInvalidScenario, "scenario", format, args...)
}

func invalidWorkload(format string, args ...any) error {
	return invalid(ErrInvalidWorkload, "workload", format, args...)
}

func invalidHistory(format string, args ...any) error {
	return invalid(ErrInvalidHistory, "history", format, args...)
}
