package ratelimit

import (
	"github.com/redfence/redfence/fencing"
	"github.com/redfence/redfence/internal/argerr"
)

// ErrInvalid is wrapped by every error about a bad argument or option: a nil
// client, an unknown algorithm, an empty key, an invalid Limit, a negative n,
// or an n that the limit can never admit. Such errors are *InvalidError
// values. It is the module's one value (redlock.ErrInvalid, coord.ErrInvalid).
var ErrInvalid = fencing.ErrInvalidArgument

// InvalidError reports a bad argument or option (Pkg "ratelimit"; Field
// "client", "algorithm", "key", "limit", "n" or "key prefix"). It is the
// module's one invalid-argument shape, and satisfies errors.Is(err,
// ErrInvalid).
type InvalidError = fencing.InvalidError

func invalid(field, format string, args ...any) error {
	return argerr.New("ratelimit", field, format, args...)
}
