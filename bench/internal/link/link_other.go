//go:build !linux

package link

import (
	"context"
	"errors"
	"time"

	"github.com/redfence/redfence/bench/internal/rig"
)

var errLinux = errors.New("link: needs Linux (network namespaces and TUN devices)")

// Link is a network path to nodes behind a delay; only on Linux.
type Link struct{}

// Option configures Open.
type Option interface{ apply() }

// WithMTU sets the MTU of both devices (Linux only).
func WithMTU(int) Option { return nil }

// Open fails: links need Linux.
func Open(context.Context, time.Duration, ...Option) (*Link, error) { return nil, errLinux }

// Check fails: links need Linux.
func Check() error { return errLinux }

// RunWireIfChild does nothing: there is no wire without Linux.
func RunWireIfChild() {}

// Close does nothing.
func (l *Link) Close() error { return nil }

// Stats returns nothing.
func (l *Link) Stats() Stats { return Stats{} }

// Latency returns 0.
func (l *Link) Latency() time.Duration { return 0 }

// MTU returns 0.
func (l *Link) MTU() int { return 0 }

// Addrs returns nothing.
func (l *Link) Addrs() (host, nodes string) { return "", "" }

// Devices returns nothing.
func (l *Link) Devices() (host, nodes string) { return "", "" }

// Host returns loopback.
func (l *Link) Host() rig.Host { return rig.Loopback }
