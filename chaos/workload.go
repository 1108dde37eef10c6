package chaos

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/redfence/redfence/fencing"
)

// Lease is one acquisition of a lock, as the workload needs it.
// *redlock.Lease and *single.Lease satisfy it. If a Lease also has a
// Done() <-chan struct{} method, the workload stops holding it when Done is
// closed.
type Lease interface {
	// Token is the lease's fencing token (0 when the lock has none; the
	// fenced resource then rejects every write as invalid).
	Token() fencing.Token
	// ValidUntil is when the lease's validity ends; it should carry a
	// monotonic clock reading (time.Now().Add(d) does).
	ValidUntil() time.Time
	// Release gives the lease back.
	Release(ctx context.Context) error
}

// Locker is a lock under test: Acquire makes one attempt to take it, bounded
// by ctx, and returns a lease or an error.
type Locker interface {
	Acquire(ctx context.Context) (Lease, error)
}

// LockerFunc adapts a function to Locker.
type LockerFunc func(ctx context.Context) (Lease, error)

// Acquire calls f. A nil f returns an error wrapping ErrInvalidWorkload.
func (f LockerFunc) Acquire(ctx context.Context) (Lease, error) {
	if f == nil {
		return nil, fmt.Errorf("%w: nil LockerFunc", ErrInvalidWorkload)
	}
	return f(ctx)
}

// ErrNoLease is returned by a Locker from Adapt when the lock returned
// neither a lease nor an error.
var ErrNoLease = errors.New("chaos: lock returned no lease and no error")

// Adapt makes a Locker of any lock with a TryLock method that returns a
// Lease, such as *redlock.Mutex and *single.Mutex: chaos.Adapt(m). Each
// Acquire is one TryLock. A nil m gives a Locker whose Acquire returns an
// error wrapping ErrInvalidWorkload.
func Adapt[L Lease](m interface {
	TryLock(ctx context.Context) (L, error)
}) Locker {
	if isNil(m) {
		return LockerFunc(func(context.Context) (Lease, error) {
			return nil, fmt.Errorf("%w: Adapt of a nil lock", ErrInvalidWorkload)
		})
	}
	return LockerFunc(func(ctx context.Context) (Lease, error) {
		l, err := m.TryLock(ctx)
		if err != nil {
			return nil, err
		}
		if isNil(l) {
			return nil, ErrNoLease
		}
		return l, nil
	})
}

// isNil reports whether v is nil or an interface holding a nil pointer, map,
// slice, function or channel.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return rv.IsNil()
	}
	return false
}

// Counter is the unfenced control: a plain register the workload increments
// with read-modify-write under the lock, with no token. Overlapping holders
// lose increments.
type Counter interface {
	Get(ctx context.Context) (int64, error)
	Set(ctx context.Context, v int64) error
}

// MemoryCounter is a Counter in memory. The zero value is ready to use; it is
// safe for concurrent use (each Get and Set is atomic, a read-modify-write is
// not).
type MemoryCounter struct {
	mu sync.Mutex
	v  int64 // guarded by mu
}

// Get returns the value. It fails only if ctx is done.
func (c *MemoryCounter) Get(ctx context.Context) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.v, nil
}

// Set stores v. It fails only if ctx is done.
func (c *MemoryCounter) Set(ctx context.Context, v int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.v = v
	return nil
}

// ErrInvalidWorkload reports an invalid Workload or Run argument.
var ErrInvalidWorkload = errors.New("chaos: invalid workload")

