package redisnode

// SetPortPicker replaces the free-port picker and returns a function that
// restores it. Tests using it must not run in parallel with other tests.
func SetPortPicker(f func() (int, error)) (restore func()) {
	old := pickPort
	pickPort = f
	return func() { pickPort = old }
}

// FreePort exposes the default port picker.
var FreePort = freePort

// StderrFileName is the file in the node's directory that receives the
// process's stdout and stderr.
const StderrFileName = stderrFileName
