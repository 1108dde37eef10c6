package chaos

// Internals exposed to the black-box tests.
var (
	TokenProblems   = tokenProblems
	ClassifyRelease = classifyRelease
	// Wait waits d, or until ctx ends or stop closes; it reports whether d
	// passed.
	Wait            = wait
	ComputeStats    = computeStats
	Percentile      = percentile
	CombineVerdicts = combineVerdicts
	// PorcupineOperations and FaultAnnotations convert ops for porcupine.
	PorcupineOperations = porcupineOperations
	FaultAnnotations    = faultAnnotations
)

// NetworkLink returns nw's link from client c to node n.
func NetworkLink(nw *Network, c, n int) (*Link, error) { return nw.link(c, n) }