// Workload drives a lock: Clients goroutines, each looping acquire, fenced
// write and read of the fenced resource, one unfenced read-modify-write
// increment of the control counter, hold, release; every operation recorded
// in a History. Zero fields take their defaults; Run does not modify the
// Workload, so one value can be run many times.
type Workload struct {
	// Locker is the lock every client uses, unless Lockers is set.
	Locker Locker
	// Lockers gives each client its own Locker (client i uses Lockers[i]),
	// for example one per connection set so that network faults can hit
	// clients differently. Clients defaults to len(Lockers) and must equal
	// it when set.
	Lockers []Locker
	// Clients is the number of concurrent clients. The default is 4.
	Clients int
	// Hold is how long a client holds a granted lease before releasing it,
	// cut short when the lease's validity ends or Run's ctx ends. The
	// default is 10ms.
	Hold time.Duration
	// AcquireTimeout bounds each Acquire. The default is 1s.
	AcquireTimeout time.Duration
	// OpTimeout bounds each fenced write, counter Get and Set, and Release.
	// These run to completion after Run's ctx ends (detached from its
	// cancellation), so that a cycle in progress is recorded whole. The
	// default is 1s.
	OpTimeout time.Duration
	// Backoff is the mean pause after a failed acquire (uniformly jittered
	// between Backoff/2 and 3*Backoff/2). The default is 5ms.
	Backoff time.Duration
	// Window is the deliberate pause between the control counter's read and
	// its write, so that overlapping holders lose updates. The default is
	// 1ms.
	Window time.Duration
	// Slack is how much later than Call + AcquireTimeout an Acquire may
	// return before Stats counts it as overrunning its deadline. The default
	// is 50ms.
	Slack time.Duration
	// Guard is the fenced resource's guard. The default is a new
	// fencing.MemoryGuard for each Run. The resource's value is kept in
	// memory; a write applies it only if Guard.Check accepted the token.
	Guard fencing.Guard
	// Resource names the fenced resource in Guard. The default is "chaos".
	Resource string
	// Control is the unfenced control counter. The default is a new
	// MemoryCounter for each Run.
	Control Counter
	// Seed seeds the backoff jitter.
	Seed int64
}

// Defaults of the Workload fields.
const (
	DefaultClients        = 4
	DefaultHold           = 10 * time.Millisecond
	DefaultAcquireTimeout = time.Second
	DefaultOpTimeout      = time.Second
	DefaultBackoff        = 5 * time.Millisecond
	DefaultWindow         = time.Millisecond
	DefaultSlack          = 50 * time.Millisecond
	DefaultResource       = "chaos"
)

// withDefaults returns a copy of w with defaults filled in, or an error.
func (w *Workload) withDefaults() (Workload, error) {
	c := *w
	switch {
	case len(c.Lockers) > 0:
		if c.Clients == 0 {
			c.Clients = len(c.Lockers)
		}
		if c.Clients != len(c.Lockers) {
			return c, fmt.Errorf("%w: Clients is %d but %d Lockers were given", ErrInvalidWorkload, c.Clients, len(c.Lockers))
		}
		for i, l := range c.Lockers {
			if isNil(l) {
				return c, fmt.Errorf("%w: Lockers[%d] is nil", ErrInvalidWorkload, i)
			}
		}
	case isNil(c.Locker):
		return c, fmt.Errorf("%w: no Locker", ErrInvalidWorkload)
	}
	if c.Clients == 0 {
		c.Clients = DefaultClients
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"Hold", &c.Hold, DefaultHold},
		{"AcquireTimeout", &c.AcquireTimeout, DefaultAcquireTimeout},
		{"OpTimeout", &c.OpTimeout, DefaultOpTimeout},
		{"Backoff", &c.Backoff, DefaultBackoff},
		{"Window", &c.Window, DefaultWindow},
		{"Slack", &c.Slack, DefaultSlack},
	} {
		if *d.v < 0 {
			return c, fmt.Errorf("%w: negative %s %v", ErrInvalidWorkload, d.name, *d.v)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if c.Clients < 0 {
		return c, fmt.Errorf("%w: negative Clients %d", ErrInvalidWorkload, c.Clients)
	}
	if isNil(c.Guard) {
		c.Guard = fencing.NewMemoryGuard()
	}
	if c.Resource == "" {
		c.Resource = DefaultResource
	}
	if isNil(c.Control) {
		c.Control = &MemoryCounter{}
	}
	return c, nil
}

// Run runs the workload, recording into h, until ctx ends, then waits for
// every client to finish its cycle (each step bounded by its timeout) and
// returns the run's statistics. Ending ctx is the normal way to stop it:
// Run returns an error only for an invalid Workload or h (wrapping
// ErrInvalidWorkload) or when the control counter cannot be read at the
// start or the end (then the clients never ran, or Stats is returned with
// the error).
func (w *Workload) Run(ctx context.Context, h *History) (*Stats, error) {
	if w == nil || h == nil {
		return nil, fmt.Errorf("%w: Run on a nil Workload or History", ErrInvalidWorkload)
	}
	cfg, err := w.withDefaults()
	if err != nil {
		return nil, err
	}
	detached := context.WithoutCancel(ctx)
	initial, err := getCounter(detached, cfg.Control, cfg.OpTimeout)
	if err != nil {
		return nil, fmt.Errorf("chaos: reading the control counter at the start: %w", err)
	}
	reg := &register{}
	start := h.Now()
	perClient := make([][]Op, cfg.Clients)
	var wg sync.WaitGroup
	for i := range cfg.Clients {
		locker := cfg.Locker
		if len(cfg.Lockers) > 0 {
			locker = cfg.Lockers[i]
		}
		c := &client{
			id:     i,
			cfg:    &cfg,
			locker: locker,
			h:      h,
			reg:    reg,
			rng:    rand.New(rand.NewPCG(uint64(cfg.Seed), uint64(i))),
		}
		wg.Go(func() {
			c.run(ctx)
			perClient[i] = c.ops
		})
	}
	wg.Wait()
	end := h.Now()
	var ops []Op
	for _, o := range perClient {
		ops = append(ops, o...)
	}
	st := ComputeStats(ops, start, end, cfg.AcquireTimeout, cfg.Slack)
	final, err := getCounter(detached, cfg.Control, cfg.OpTimeout)
	if err != nil {
		return st, fmt.Errorf("chaos: reading the control counter at the end: %w", err)
	}
	st.ControlValue = final - initial
	st.LostUpdates = max(0, st.ControlIncrements-int(final-initial))
	return st, nil
}

func getCounter(ctx context.Context, c Counter, timeout time.Duration) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return c.Get(ctx)
}

