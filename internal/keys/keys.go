// Package keys is the layout of the keys and channels the locks use on the
// nodes (docs/design.md, Keys): the one place that names them, for the
// locks, their tests, the fault harness and the benchmarks.
package keys

import "strings"

const (
	// Marker is a node's restart-quarantine marker, a hash.
	Marker = "redfence:node"
	// ReleasedPrefix starts the channels on which a key's grants are told:
	// ReleasedPrefix + key + "#" + the waiting client's name.
	ReleasedPrefix = "redfence:released:"
	// Readers is the stored value of a read-write lock key while readers
	// hold it.
	Readers = "redfence:readers"
)

// The suffixes of the keys beside a lock key.
const (
	fenceSuffix   = ":fence"
	readersSuffix = ":rw:readers"
	intentSuffix  = ":rw:intent"
	queueSuffix   = ":queue"
)

// Tag returns k's Redis Cluster hash tag, the part between the first "{"
// and the next "}" when that part is not empty, and whether it has one.
func Tag(k string) (string, bool) {
	if i := strings.IndexByte(k, '{'); i >= 0 {
		if j := strings.IndexByte(k[i+1:], '}'); j > 0 {
			return k[i+1 : i+1+j], true
		}
	}
	return "", false
}

// side is the key beside lock key k with suffix, in k's Cluster slot: k's
// hash tag kept, or k wrapped in braces (which hashes as k does); a k with
// a "}" but no tag cannot be wrapped, and is used as it is (outside a
// Cluster only).
func side(k, suffix string) string {
	if _, ok := Tag(k); ok || strings.Contains(k, "}") {
		return k + suffix
	}
	return "{" + k + "}" + suffix
}

// Fence is the fence hash of lock key k.
func Fence(k string) string { return side(k, fenceSuffix) }

// ReadersOf is the readers' set of read-write lock key k.
func ReadersOf(k string) string { return side(k, readersSuffix) }

// Intent is the writer-intent marker of read-write lock key k.
func Intent(k string) string { return side(k, intentSuffix) }

// Queue is the queue of waiters of lock key k.
func Queue(k string) string { return side(k, queueSuffix) }

// Owner returns the lock key whose side key k is, and what k is to it
// ("the fence hash of the lock key", ...), or "", "" when k is none.
func Owner(k string) (owner, what string) {
	for _, s := range [...]struct{ suffix, what string }{
		{fenceSuffix, "the fence hash of the lock key"}, {readersSuffix, "the readers' set of the read-write lock key"},
		{intentSuffix, "the writer-intent marker of the read-write lock key"}, {queueSuffix, "the queue of waiters of the lock key"},
	} {
		base, ok := strings.CutSuffix(k, s.suffix)
		if !ok || base == "" {
			continue
		}
		if side(base, s.suffix) == k {
			if inner, ok := strings.CutPrefix(base, "{"); ok && side(strings.TrimSuffix(inner, "}"), s.suffix) == k {
				base = strings.TrimSuffix(inner, "}") // "{x}:fence" is x's
			}
			return base, s.what
		}
	}
	return "", ""
}
