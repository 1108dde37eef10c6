package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Environment variables read by the commands that talk to Redis nodes. The
// password is deliberately not a flag: command lines are visible to every
// user of the machine (ps, /proc/PID/cmdline).
const (
	envNodes    = "REDFENCE_NODES"
	envUsername = "REDFENCE_USERNAME"
	envPassword = "REDFENCE_PASSWORD"
)

// cliClientTimeout is the dial, read and write timeout of the commands'
// Redis clients. Lock operations are bounded more tightly by their per-node
// timeout.
const cliClientTimeout = time.Second

// connFlags are the flags that say which nodes to talk to and how: --nodes
// and the TLS settings. Credentials come from the environment only.
type connFlags struct {
	nodes         string
	tls           bool
	tlsCA         string
	tlsCert       string
	tlsKey        string
	tlsServerName string
	tlsInsecure   bool
}

// register adds the connection flags to fs.
func (f *connFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.nodes, "nodes", "", "comma-separated `host:port,...` list of the Redis nodes (default $"+envNodes+")")
	fs.BoolVar(&f.tls, "tls", false, "connect with TLS (implied by the other -tls-* flags)")
	fs.StringVar(&f.tlsCA, "tls-ca", "", "PEM `file` of CA certificates to verify the nodes with (default: the system's)")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "PEM `file` of the client certificate, for nodes that require one (with -tls-key)")
	fs.StringVar(&f.tlsKey, "tls-key", "", "PEM `file` of the client certificate's private key (with -tls-cert)")
	fs.StringVar(&f.tlsServerName, "tls-server-name", "", "`name` to verify the nodes' certificates against (default: each node's host)")
	fs.BoolVar(&f.tlsInsecure, "tls-insecure-skip-verify", false, "do not verify the nodes' certificates (testing only: anyone on the path can impersonate a node)")
}

// connConfig is the validated result of connFlags and the environment.
type connConfig struct {
	addrs    []string
	username string
	password string
	tls      *tls.Config // nil: plain TCP
}

// resolve validates the flags, falling back to the environment (read with
// getenv) for the node list, and reads the TLS files. Its errors are usage
// errors, worded for the command line.
func (f *connFlags) resolve(getenv func(string) string) (connConfig, error) {
	var c connConfig
	list, source := f.nodes, "-nodes"
	if list == "" {
		list, source = getenv(envNodes), "$"+envNodes
	}
	if strings.TrimSpace(list) == "" {
		return c, fmt.Errorf("no nodes given: use -nodes host:port,... or set $%s", envNodes)
	}
	addrs, err := parseAddrs(list)
	if err != nil {
		return c, fmt.Errorf("%s: %w", source, err)
	}
	c.addrs = addrs
	c.username, c.password = getenv(envUsername), getenv(envPassword)
	if c.tls, err = f.tlsConfig(); err != nil {
		return c, err
	}
	return c, nil
}

// parseAddrs splits a comma-separated node list and checks that each entry
// is host:port with a port in 1-65535 and that no entry repeats. Spaces
// around entries are ignored.
func parseAddrs(list string) ([]string, error) {
	var addrs []string
	seen := make(map[string]int)
	for i, a := range strings.Split(list, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			return nil, fmt.Errorf("entry %d is empty (a stray comma?)", i+1)
		}
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			return nil, fmt.Errorf("%q is not host:port: %w", a, err)
		}
		if host == "" {
			return nil, fmt.Errorf("%q has no host", a)
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			return nil, fmt.Errorf("%q: port %q is not a number in 1-65535", a, port)
		}
		key := strings.ToLower(a)
		if j, dup := seen[key]; dup {
			return nil, fmt.Errorf("%q is given twice (entries %d and %d): each node must be listed once", a, j, i+1)
		}
		seen[key] = i + 1
		addrs = append(addrs, a)
	}
	return addrs, nil
}

// tlsConfig returns the TLS configuration the flags ask for, or nil when
// none of them was given.
func (f *connFlags) tlsConfig() (*tls.Config, error) {
	if !f.tls && f.tlsCA == "" && f.tlsCert == "" && f.tlsKey == "" && f.tlsServerName == "" && !f.tlsInsecure {
		return nil, nil
	}
	c := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         f.tlsServerName,
		InsecureSkipVerify: f.tlsInsecure,
	}
	if f.tlsCA != "" {
		pem, err := os.ReadFile(f.tlsCA)
		if err != nil {
			return nil, fmt.Errorf("-tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("-tls-ca: no PEM certificate found in %s", f.tlsCA)
		}
		c.RootCAs = pool
	}
	switch {
	case f.tlsCert != "" && f.tlsKey != "":
		cert, err := tls.LoadX509KeyPair(f.tlsCert, f.tlsKey)
		if err != nil {
			return nil, fmt.Errorf("-tls-cert/-tls-key: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	case f.tlsCert != "":
		return nil, errors.New("-tls-cert needs -tls-key")
	case f.tlsKey != "":
		return nil, errors.New("-tls-key needs -tls-cert")
	}
	return c, nil
}

// newClients returns one go-redis client per address. The clients honour
// context deadlines (so a request abandoned at the per-node timeout ends
// there), never retry a command, dial once, and time out dialing, reading
// and writing after cliClientTimeout. Close them with closeClients.
func (c connConfig) newClients() []redis.UniversalClient {
	clients := make([]redis.UniversalClient, len(c.addrs))
	for i, a := range c.addrs {
		var tc *tls.Config
		if c.tls != nil {
			tc = c.tls.Clone()
		}
		clients[i] = redis.NewClient(&redis.Options{
			Addr:                  a,
			Username:              c.username,
			Password:              c.password,
			TLSConfig:             tc,
			ContextTimeoutEnabled: true,
			MaxRetries:            -1,
			DialerRetries:         1,
			DialTimeout:           cliClientTimeout,
			ReadTimeout:           cliClientTimeout,
			WriteTimeout:          cliClientTimeout,
		})
	}
	return clients
}

// closeClients closes every client, reporting the failures.
func closeClients(clients []redis.UniversalClient) error {
	var errs []error
	for _, c := range clients {
		if err := c.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// warmUp opens a connection to every node in parallel (a PING, bounded by
// cliClientTimeout and ctx), ignoring failures: the first lock round then
// does not spend its short per-node timeout on dialing and the TLS
// handshake. A node that fails here fails, and is reported, in the round.
func warmUp(ctx context.Context, clients []redis.UniversalClient) {
	ctx, cancel := context.WithTimeout(ctx, cliClientTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Go(func() { _ = c.Ping(ctx).Err() })
	}
	wg.Wait()
}

// connUsage is the part of every node command's help that describes the
// connection settings.
const connUsage = `Nodes and credentials: -nodes (or $REDFENCE_NODES) lists the nodes as
host:port,host:port,... The username and password come only from the
environment, $REDFENCE_USERNAME and $REDFENCE_PASSWORD: there is no
-password flag, because command lines are visible to other users.
`
