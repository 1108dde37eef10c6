package link

import (
	"errors"
	"runtime"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// A line is one direction of the wire: it reads packets from one file
// descriptor and writes each to another once it has held it for the delay,
// counted from the moment it was read, in the order they came.
//
// One OS thread does both, in a loop of system calls: ppoll on the input
// with a timeout (nanosecond resolution, timer slack 1ns) until the oldest
// held packet is due, then every read that does not block, then every
// write that is due. No other goroutine or thread takes part, so a packet
// costs its read, its write and a share of the wake-ups, and the hold does
// not depend on when the Go scheduler gets round to a goroutine, only on
// when the kernel wakes the thread.
type line struct {
	in, out int
	delay   time.Duration
	mtu     int

	packets, bytes, writeErrs atomic.Uint64
	realtime                  atomic.Bool // the thread got SCHED_FIFO
	late                      lateHist    // hold beyond the delay, per packet
}

type packet struct {
	b   []byte
	due int64 // CLOCK_MONOTONIC ns
}

// lineSlots is how many packets a line holds at most: at 1ms, over four
// million packets a second. When it is full the line stops reading, and
// the sending side's queue (the device's, 1000 packets) fills instead.
const lineSlots = 4096

func newLine(in, out int, delay time.Duration, mtu int) *line {
	return &line{in: in, out: out, delay: delay, mtu: mtu}
}

// ring is a FIFO of held packets over preallocated buffers.
type ring struct {
	p          []packet
	head, size int
}

func newRing(n, bufSize int) *ring {
	r := &ring{p: make([]packet, n)}
	for i := range r.p {
		r.p[i].b = make([]byte, bufSize)
	}
	return r
}

func (r *ring) full() bool { return r.size == len(r.p) }

// slot returns the buffer of the next packet to push, full length.
func (r *ring) slot() []byte {
	b := r.p[(r.head+r.size)%len(r.p)].b
	return b[:cap(b)]
}

func (r *ring) push(n int, due int64) {
	i := (r.head + r.size) % len(r.p)
	r.p[i].b, r.p[i].due = r.p[i].b[:n], due
	r.size++
}

func (r *ring) front() *packet { return &r.p[r.head] }

func (r *ring) pop() {
	r.head = (r.head + 1) % len(r.p)
	r.size--
}

// run forwards packets until reading returns end of file or an error, and
// then returns once every packet read has been written (or failed to be:
// writeErrs counts those). It sets the input non-blocking.
func (l *line) run() error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// The slack lets the kernel defer a wake-up (by 50µs by default) to
	// batch timers; the wire wants it on time. Per thread; best effort.
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	// A network's delay does not grow when the machine is busy: the thread
	// takes a real-time priority (SCHED_FIFO 1) when allowed, so that a
	// packet due waits only for other real-time work, not for the
	// benchmark's threads. The kernel keeps 5% of each second for others
	// (sched_rt_runtime_us), and the thread sleeps whenever nothing is due.
	l.realtime.Store(unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: 1}, 0) == nil)
	if err := unix.SetNonblock(l.in, true); err != nil {
		return err
	}
	q := newRing(lineSlots, l.mtu+64)
	fds := []unix.PollFd{{Fd: int32(l.in), Events: unix.POLLIN}}
	var readErr error
	eof := false
	for !eof || q.size > 0 {
		var timeout *unix.Timespec // nil: until a packet comes
		if q.size > 0 {
			ts := unix.NsecToTimespec(max(q.front().due-monoNow(), 0))
			timeout = &ts
		}
		if eof || q.full() {
			fds[0].Events = 0 // just wait for the next packet's due time
		} else {
			fds[0].Events = unix.POLLIN
		}
		fds[0].Revents = 0
		if _, err := unix.Ppoll(fds, timeout, nil); err != nil && !errors.Is(err, unix.EINTR) {
			return err
		}
		if fds[0].Revents != 0 && !eof {
			eof, readErr = l.readAll(q)
		}
		l.writeDue(q)
	}
	return readErr
}

// readAll reads every packet that is there, up to a full ring. It reports
// end of file (or a read error, returned).
func (l *line) readAll(q *ring) (eof bool, err error) {
	for !q.full() {
		n, err := unix.Read(l.in, q.slot())
		switch {
		case errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR):
			return false, nil
		case err != nil:
			return true, err
		case n == 0:
			return true, nil
		}
		q.push(n, monoNow()+int64(l.delay))
	}
	return false, nil
}

// writeDue writes every held packet whose time has come.
func (l *line) writeDue(q *ring) {
	now := monoNow()
	for q.size > 0 && q.front().due <= now {
		p := q.front()
		if _, err := unix.Write(l.out, p.b); err != nil {
			l.writeErrs.Add(1)
		} else {
			l.packets.Add(1)
			l.bytes.Add(uint64(len(p.b)))
		}
		l.late.add(time.Duration(now - p.due))
		q.pop()
	}
}

// monoNow is CLOCK_MONOTONIC in nanoseconds.
func monoNow() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// lateHist counts durations in 1µs buckets up to lateBuckets µs, and
// keeps the maximum; it may be read while it is written.
type lateHist struct {
	n   [lateBuckets + 1]atomic.Uint64 // the last: lateBuckets µs or more
	max atomic.Int64
}

const lateBuckets = 20000

func (h *lateHist) add(d time.Duration) {
	d = max(d, 0)
	i := min(int(d/time.Microsecond), lateBuckets)
	h.n[i].Add(1)
	for {
		m := h.max.Load()
		if int64(d) <= m || h.max.CompareAndSwap(m, int64(d)) {
			return
		}
	}
}

// quantile returns the upper edge of the bucket holding quantile q (0..1),
// or the maximum for the last bucket; 0 with no counts.
func (h *lateHist) quantile(q float64) time.Duration {
	var total uint64
	for i := range h.n {
		total += h.n[i].Load()
	}
	if total == 0 {
		return 0
	}
	rank := uint64(q * float64(total))
	var seen uint64
	for i := range h.n {
		seen += h.n[i].Load()
		if seen > rank {
			if i == lateBuckets {
				break
			}
			return min(time.Duration(i+1)*time.Microsecond, time.Duration(h.max.Load()))
		}
	}
	return time.Duration(h.max.Load())
}

// direction is a line's counters so far.
func (l *line) direction() Direction {
	return Direction{
		Packets: l.packets.Load(), Bytes: l.bytes.Load(), Dropped: l.writeErrs.Load(), Realtime: l.realtime.Load(),
		LateP50: l.late.quantile(0.50), LateP99: l.late.quantile(0.99), LateMax: time.Duration(l.late.max.Load()),
	}
}
