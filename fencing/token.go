package fencing

import "strconv"

// Token is a fencing token. Tokens issued for the same lock key increase with
// every acquisition; 0 means no token was issued.
type Token uint64

// String returns the token in decimal.
func (t Token) String() string { return strconv.FormatUint(uint64(t), 10) }
