package chaos

// Internals exposed to the black-box tests.
var (
	TokenProblems   = tokenProblems
	ClassifyRelease = classifyRelease
)
