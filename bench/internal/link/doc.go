// Package link puts the benchmark's redis-server nodes behind a real network
// path with a fixed delay added each way: a network namespace of their own,
// joined to this process's namespace by two TUN devices, one on each side,
// and a wire process between them that reads every IP packet from one device
// and writes it to the other once it has held it for the latency.
//
// Both ends use their kernels' full TCP/IP stacks over non-loopback
// interfaces (a /32 address and a peer route on each device, MTU 1500 by
// default), so every segment, acknowledgement and handshake pays the delay,
// as on a network; nothing is proxied at the TCP level. The kernel's own
// delay (sch_netem) is not used because it is not always there; the wire
// needs only /dev/net/tun, network namespaces and iproute2.
//
// What it guarantees:
//   - Every packet the wire forwards was held for at least the latency,
//     counted from when the wire read it, so a round trip over the link
//     takes at least twice the latency (TestLinkAddsDelay). Packets keep
//     their order and content in each direction (TestLineHolds).
//   - Close removes everything Open made: the wire process (and with it the
//     namespace and both devices; a TUN device lives only as long as its
//     file is open). The nodes are the caller's to stop first (rig). If this
//     process dies, even by SIGKILL, the wire and the nodes die with it
//     (Pdeathsig), so nothing is left behind either (TestLinkTeardown,
//     TestLinkKilledParent).
//   - Without the privileges it needs (CAP_NET_ADMIN and CAP_SYS_ADMIN, in
//     practice root) Open and Check fail with an error matching
//     ErrNotPermitted that says so (TestNotPermitted).
//
// What it does not: the wire is software on the same machine, so it takes
// CPU (in a process of its own, not the benchmark's) and, on a loaded
// machine, may hold a packet longer than the latency; Stats reports by how
// much. Its threads ask for a real-time priority (SCHED_FIFO) to keep that
// small, and say whether they got it. It adds no loss, jitter or bandwidth
// limit of its own.
//
// The wire runs in a copy of the calling program, started with an
// environment variable that makes RunWireIfChild take over: every program
// (and test binary) that opens a link must call RunWireIfChild first.
package link
