package docker

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
)

// EnvRedisServer names the environment variable consulted for the host's
// redis-server when the default image is built; when it is unset,
// "redis-server" is looked up on PATH.
const EnvRedisServer = "REDFENCE_REDIS_SERVER"

// ImageRepo is the repository of the image NewBackend builds by default; the
// tag is a hash of the image's content, so an unchanged host reuses it.
const ImageRepo = "redfence/redis-scratch"

// redisServerPath is where the image keeps redis-server. The name matters:
// Redis picks its mode from argv[0] (on Debian redis-server is a link to
// redis-check-rdb).
const redisServerPath = "/usr/local/bin/redis-server"

// imageLabel marks images built by this package; its value is the full hash.
const imageLabel = "org.redfence.image.hash"

// imageBuildTimeout bounds an image build (or pull) on top of the caller's
// context.
const imageBuildTimeout = 5 * time.Minute

// lddTimeout bounds one ldd run.
const lddTimeout = 30 * time.Second

// rootfsFile is one regular file of the image: its path in the image and the
// host file (symlinks resolved) it is copied from.
type rootfsFile struct {
	dst  string
	src  string
	mode os.FileMode
}

// imageContext is a docker build context: a Dockerfile and a rootfs/ tree.
type imageContext struct {
	tar   []byte
	hash  string // hex sha256 of tar
	files []rootfsFile
}

// tag is the image reference for this content.
func (c *imageContext) tag() string { return ImageRepo + ":" + c.hash[:16] }

// findRedisServer resolves the host's redis-server: $REDFENCE_REDIS_SERVER,
// else PATH.
func findRedisServer() (string, error) {
	p := os.Getenv(EnvRedisServer)
	if p == "" {
		lp, err := exec.LookPath("redis-server")
		if err != nil {
			return "", fmt.Errorf("%w: %w", ErrNoRedisServer, err)
		}
		p = lp
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrNoRedisServer, err)
	}
	st, err := os.Stat(real)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrNoRedisServer, err)
	}
	if !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("%w: %s (resolved from %s) is not an executable file", ErrNoRedisServer, real, p)
	}
	return real, nil
}

// collectFiles lists redis-server, every shared library it loads and the
// dynamic loader, as image files at the libraries' absolute paths.
func collectFiles(ctx context.Context, bin string) ([]rootfsFile, error) {
	files := map[string]string{redisServerPath: bin}
	interp, err := elfInterpreter(bin)
	if err != nil {
		return nil, err
	}
	if interp != "" { // dynamically linked
		files[interp] = interp
		libs, err := lddLibs(ctx, bin)
		if err != nil {
			return nil, err
		}
		for _, l := range libs {
			files[l] = l
		}
	}
	list := make([]rootfsFile, 0, len(files))
	for dst, src := range files {
		real, err := filepath.EvalSymlinks(src)
		if err != nil {
			return nil, fmt.Errorf("docker: resolve %s: %w", src, err)
		}
		st, err := os.Stat(real)
		if err != nil {
			return nil, fmt.Errorf("docker: %w", err)
		}
		if !st.Mode().IsRegular() {
			return nil, fmt.Errorf("docker: %s (for %s) is not a regular file", real, dst)
		}
		list = append(list, rootfsFile{dst: dst, src: real, mode: st.Mode().Perm()})
	}
	sort.Slice(list, func(i, j int) bool { return list[i].dst < list[j].dst })
	return list, nil
}

// lddLibs runs ldd on an ELF file and returns the absolute paths of the
// libraries (and loader) it loads.
func lddLibs(ctx context.Context, file string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, lddTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ldd", file).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && len(ee.Stderr) > 0 {
			err = fmt.Errorf("%w: %s", err, bytes.TrimSpace(ee.Stderr))
		}
		return nil, fmt.Errorf("docker: ldd %s: %w", file, err)
	}
	libs, err := parseLdd(out)
	if err != nil {
		return nil, fmt.Errorf("docker: ldd %s: %w", file, err)
	}
	return libs, nil
}

