package core

// Hooks into the public types, set by package redlock's init, for the tests
// of packages that hold those types only as aliases (single): they reach a
// Client's Engine, and wrap a Config change as the public Option type.
var (
	EngineOf func(client any) *Engine
	OptionOf func(func(*Config)) any
)
