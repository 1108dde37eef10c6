package pgtest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// EnvBinDir names the environment variable that, when set, is the directory
// holding the initdb and postgres binaries to use.
const EnvBinDir = "REDFENCE_POSTGRES_BINDIR"

// debianRoot holds one directory per installed major version on Debian and
// Ubuntu, each with a bin directory.
const debianRoot = "/usr/lib/postgresql"

// ErrNotFound is the error DB fails the test with when no PostgreSQL
// binaries can be found.
var ErrNotFound = errors.New("PostgreSQL not found: run scripts/ensure-postgres.sh or apt-get install postgresql")

// findBinDir returns the directory holding initdb and postgres: envDir when
// it is not empty, else the newest version under root, else the directory of
// initdb found by lookPath.
func findBinDir(envDir, root string, lookPath func(string) (string, error)) (string, error) {
	if envDir != "" {
		if !hasBinaries(envDir) {
			return "", fmt.Errorf("%w ($%s=%s holds no initdb and postgres executables)", ErrNotFound, EnvBinDir, envDir)
		}
		return envDir, nil
	}
	if dir := newestVersionDir(root); dir != "" {
		return dir, nil
	}
	if path, err := lookPath("initdb"); err == nil {
		if dir := filepath.Dir(path); hasBinaries(dir) {
			return dir, nil
		}
	}
	return "", ErrNotFound
}

// newestVersionDir returns root/<version>/bin for the highest numeric
// version whose bin directory has both binaries, or "" if none does.
func newestVersionDir(root string) string {
	entries, err := os.ReadDir(root)
	if err != nil {
		return ""
	}
	var best []int
	bestDir := ""
	for _, e := range entries {
		v, ok := parseVersion(e.Name())
		if !ok {
			continue
		}
		dir := filepath.Join(root, e.Name(), "bin")
		if !hasBinaries(dir) {
			continue
		}
		if bestDir == "" || versionLess(best, v) {
			best, bestDir = v, dir
		}
	}
	return bestDir
}

// parseVersion parses "15" or "9.6" into its numeric parts.
func parseVersion(s string) ([]int, bool) {
	parts := strings.Split(s, ".")
	v := make([]int, 0, len(parts))
	for _, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return nil, false
		}
		v = append(v, n)
	}
	return v, true
}

func versionLess(a, b []int) bool {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return len(a) < len(b)
}

func hasBinaries(dir string) bool {
	return isExecutable(filepath.Join(dir, "initdb")) && isExecutable(filepath.Join(dir, "postgres"))
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// defaultLookPath is exec.LookPath, kept as a variable's value so that
// findBinDir can be tested without depending on PATH.
var defaultLookPath = exec.LookPath
