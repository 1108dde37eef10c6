package docker

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// DefaultStartTimeout bounds the wait for a container to answer PING after it
// is started (by StartNodes or Node.Start) unless WithStartTimeout says
// otherwise.
const DefaultStartTimeout = 30 * time.Second

// Logger receives testcontainers-go's progress messages. *log.Logger from
// the standard library satisfies it.
type Logger interface {
	Printf(format string, args ...any)
}

// Option configures NewBackend.
type Option interface{ apply(*config) }

type config struct {
	image        string
	imageSet     bool
	startTimeout time.Duration
	logger       Logger
}

// defaults is the one place the defaults live.
func defaults() config {
	return config{startTimeout: DefaultStartTimeout, logger: discard{}}
}

func (c *config) validate() error {
	var errs []error
	if c.imageSet && strings.TrimSpace(c.image) == "" {
		errs = append(errs, errors.New("WithImage: image name is blank"))
	}
	if c.startTimeout <= 0 {
		errs = append(errs, fmt.Errorf("WithStartTimeout: %v is not positive", c.startTimeout))
	}
	if c.logger == nil {
		errs = append(errs, errors.New("WithLogger: logger is nil"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("docker: invalid option: %w", errors.Join(errs...))
	}
	return nil
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithImage runs the nodes from the named Redis image instead of building
// one from the host's redis-server. testcontainers-go pulls it if it is not
// present locally. The image must have redis-server on its PATH: the backend
// runs it directly as the entrypoint (any entrypoint script is bypassed, so
// Redis runs as root). NodeSpec.Clock additionally needs a glibc-based image,
// because the clock shim is compiled on the host and bind-mounted. The
// default is to build (or reuse) the image redfence/redis-scratch:<hash>.
func WithImage(name string) Option {
	return optionFunc(func(c *config) { c.image, c.imageSet = name, true })
}

// WithStartTimeout bounds the wait for each container to answer PING after
// it starts. The default is DefaultStartTimeout (30s).
func WithStartTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) { c.startTimeout = d })
}

// WithLogger sends testcontainers-go's messages (image builds, container
// lifecycle) to l. The default discards them. Note that testcontainers-go
// prints one "Connected to docker" banner per process to its own default
// logger regardless.
func WithLogger(l Logger) Option {
	return optionFunc(func(c *config) { c.logger = l })
}

type discard struct{}

func (discard) Printf(string, ...any) {}
