// Package enum names the values of the module's enums, all of which start
// at 1: names[v-1] is value v's name.
package enum

import (
	"fmt"
	"strings"
)

// Name returns v's name in names, and whether v has one.
func Name[T ~int](names []string, v T) (string, bool) {
	if v < 1 || int(v) > len(names) {
		return "", false
	}
	return names[v-1], true
}

// String returns v's name, or "Type(v)" for a value without one (Type is
// v's type without its package).
func String[T ~int](names []string, v T) string {
	if s, ok := Name(names, v); ok {
		return s
	}
	t := fmt.Sprintf("%T", v)
	return fmt.Sprintf("%s(%d)", t[strings.LastIndex(t, ".")+1:], int(v))
}
