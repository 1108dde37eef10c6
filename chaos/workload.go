package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/redfence/redfence/fencing"
	"github.com/redfence/redfence/internal/nilcheck"
)

// controlCounter is the unfenced control: a plain register the workload
// increments with read-modify-write under the lock, with no token.
// Overlapping holders lose increments.
type controlCounter interface {
	Get(ctx context.Context) (int64, error)
	Set(ctx context.Context, v int64) error
}

// memoryCounter is a controlCounter in memory. The zero value is ready to
// use; it is safe for concurrent use (each Get and Set is atomic, a
// read-modify-write is not).
type memoryCounter struct {
	mu sync.Mutex
	v  int64 // guarded by mu
}

// Get returns the value. It fails only if ctx is done.
func (c *memoryCounter) Get(ctx context.Context) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.v, nil
}

// Set stores v. It fails only if ctx is done.
func (c *memoryCounter) Set(ctx context.Context, v int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.v = v
	return nil
}

// ErrInvalidWorkload reports an invalid Workload or Run argument. The
// errors that wrap it wrap redlock.ErrInvalid too (see ErrInvalidScenario).
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
	// between Backoff/2 and 3*Backoff/2), to which a random share of the
	// failed attempt's duration is added. The default is 5ms.
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
	// Seed seeds the backoff jitter.
	Seed int64

	// control is the unfenced control counter; nil: a new memoryCounter
	// for each Run. A scenario run shares one across its workloads.
	control controlCounter
	// statsOff stops the clients keeping their operations for Run's Stats,
	// which then counts nothing: a soak reads them from the History as it
	// drains, so that its memory does not grow with its length.
	statsOff bool
}

// Defaults of the Workload fields.
const (
	defaultClients        = 4
	defaultHold           = 10 * time.Millisecond
	defaultAcquireTimeout = time.Second
	defaultOpTimeout      = time.Second
	defaultBackoff        = 5 * time.Millisecond
	defaultWindow         = time.Millisecond
	defaultSlack          = 50 * time.Millisecond
	defaultResource       = "chaos"
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
			return c, invalidWorkload("Clients is %d but %d Lockers were given", c.Clients, len(c.Lockers))
		}
		for i, l := range c.Lockers {
			if nilcheck.IsNil(l) {
				return c, invalidWorkload("Lockers[%d] is nil", i)
			}
		}
	case nilcheck.IsNil(c.Locker):
		return c, invalidWorkload("no Locker")
	}
	if c.Clients == 0 {
		c.Clients = defaultClients
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"Hold", &c.Hold, defaultHold},
		{"AcquireTimeout", &c.AcquireTimeout, defaultAcquireTimeout},
		{"OpTimeout", &c.OpTimeout, defaultOpTimeout},
		{"Backoff", &c.Backoff, defaultBackoff},
		{"Window", &c.Window, defaultWindow},
		{"Slack", &c.Slack, defaultSlack},
	} {
		if *d.v < 0 {
			return c, invalidWorkload("negative %s %v", d.name, *d.v)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if c.Clients < 0 {
		return c, invalidWorkload("negative Clients %d", c.Clients)
	}
	if nilcheck.IsNil(c.Guard) {
		c.Guard = fencing.NewMemoryGuard()
	}
	if c.Resource == "" {
		c.Resource = defaultResource
	}
	if nilcheck.IsNil(c.control) {
		c.control = &memoryCounter{}
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
		return nil, invalidWorkload("Run on a nil Workload or History")
	}
	cfg, err := w.withDefaults()
	if err != nil {
		return nil, err
	}
	detached := context.WithoutCancel(ctx)
	initial, err := getCounter(detached, cfg.control, cfg.OpTimeout)
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
	st := computeStats(ops, start, end, cfg.AcquireTimeout, cfg.Slack)
	final, err := getCounter(detached, cfg.control, cfg.OpTimeout)
	if err != nil {
		return st, fmt.Errorf("chaos: reading the control counter at the end: %w", err)
	}
	st.ControlValue = final - initial
	st.LostUpdates = max(0, st.ControlIncrements-int(final-initial))
	return st, nil
}

func getCounter(ctx context.Context, c controlCounter, timeout time.Duration) (int64, error) {
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

// record keeps a completed operation for Run's Stats (see statsOff).
func (c *client) record(op Op) {
	if !c.cfg.statsOff {
		c.ops = append(c.ops, op)
	}
}

func (c *client) run(ctx context.Context) {
	for ctx.Err() == nil {
		c.cycle(ctx)
	}
}

// wait waits d, or until ctx or stop (nil: never) ends; it reports whether
// d elapsed.
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
	began := time.Now()
	lease, err := c.locker.Acquire(actx)
	took := time.Since(began)
	cancel()
	if err == nil && nilcheck.IsNil(lease) {
		err = ErrNoLease
	}
	if err != nil {
		st := outcome(err)
		if errors.Is(err, ErrNoLease) {
			st = Fail
		}
		c.record(p.Complete(st, WithErr(err)))
		// Plus a random share of the failed attempt's duration: clients whose
		// attempts all ended at one hung node's timeout would otherwise retry
		// in step and split the other nodes' votes round after round (Lock's
		// spread does the same).
		jitter := c.cfg.Backoff/2 + time.Duration(c.rng.Int64N(int64(c.cfg.Backoff)+1)) +
			time.Duration(c.rng.Int64N(int64(took)+1))
		wait(ctx, jitter, nil)
		return
	}
	acq := p.Complete(OK, WithToken(lease.Token()), WithValidUntil(lease.ValidUntil()))
	c.record(acq)
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
		c.record(p.Complete(OK, fields...))
	case errors.Is(err, fencing.ErrStaleToken):
		c.record(p.Complete(Fail, append(fields, WithNote(NoteStale))...))
	case errors.Is(err, fencing.ErrInvalidToken), errors.Is(err, fencing.ErrInvalidArgument):
		c.record(p.Complete(Fail, fields...))
	default:
		// A storage error: the guard may have recorded the token.
		c.record(p.Complete(Unknown, fields...))
		return
	}
	r := c.h.Invoke(c.id, Read)
	c.record(r.Complete(OK, WithLease(acq.ID), WithValue(c.reg.read())))
}

func (c *client) increment(ctx context.Context, lease int) {
	octx, cancel := context.WithTimeout(ctx, c.cfg.OpTimeout)
	defer cancel()
	p := c.h.Invoke(c.id, UnfencedWrite)
	v, err := c.cfg.control.Get(octx)
	if err != nil {
		c.record(p.Complete(Fail, WithLease(lease), WithErr(err), WithNote("read failed")))
		return
	}
	if !wait(octx, c.cfg.Window, nil) {
		c.record(p.Complete(Fail, WithLease(lease), WithErr(octx.Err()), WithNote("timed out before the write")))
		return
	}
	err = c.cfg.control.Set(octx, v+1)
	st := OK
	if err != nil {
		st = Unknown // the write may have landed
	}
	c.record(p.Complete(st, WithLease(lease), WithValue(fmt.Sprintf("%d->%d", v, v+1)), WithErr(err)))
}

func (c *client) release(ctx context.Context, lease Lease, acq Op) {
	rctx, cancel := context.WithTimeout(ctx, c.cfg.OpTimeout)
	defer cancel()
	p := c.h.Invoke(c.id, Release)
	err := lease.Release(rctx)
	c.record(p.Complete(outcome(err), WithLease(acq.ID), WithToken(acq.Token), WithErr(err)))
}
