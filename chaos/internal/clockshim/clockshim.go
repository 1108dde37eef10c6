package clockshim

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Source is the C source of the shim library.
//
//go:embed csrc/shim.c
var Source string

// EnvFile names the environment variable that tells the shim which file
// holds the clock offset.
const EnvFile = "REDFENCE_CLOCK_OFFSET_FILE"

// LibName is the file name Build gives the compiled library.
const LibName = "redfence-clockshim.so"

// offsetWidth is the fixed size of the offset file: a left-aligned decimal
// number of milliseconds, padded with spaces and ended by a newline. int64
// needs at most 20 characters with its sign.
const offsetWidth = 24

// MaxOffset bounds the offset WriteOffset accepts in either direction, so
// the shim's microsecond arithmetic cannot overflow.
const MaxOffset = 100 * 365 * 24 * time.Hour

// ErrNoCompiler is wrapped by Build's error when gcc is not installed.
var ErrNoCompiler = errors.New("gcc not found: apt-get install gcc")

// BuildError reports that gcc ran but did not produce the library.
type BuildError struct {
	// Output is what gcc printed.
	Output string
	// Err is the underlying cause: gcc's exit error or the context's error.
	Err error
}

// Error implements error.
func (e *BuildError) Error() string {
	msg := "clockshim: compiling the shim with gcc: " + e.Err.Error()
	if out := strings.TrimSpace(e.Output); out != "" {
		msg += "\n" + out
	}
	return msg
}

// Unwrap returns the underlying cause.
func (e *BuildError) Unwrap() error { return e.Err }

// buildWaitDelay bounds how long Build waits for gcc's output after its
// context ends.
const buildWaitDelay = time.Second

// Build compiles the shim into dir/LibName with
// `gcc -shared -fPIC -O2 -o dir/LibName shim.c -ldl` and returns the
// library's absolute path. dir must exist; shim.c is written there too. The
// compile is bounded by ctx.
func Build(ctx context.Context, dir string) (soPath string, err error) {
	if ctx == nil {
		return "", errors.New("clockshim: Build called with a nil context")
	}
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		return "", fmt.Errorf("clockshim: %w (%w)", ErrNoCompiler, err)
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("clockshim: build directory: %w", err)
	}
	src := filepath.Join(dir, "shim.c")
	if err := os.WriteFile(src, []byte(Source), 0o644); err != nil {
		return "", fmt.Errorf("clockshim: writing the shim source: %w", err)
	}
	so := filepath.Join(dir, LibName)
	cmd := exec.CommandContext(ctx, gcc, "-shared", "-fPIC", "-O2", "-o", so, src, "-ldl")
	cmd.Dir = dir
	cmd.WaitDelay = buildWaitDelay
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			err = errors.Join(err, ctxErr)
		}
		return "", &BuildError{Output: out.String(), Err: err}
	}
	return so, nil
}

// WriteOffset makes every process whose shim reads path see the wall clock
// d ahead of the real one (behind when d is negative), from its next
// gettimeofday call. The offset has millisecond resolution: d is truncated
// towards zero. The file is created if missing and otherwise overwritten in
// place (same inode, fixed width), never truncated, because running
// processes keep it open. An offset beyond MaxOffset is rejected.
func WriteOffset(path string, d time.Duration) error {
	if d > MaxOffset || d < -MaxOffset {
		return fmt.Errorf("clockshim: offset %v is beyond the limit of ±%v", d, MaxOffset)
	}
	buf := make([]byte, 0, offsetWidth)
	buf = strconv.AppendInt(buf, d.Milliseconds(), 10)
	for len(buf) < offsetWidth-1 {
		buf = append(buf, ' ')
	}
	buf = append(buf, '\n')
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("clockshim: opening offset file: %w", err)
	}
	_, err = f.WriteAt(buf, 0)
	if cErr := f.Close(); err == nil {
		err = cErr
	}
	if err != nil {
		return fmt.Errorf("clockshim: writing offset file %s: %w", path, err)
	}
	return nil
}
