// Package argerr is the module's one shape of invalid-argument error,
// fencing.InvalidError (fencing is the module's leaf public package), for
// the packages that build one: New names the package and the field, and
// the error wraps fencing.ErrInvalidArgument.
package argerr

import (
	"fmt"

	"github.com/redfence/redfence/fencing"
)

// ErrInvalid is wrapped by every invalid-argument error of the module.
var ErrInvalid = fencing.ErrInvalidArgument

// Error reports an invalid argument or option: "pkg: invalid field: msg".
type Error = fencing.InvalidError

// New returns an *Error for pkg's field, its message formatted.
func New(pkg, field, format string, args ...any) error {
	return &Error{Pkg: pkg, Field: field, Msg: fmt.Sprintf(format, args...)}
}
