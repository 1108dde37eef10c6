// Package clockshim builds and drives a tiny LD_PRELOAD library that shifts
// the wall clock a process sees through gettimeofday, which is what Redis
// uses to set and expire keys.
//
// The library (Source, compiled by Build) overrides gettimeofday only: it
// calls the real one and adds a signed millisecond offset that it re-reads,
// on every call, from the file named by the environment variable EnvFile.
// WriteOffset rewrites that file in place, so a running process picks up a
// new offset at its next gettimeofday call; no signal or restart is needed.
//
// What it guarantees: a process started with LD_PRELOAD set to the built
// library and EnvFile naming an existing offset file sees gettimeofday run
// ahead of (or behind) the real clock by the file's offset; a missing,
// unreadable or unparsable file means an offset of zero.
//
// What it does not do: clock_gettime, time(2) and the monotonic clock are
// untouched (Redis uses the monotonic clock only for timers, not for key
// expiry); statically linked programs and programs that call the vDSO
// directly are not affected; the file is opened once, when the library is
// loaded, so it must exist before the process starts (WriteOffset it first).
//
// Unlike libfaketime, which hangs a jemalloc-linked redis-server at start
// (it intercepts clock_gettime, which jemalloc calls while the loader is
// still resolving symbols), this shim intercepts nothing jemalloc uses.
package clockshim
