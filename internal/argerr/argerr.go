// Package argerr is the module's one shape of invalid-argument error: every
// package's bad argument or option is an *Error naming the package and the
// field, and every one wraps ErrInvalid.
package argerr

import (
	"errors"
	"fmt"
)

// ErrInvalid is wrapped by every invalid-argument error of the module.
var ErrInvalid = errors.New("redfence: invalid argument")

// Error reports an invalid argument or option: "pkg: invalid field: msg".
type Error struct {
	Pkg   string // the package that refused it: "redlock", "single", "coord", ...
	Field string // what was wrong: "TTL", "key", "client", ...
	Msg   string // why
}

// Error implements error.
func (e *Error) Error() string { return fmt.Sprintf("%s: invalid %s: %s", e.Pkg, e.Field, e.Msg) }

// Unwrap returns ErrInvalid.
func (e *Error) Unwrap() error { return ErrInvalid }

// New returns an *Error for pkg and field, with the message formatted.
func New(pkg, field, format string, args ...any) error {
	return &Error{Pkg: pkg, Field: field, Msg: fmt.Sprintf(format, args...)}
}
