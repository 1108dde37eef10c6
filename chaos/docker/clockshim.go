package docker

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/redfence/redfence/chaos/internal/clockshim"
)

// clockShim builds the gettimeofday shim into the backend's directory once
// and returns its path inside containers.
func (b *Backend) clockShim(ctx context.Context) (string, error) {
	b.shimMu.Lock()
	defer b.shimMu.Unlock()
	if b.shim != "" {
		return b.shim, nil
	}
	so, err := clockshim.Build(ctx, b.dir)
	if err != nil {
		return "", fmt.Errorf("docker: build clock shim: %w", err)
	}
	rel, err := filepath.Rel(b.dir, so)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		// Built elsewhere: copy it under the mounted directory.
		rel = filepath.Base(so)
		if err := copyFile(filepath.Join(b.dir, rel), so); err != nil {
			return "", fmt.Errorf("docker: clock shim: %w", err)
		}
	}
	if err := os.Chmod(filepath.Join(b.dir, rel), 0o755); err != nil {
		return "", fmt.Errorf("docker: clock shim: %w", err)
	}
	if b.imageFiles != nil {
		// The default image holds only what redis-server loads; a library
		// the shim also needs (libdl, say) would make the loader ignore the
		// preload, silently. Bind-mount such libraries from the host, whose
		// libc the image was built from, at the same paths.
		libs, err := lddLibs(ctx, so)
		if err != nil {
			return "", fmt.Errorf("docker: clock shim: %w", err)
		}
		for _, l := range libs {
			if b.imageFiles[l] {
				continue
			}
			real, err := filepath.EvalSymlinks(l)
			if err != nil {
				return "", fmt.Errorf("docker: clock shim: %w", err)
			}
			b.shimBinds = append(b.shimBinds, real+":"+l+":ro")
		}
	}
	b.shim = shimMount + "/" + filepath.ToSlash(rel)
	return b.shim, nil
}

func copyFile(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}