// register is the fenced resource's value: a write applies its value only if
// its token is at least the one of the value held, so that writes the guard
// accepted in token order end in the same order whatever order they apply
// in, without holding a lock across the guard's I/O.
type register struct {
	mu    sync.Mutex
	token fencing.Token // guarded by mu
	value string        // guarded by mu
}

func (r *register) write(ctx context.Context, g fencing.Guard, resource string, t fencing.Token, v string) error {
	if err := g.Check(ctx, resource, t); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if t >= r.token {
		r.token, r.value = t, v
	}
	return nil
}

func (r *register) read() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.value
}

// client is one workload goroutine.
type client struct {
	id     int
	cfg    *Workload
	locker Locker
	h      *History
	reg    *register
	rng    *rand.Rand
	ops    []Op // completed operations, in order
}

func (c *client) run(ctx context.Context) {
	for ctx.Err() == nil {
		c.cycle(ctx)
	}
}

// wait waits d, or until ctx or stop ends; it reports whether d elapsed.
func wait(ctx context.Context, d time.Duration, stop <-chan struct{}) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-stop:
		return false
	}
}

// ErrAmbiguous marks an operation that may or may not have taken effect (a
// reply lost after the write ran). A Locker or Lease whose error wraps it has
// that operation recorded as Unknown, like a timeout.
var ErrAmbiguous = errors.New("chaos: outcome unknown")

// outcome classifies an operation's error: nil is OK; ErrAmbiguous, a
// timeout or an ended context is Unknown (it may have happened); anything
// else is Fail.
func outcome(err error) Status {
	if err == nil {
		return OK
	}
	if errors.Is(err, ErrAmbiguous) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return Unknown
	}
	var te interface{ Timeout() bool }
	if errors.As(err, &te) && te.Timeout() {
		return Unknown
	}
	return Fail
}

