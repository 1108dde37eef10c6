// Package nilcheck tells a nil argument from a usable one, including a typed
// nil in an interface (a nil *redis.Client passed as redis.UniversalClient),
// which a comparison with nil misses and a method call would panic on.
package nilcheck

import "reflect"

// IsNil reports whether v is nil, or an interface holding a nil pointer, map,
// slice, func, channel or interface.
func IsNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Func, reflect.Slice, reflect.Chan:
		return rv.IsNil()
	}
	return false
}
