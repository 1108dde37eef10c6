package ratelimit

import (
	"errors"
	"fmt"
)

// ErrInvalid is wrapped by every error about a bad argument or option: a nil
// client, an unknown algorithm, an empty key, an invalid Limit, a negative n,
// or an n that the limit can never admit. Such errors are *InvalidError
// values.
var ErrInvalid = errors.New("ratelimit: invalid argument")

// InvalidError reports a bad argument or option. It satisfies
// errors.Is(err, ErrInvalid).
type InvalidError struct {
	Field  string // what was wrong: "client", "algorithm", "key", "limit", "n", "key prefix"
	Reason string
}

// Error implements error.
func (e *InvalidError) Error() string {
	return fmt.Sprintf("ratelimit: invalid %s: %s", e.Field, e.Reason)
}

// Unwrap returns ErrInvalid.
func (e *InvalidError) Unwrap() error { return ErrInvalid }

func invalid(field, format string, args ...any) error {
	return &InvalidError{Field: field, Reason: fmt.Sprintf(format, args...)}
}