func (c *client) cycle(ctx context.Context) {
	actx, cancel := context.WithTimeout(ctx, c.cfg.AcquireTimeout)
	p := c.h.Invoke(c.id, Acquire)
	lease, err := c.locker.Acquire(actx)
	cancel()
	if err == nil && isNil(lease) {
		err = ErrNoLease
	}
	if err != nil {
		st := outcome(err)
		if errors.Is(err, ErrNoLease) {
			st = Fail
		}
		c.ops = append(c.ops, p.Complete(st, WithErr(err)))
		jitter := c.cfg.Backoff/2 + time.Duration(c.rng.Int64N(int64(c.cfg.Backoff)+1))
		wait(ctx, jitter, nil)
		return
	}
	acq := p.Complete(OK, WithToken(lease.Token()), WithValidUntil(lease.ValidUntil()))
	c.ops = append(c.ops, acq)
	var done <-chan struct{}
	if d, ok := lease.(interface{ Done() <-chan struct{} }); ok {
		done = d.Done()
	}
	// The steps of a cycle run detached from ctx's cancellation, each
	// bounded by OpTimeout, so that a cycle in progress when ctx ends is
	// recorded whole and the lease is released.
	detached := context.WithoutCancel(ctx)
	valid := func() bool { return time.Now().Before(lease.ValidUntil()) }
	if valid() {
		c.fencedWrite(detached, acq)
	}
	if valid() {
		c.increment(detached, acq.ID)
	}
	if hold := min(c.cfg.Hold, time.Until(lease.ValidUntil())); hold > 0 {
		wait(ctx, hold, done)
	}
	c.release(detached, lease, acq)
}

func (c *client) fencedWrite(ctx context.Context, acq Op) {
	value := fmt.Sprintf("c%d-l%d", c.id, acq.ID)
	wctx, cancel := context.WithTimeout(ctx, c.cfg.OpTimeout)
	p := c.h.Invoke(c.id, FencedWrite)
	err := c.reg.write(wctx, c.cfg.Guard, c.cfg.Resource, acq.Token, value)
	cancel()
	fields := []Field{WithToken(acq.Token), WithLease(acq.ID), WithValue(value), WithErr(err)}
	switch {
	case err == nil:
		c.ops = append(c.ops, p.Complete(OK, fields...))
	case errors.Is(err, fencing.ErrStaleToken):
		c.ops = append(c.ops, p.Complete(Fail, append(fields, WithNote(NoteStale))...))
	case errors.Is(err, fencing.ErrInvalidToken), errors.Is(err, fencing.ErrInvalidArgument):
		c.ops = append(c.ops, p.Complete(Fail, fields...))
	default:
		// A storage error: the guard may have recorded the token.
		c.ops = append(c.ops, p.Complete(Unknown, fields...))
		return
	}
	r := c.h.Invoke(c.id, Read)
	c.ops = append(c.ops, r.Complete(OK, WithLease(acq.ID), WithValue(c.reg.read())))
}

func (c *client) increment(ctx context.Context, lease int) {
	octx, cancel := context.WithTimeout(ctx, c.cfg.OpTimeout)
	defer cancel()
	p := c.h.Invoke(c.id, UnfencedWrite)
	v, err := c.cfg.Control.Get(octx)
	if err != nil {
		c.ops = append(c.ops, p.Complete(Fail, WithLease(lease), WithErr(err), WithNote("read failed")))
		return
	}
	if !wait(octx, c.cfg.Window, nil) {
		c.ops = append(c.ops, p.Complete(Fail, WithLease(lease), WithErr(octx.Err()), WithNote("timed out before the write")))
		return
	}
	err = c.cfg.Control.Set(octx, v+1)
	st := OK
	if err != nil {
		st = Unknown // the write may have landed
	}
	c.ops = append(c.ops, p.Complete(st, WithLease(lease), WithValue(fmt.Sprintf("%d->%d", v, v+1)), WithErr(err)))
}

func (c *client) release(ctx context.Context, lease Lease, acq Op) {
	rctx, cancel := context.WithTimeout(ctx, c.cfg.OpTimeout)
	defer cancel()
	p := c.h.Invoke(c.id, Release)
	err := lease.Release(rctx)
	c.ops = append(c.ops, p.Complete(outcome(err), WithLease(acq.ID), WithToken(acq.Token), WithErr(err)))
}

