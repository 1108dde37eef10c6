package chaos

import (
	"fmt"
	"slices"
	"strings"
)

// The names of chaos's enums (OpKind, Status, Model, ViolationKind), all of
// which start at 1: names[v-1] is value v's name.

// enumName returns v's name in names, and whether v has one.
func enumName[T ~int](names []string, v T) (string, bool) {
	if v < 1 || int(v) > len(names) {
		return "", false
	}
	return names[v-1], true
}

// enumString returns v's name, or "Type(v)" for a value without one.
func enumString[T ~int](names []string, v T) string {
	if s, ok := enumName(names, v); ok {
		return s
	}
	t := fmt.Sprintf("%T", v)
	return fmt.Sprintf("%s(%d)", t[strings.LastIndex(t, ".")+1:], int(v))
}

// marshalEnum encodes v by name; what names the enum in the error (wrapping
// ErrInvalidHistory) for a value without one.
func marshalEnum[T ~int](names []string, v T, what string) ([]byte, error) {
	if s, ok := enumName(names, v); ok {
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
