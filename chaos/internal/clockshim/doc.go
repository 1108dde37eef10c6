// Package clockshim builds and drives a tiny LD_PRELOAD library that shifts
// the wall clock a process sees through gettimeofday, which Redis uses to set
// and expire keys.
//
// The library (Source, compiled by Build) adds to the real gettimeofday a
// signed millisecond offset that it re-reads on every call from the file
// named by EnvFile; WriteOffset rewrites that file, so a running process
// picks up a new offset at its next call. A missing or unparsable file is an
// offset of zero; the file must exist before the process starts.
//
// clock_gettime, time(2), the monotonic clock, static binaries and direct
// vDSO calls are untouched. Unlike libfaketime, which hangs a jemalloc-linked
// redis-server at start, it intercepts nothing jemalloc uses.
package clockshim
