package chaos

import (
	"slices"

	"github.com/redfence/redfence/internal/enum"
)

// The names of chaos's enums (OpKind, Status, Model, ViolationKind), all of
// which start at 1: names[v-1] is value v's name (package internal/enum);
// JSON encodes them by name.

// marshalEnum encodes v by name; what names the enum in the error (wrapping
// ErrInvalidHistory) for a value without one.
func marshalEnum[T ~int](names []string, v T, what string) ([]byte, error) {
	if s, ok := enum.Name(names, v); ok {
		return []byte(s), nil
	}
	return nil, invalidHistory("unknown %s %d", what, int(v))
}

// unmarshalEnum decodes a name into v; what names the enum in the error
// (wrapping ErrInvalidHistory) for an unknown name.
func unmarshalEnum[T ~int](names []string, b []byte, what string, v *T) error {
	i := slices.Index(names, string(b))
	if i < 0 {
		return invalidHistory("unknown %s %q", what, b)
	}
	*v = T(i + 1)
	return nil
}