// elfInterpreter returns the PT_INTERP of an ELF executable, "" for a static
// one.
func elfInterpreter(bin string) (string, error) {
	f, err := elf.Open(bin)
	if err != nil {
		return "", fmt.Errorf("docker: read ELF %s: %w", bin, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b, err := io.ReadAll(p.Open())
		if err != nil {
			return "", fmt.Errorf("docker: read ELF interpreter of %s: %w", bin, err)
		}
		return string(bytes.TrimRight(b, "\x00")), nil
	}
	return "", nil
}

// parseLdd extracts absolute library paths from ldd's output:
//
//	linux-vdso.so.1 (0x...)                       -> skipped (virtual)
//	libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)
//	/lib64/ld-linux-x86-64.so.2 (0x...)
//	libfoo.so.1 => not found                      -> error
func parseLdd(out []byte) ([]string, error) {
	var libs, missing []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if name, target, ok := strings.Cut(line, "=>"); ok {
			target = strings.TrimSpace(target)
			if strings.HasPrefix(target, "not found") {
				missing = append(missing, strings.TrimSpace(name))
				continue
			}
			p, _, _ := strings.Cut(target, " (")
			p = strings.TrimSpace(p)
			if path.IsAbs(p) {
				libs = append(libs, p)
			}
			continue
		}
		p, _, _ := strings.Cut(line, " (")
		if path.IsAbs(p) {
			libs = append(libs, p)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("libraries not found: %s", strings.Join(missing, ", "))
	}
	return libs, nil
}

// dockerfile is the build recipe: the rootfs copied onto an empty image.
const dockerfile = `FROM scratch
COPY rootfs/ /
ENV PATH=/usr/local/bin
WORKDIR /data
EXPOSE 6379/tcp
ENTRYPOINT ["` + redisServerPath + `"]
`

// buildContext makes a deterministic tar (fixed times and owners, sorted
// entries) holding the Dockerfile and rootfs/, and hashes it.
func buildContext(files []rootfsFile) (*imageContext, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0).UTC()
	hdr := func(name string, typ byte, mode int64, size int64) *tar.Header {
		return &tar.Header{Name: name, Typeflag: typ, Mode: mode, Size: size, ModTime: epoch,
			Uid: 0, Gid: 0, Format: tar.FormatPAX}
	}
	if err := tw.WriteHeader(hdr("Dockerfile", tar.TypeReg, 0o644, int64(len(dockerfile)))); err != nil {
		return nil, err
	}
	if _, err := io.WriteString(tw, dockerfile); err != nil {
		return nil, err
	}
	dirs := map[string]int64{"rootfs/": 0o755, "rootfs/data/": 0o755, "rootfs/tmp/": 0o1777}
	for _, f := range files {
		for d := path.Dir(f.dst); d != "/"; d = path.Dir(d) {
			dirs["rootfs"+d+"/"] = 0o755
		}
	}
	names := make([]string, 0, len(dirs))
	for d := range dirs {
		names = append(names, d)
	}
	sort.Strings(names) // parents sort before children
	for _, d := range names {
		if err := tw.WriteHeader(hdr(d, tar.TypeDir, dirs[d], 0)); err != nil {
			return nil, err
		}
	}
	for _, f := range files {
		if err := addFile(tw, hdr, f); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(buf.Bytes())
	return &imageContext{tar: buf.Bytes(), hash: hex.EncodeToString(sum[:]), files: files}, nil
}

func addFile(tw *tar.Writer, hdr func(string, byte, int64, int64) *tar.Header, f rootfsFile) error {
	r, err := os.Open(f.src)
	if err != nil {
		return fmt.Errorf("docker: %w", err)
	}
	defer r.Close()
	st, err := r.Stat()
	if err != nil {
		return fmt.Errorf("docker: %w", err)
	}
	if err := tw.WriteHeader(hdr("rootfs"+f.dst, tar.TypeReg, int64(f.mode), st.Size())); err != nil {
		return fmt.Errorf("docker: tar %s: %w", f.dst, err)
	}
	if _, err := io.Copy(tw, r); err != nil {
		return fmt.Errorf("docker: tar %s: %w", f.dst, err)
	}
	return nil
}

// ensureImage returns the default image's reference and the paths of the
// files in it, building it unless an image with the same content hash
// exists. built reports whether it did.
func ensureImage(ctx context.Context, cli *testcontainers.DockerClient, logger Logger) (ref string, paths map[string]bool, built bool, err error) {
	bin, err := findRedisServer()
	if err != nil {
		return "", nil, false, err
	}
	files, err := collectFiles(ctx, bin)
	if err != nil {
		return "", nil, false, err
	}
	bc, err := buildContext(files)
	if err != nil {
		return "", nil, false, fmt.Errorf("docker: build context: %w", err)
	}
	ref = bc.tag()
	paths = make(map[string]bool, len(files))
	for _, f := range files {
		paths[f.dst] = true
	}
	if _, err := cli.ImageInspect(ctx, ref); err == nil {
		return ref, paths, false, nil
	} else if !cerrdefs.IsNotFound(err) {
		return "", nil, false, fmt.Errorf("docker: inspect image %s: %w", ref, err)
	}

	ctx, cancel := context.WithTimeout(ctx, imageBuildTimeout)
	defer cancel()
	provider, err := testcontainers.NewDockerProvider(testcontainers.WithLogger(logger))
	if err != nil {
		return "", nil, false, fmt.Errorf("docker: build image %s: %w", ref, err)
	}
	defer provider.Close()
	var buildLog bytes.Buffer
	req := &testcontainers.ContainerRequest{FromDockerfile: testcontainers.FromDockerfile{
		ContextArchive: bytes.NewReader(bc.tar),
		Dockerfile:     "Dockerfile",
		Repo:           ImageRepo,
		Tag:            bc.hash[:16],
		KeepImage:      true,
		BuildLogWriter: &buildLog,
		BuildOptionsModifier: func(o *client.ImageBuildOptions) {
			o.Labels = map[string]string{imageLabel: bc.hash}
		},
	}}
	got, err := provider.BuildImage(ctx, req)
	if err != nil {
		return "", nil, false, fmt.Errorf("docker: build image %s: %w\n--- build log ---\n%s", ref, err, buildLog.String())
	}
	if got != ref {
		return "", nil, false, fmt.Errorf("docker: build image: built %s, expected %s", got, ref)
	}
	return ref, paths, true, nil
}

// ensurePulled makes sure a user-named image is present, pulling it through
// testcontainers-go (registry credentials as it finds them) if it is not, so
// that a missing image fails NewBackend rather than every StartNodes.
func ensurePulled(ctx context.Context, cli *testcontainers.DockerClient, ref string, logger Logger) error {
	if _, err := cli.ImageInspect(ctx, ref); err == nil {
		return nil
	} else if !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("docker: inspect image %s: %w", ref, err)
	}
	ctx, cancel := context.WithTimeout(ctx, imageBuildTimeout)
	defer cancel()
	provider, err := testcontainers.NewDockerProvider(testcontainers.WithLogger(logger))
	if err != nil {
		return fmt.Errorf("docker: pull image %s: %w", ref, err)
	}
	defer provider.Close()
	if err := provider.PullImage(ctx, ref); err != nil {
		return fmt.Errorf("docker: image %s is not present and cannot be pulled: %w", ref, err)
	}
	return nil
}
