package docker

import (
	"context"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
)

// Built reports whether NewBackend built the image (false: it reused one).
func Built(b *Backend) bool { return b.built }

// ParseLdd exposes the ldd output parser.
var ParseLdd = parseLdd

// ImageContext returns the default image's tag and build context (a tar) for
// the host's redis-server.
func ImageContext(ctx context.Context) (tag string, tarball []byte, err error) {
	bin, err := findRedisServer()
	if err != nil {
		return "", nil, err
	}
	fs, err := collectFiles(ctx, bin)
	if err != nil {
		return "", nil, err
	}
	bc, err := buildContext(fs)
	if err != nil {
		return "", nil, err
	}
	return bc.tag(), bc.tar, nil
}

// SetDockerHost makes NewBackend talk to the engine at host (normally one
// that does not exist) and returns a function restoring the default. Tests
// using it must not run in parallel with others.
func SetDockerHost(host string) (restore func()) {
	old := newDockerClient
	newDockerClient = func(context.Context) (*testcontainers.DockerClient, error) {
		c, err := client.New(client.WithHost(host))
		if err != nil {
			return nil, err
		}
		return &testcontainers.DockerClient{Client: c}, nil
	}
	return func() { newDockerClient = old }
}
