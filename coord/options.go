package coord

import "time"

// Defaults.
const (
	// DefaultRetention is how long a done marker refuses duplicates.
	DefaultRetention = 24 * time.Hour
	// DefaultClaimPrefix and DefaultElectionPrefix start the lock keys of
	// claims and elections (after the lock client's own prefix).
	DefaultClaimPrefix    = "claim:"
	DefaultElectionPrefix = "election:"
	// DefaultNodeTimeout bounds each request of coord's own scripts to one
	// node.
	DefaultNodeTimeout = 100 * time.Millisecond
	// DefaultPollInterval is how often Observe reads the leader.
	DefaultPollInterval = 500 * time.Millisecond
)

// ClaimsOption configures NewClaims.
type ClaimsOption interface{ applyClaims(*claimsConfig) }

// ElectionOption configures NewElection.
type ElectionOption interface{ applyElection(*electionConfig) }

// Option configures either NewClaims or NewElection.
type Option interface {
	ClaimsOption
	ElectionOption
}

type common struct {
	prefix      string
	prefixSet   bool
	ttl         time.Duration
	nodeTimeout time.Duration
}

type claimsConfig struct {
	common
	retention time.Duration
	fencing   bool
}

type electionConfig struct {
	common
	poll time.Duration
}

type commonOption func(*common)

func (f commonOption) applyClaims(c *claimsConfig)     { f(&c.common) }
func (f commonOption) applyElection(c *electionConfig) { f(&c.common) }

type claimsOption func(*claimsConfig)

func (f claimsOption) applyClaims(c *claimsConfig) { f(c) }

type electionOption func(*electionConfig)

func (f electionOption) applyElection(c *electionConfig) { f(c) }

// WithKeyPrefix sets the prefix of the lock keys (after the lock client's
// own prefix): the claim of id is the lock prefix+id, an election's lock is
// prefix+name. The defaults are "claim:" and "election:".
func WithKeyPrefix(p string) Option {
	return commonOption(func(c *common) { c.prefix, c.prefixSet = p, true })
}

// WithTTL sets the TTL of the claim's or the leadership's lease: how long it
// lasts without KeepAlive or Extend. It is validated by the lock client (at
// least 10ms, at most the restart quarantine). The default is the lock
// client's TTL (8s unless it was configured otherwise).
func WithTTL(d time.Duration) Option {
	return commonOption(func(c *common) { c.ttl = d })
}

// WithNodeTimeout bounds each request of coord's own scripts (marking done,
// inspecting a claim, proclaiming, reading the leader) to one node. It must
// be positive. The lock's own requests use the lock client's node timeout.
// The default is 100ms.
func WithNodeTimeout(d time.Duration) Option {
	return commonOption(func(c *common) { c.nodeTimeout = d })
}

// WithRetention sets how long a done marker lives, refusing duplicate claims
// of the id. It must be at least 1ms. The default is 24h.
func WithRetention(d time.Duration) ClaimsOption {
	return claimsOption(func(c *claimsConfig) { c.retention = d })
}

// WithFencing turns fencing tokens on for claims: every owned Claim carries
// a Token that increases with every claim of the same id. It costs one fence
// hash per id on every node, never deleted (docs/fencing.md). The default is
// the lock client's setting (off unless it was made WithFencing).
func WithFencing() ClaimsOption {
	return claimsOption(func(c *claimsConfig) { c.fencing = true })
}

// WithPollInterval sets how often Observe reads the leader. It must be at
// least 1ms. The default is 500ms.
func WithPollInterval(d time.Duration) ElectionOption {
	return electionOption(func(c *electionConfig) { c.poll = d })
}

// applyAll applies opts to cfg in order, skipping nil ones.
func applyAll[O comparable, C any](cfg *C, opts []O, apply func(O, *C)) {
	var none O
	for _, o := range opts {
		if o != none {
			apply(o, cfg)
		}
	}
}

// settle resolves the common settings (defaultPrefix unless one was set),
// checks the constructor's own interval (named what; at least 1ms) and
// returns the quorum of locker's nodes: the checks NewClaims and
// NewElection share, in the order they report them.
func (c *common) settle(locker Locker, defaultPrefix, what string, interval time.Duration) (quorum, error) {
	if err := c.resolve(defaultPrefix); err != nil {
		return quorum{}, err
	}
	if interval < time.Millisecond {
		return quorum{}, invalid(what, "%v: must be at least 1ms", interval)
	}
	return quorumOf(locker)
}

func (c *common) resolve(defaultPrefix string) error {
	if !c.prefixSet {
		c.prefix = defaultPrefix
	}
	switch {
	case c.nodeTimeout == 0:
		c.nodeTimeout = DefaultNodeTimeout
	case c.nodeTimeout < 0:
		return invalid("node timeout", "%v: must be positive", c.nodeTimeout)
	}
	if c.ttl < 0 {
		return invalid("TTL", "%v: must be positive", c.ttl)
	}
	return nil
}
