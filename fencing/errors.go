package fencing

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error a guard returns for a stale token satisfies
// errors.Is(err, ErrStaleToken); the others are wrapped with details and
// satisfy errors.Is against their sentinel.
var (
	// ErrStaleToken reports a token lower than the highest one the guard has
	// recorded for the resource. The error is a *StaleTokenError.
	ErrStaleToken = errors.New("fencing: stale token")

	// ErrInvalidToken reports a token that is not usable: 0 ("no token"), or
	// one the guard's storage cannot hold (above math.MaxInt64 for SQLGuard).
	ErrInvalidToken = errors.New("fencing: invalid token")

	// ErrInvalidArgument is wrapped by every error about a bad argument or
	// option (an empty resource, a nil client, database, transaction or
	// function, an invalid table name or key prefix, a negative TTL), each a
	// *InvalidError. It is the module's one value, redlock.ErrInvalid.
)

// ErrInvalidArgument is wrapped by every error about a bad argument or
// option, in every package of the module (redlock.ErrInvalid and
// ratelimit.ErrInvalid are this value).
var ErrInvalidArgument = errors.New("redfence: invalid argument")

// InvalidError reports a bad argument or option: "pkg: invalid field: msg".
// It is the module's one invalid-argument shape (redlock.ConfigError and
// ratelimit.InvalidError are this type), and wraps ErrInvalidArgument.
type InvalidError struct {
	Pkg   string // the package that refused it: "redlock", "fencing", ...
	Field string // what was wrong: "TTL", "key", "client", ...
	Msg   string // why
}

// Error implements error.
func (e *InvalidError) Error() string {
	return fmt.Sprintf("%s: invalid %s: %s", e.Pkg, e.Field, e.Msg)
}

// Unwrap returns ErrInvalidArgument.
func (e *InvalidError) Unwrap() error { return ErrInvalidArgument }

// invalid returns fencing's *InvalidError for field.
func invalid(field, format string, args ...any) error {
	return &InvalidError{Pkg: "fencing", Field: field, Msg: fmt.Sprintf(format, args...)}
}

// StaleTokenError reports that a guard rejected Token for Resource because it
// has already recorded the higher token Current. It satisfies
// errors.Is(err, ErrStaleToken).
type StaleTokenError struct {
	Resource string // the resource the token was presented for
	Token    Token  // the rejected token
	Current  Token  // the highest token recorded for Resource when Token was rejected
}

// Error names the resource, the rejected token and the current one.
func (e *StaleTokenError) Error() string {
	return fmt.Sprintf("fencing: stale token %d for resource %q: current token is %d", e.Token, e.Resource, e.Current)
}

// Is reports whether target is ErrStaleToken.
func (e *StaleTokenError) Is(target error) bool { return target == ErrStaleToken }

func errZeroToken() error {
	return fmt.Errorf("%w: 0 means no token (was fencing enabled on the lock?)", ErrInvalidToken)
}

func errEmptyResource() error {
	return invalid("resource", "empty")
}

// validate checks the arguments every guard method shares.
func validate(resource string, t Token) error {
	if resource == "" {
		return errEmptyResource()
	}
	if t == 0 {
		return errZeroToken()
	}
	return nil
}
