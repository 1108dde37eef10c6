package link

import (
	"fmt"
	"time"
)

// Stats is what a link's wire did, from Open to Close.
type Stats struct {
	ToNodes   Direction // from this namespace to the nodes'
	FromNodes Direction // back
	// UserCPU and SysCPU are the wire process's user and system time. The
	// system time includes the kernel's receive path (IP, TCP, waking the
	// reader) of every packet the wire writes: a TUN device's write runs it
	// in the writer's context, where on loopback the sender's would.
	UserCPU, SysCPU time.Duration
}

// Direction is one direction of the wire.
type Direction struct {
	Packets, Bytes uint64 // forwarded
	// LateP50, LateP99 and LateMax are how much longer than the latency
	// the wire held a packet (counted from when it read it; 1µs buckets):
	// the time it took the kernel to wake the wire's thread and take the
	// write, longer when the machine is busy.
	LateP50, LateP99, LateMax time.Duration
	// Dropped counts packets lost on the wire's side: those the kernel
	// dropped because the wire did not read them in time (the device's
	// queue was full), and writes that failed.
	Dropped uint64
	// Realtime is whether the wire's thread for this direction ran at a
	// real-time priority (SCHED_FIFO), as it asks to.
	Realtime bool
}

func (d Direction) String() string {
	prio := "a real-time priority (SCHED_FIFO)"
	if !d.Realtime {
		prio = "a normal priority (SCHED_FIFO refused)"
	}
	return fmt.Sprintf("%d packets (%d bytes), held %s beyond the latency at the median, %s at p99, %s at most; %d dropped; the wire's thread at %s",
		d.Packets, d.Bytes, d.LateP50.Round(time.Microsecond), d.LateP99.Round(time.Microsecond), d.LateMax.Round(time.Microsecond), d.Dropped, prio)
}