// Stats summarises one Run.
type Stats struct {
	// Start and End delimit the run on the history's clock.
	Start, End time.Duration
	// Grants counts granted acquires; AcquireFailed those that definitely
	// failed; AcquireUnknown those that timed out or were cancelled.
	Grants, AcquireFailed, AcquireUnknown int
	// FencedAccepted and FencedRejected count fenced writes the guard
	// accepted and rejected as stale; FencedErrors those that failed
	// otherwise (an invalid token, a storage error).
	FencedAccepted, FencedRejected, FencedErrors int
	// ControlAttempts counts read-modify-writes of the control counter;
	// ControlIncrements those whose write succeeded (the increments
	// expected); ControlValue how much the counter actually grew.
	ControlAttempts, ControlIncrements int
	ControlValue                       int64
	// LostUpdates is ControlIncrements - ControlValue, at least 0.
	LostUpdates int
	// P50, P99 and Max are acquire latencies (Return - Call) over every
	// acquire that returned, granted or not (nearest-rank percentiles).
	P50, P99, Max time.Duration
	// Overran counts acquires that returned later than Call +
	// AcquireTimeout + Slack, or never.
	Overran int
	// GrantTimes are the Return times of granted acquires, sorted.
	GrantTimes []time.Duration
}

// ComputeStats computes the statistics of ops, the operations of a run from
// start to end on the history's clock, with the run's acquire timeout and
// slack (see Workload). It does not set the control counter's ControlValue
// and LostUpdates, which need the counter itself.
func ComputeStats(ops []Op, start, end, acquireTimeout, slack time.Duration) *Stats {
	st := &Stats{Start: start, End: end}
	var lat []time.Duration
	for _, op := range ops {
		switch op.Kind {
		case Acquire:
			switch op.Status {
			case OK:
				st.Grants++
				st.GrantTimes = append(st.GrantTimes, op.Return)
			case Fail:
				st.AcquireFailed++
			default:
				st.AcquireUnknown++
			}
			if op.Return == Inf {
				st.Overran++
				continue
			}
			lat = append(lat, op.Return-op.Call)
			if op.Return-op.Call > acquireTimeout+slack {
				st.Overran++
			}
		case FencedWrite:
			switch {
			case op.Status == OK:
				st.FencedAccepted++
			case op.Status == Fail && op.Note == NoteStale:
				st.FencedRejected++
			default:
				st.FencedErrors++
			}
		case UnfencedWrite:
			st.ControlAttempts++
			if op.Status == OK {
				st.ControlIncrements++
			}
		}
	}
	slices.Sort(lat)
	slices.Sort(st.GrantTimes)
	st.P50 = Percentile(lat, 50)
	st.P99 = Percentile(lat, 99)
	if len(lat) > 0 {
		st.Max = lat[len(lat)-1]
	}
	return st
}

// Percentile returns the p-th percentile (0 < p <= 100) of sorted by the
// nearest-rank method: the smallest value with at least p% of the values at
// or below it. It returns 0 for an empty slice; p is clamped to (0, 100].
func Percentile(sorted []time.Duration, p float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(n)))
	return sorted[min(max(rank, 1), n)-1]
}

// Availability returns the fraction of the run's windows of length window,
// from Start, that saw at least one grant (an acquire returning granted in
// the window). Only whole windows count, unless the run is shorter than one
// window, which then counts as one. It returns 0 for a window <= 0.
func (s *Stats) Availability(window time.Duration) float64 {
	if s == nil || window <= 0 {
		return 0
	}
	n := int((s.End - s.Start) / window)
	if n < 1 {
		n = 1
	}
	seen := make([]bool, n)
	count := 0
	for _, t := range s.GrantTimes {
		if t < s.Start {
			continue
		}
		k := int((t - s.Start) / window)
		if k >= n || seen[k] {
			continue
		}
		seen[k] = true
		count++
	}
	return float64(count) / float64(n)
}

// RecoveryAfter returns the time from heal (on the history's clock) to the
// first grant at or after it, and false if no grant followed.
func (s *Stats) RecoveryAfter(heal time.Duration) (time.Duration, bool) {
	if s == nil {
		return 0, false
	}
	i := sort.Search(len(s.GrantTimes), func(i int) bool { return s.GrantTimes[i] >= heal })
	if i == len(s.GrantTimes) {
		return 0, false
	}
	return s.GrantTimes[i] - heal, true
}
