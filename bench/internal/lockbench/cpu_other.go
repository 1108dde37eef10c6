//go:build !unix

package lockbench

import "time"

// selfCPU is 0 where getrusage is not available: no client CPU figure.
func selfCPU() time.Duration { return 0 }
