package chaos

// Internals exposed to the black-box tests.
var (
	TokenProblems   = tokenProblems
	ClassifyRelease = classifyRelease
	// Wait waits d, or until ctx ends or stop closes; it reports whether d
	// passed.
	Wait = wait
)
