// Package docker is the Docker backend of package chaos: each Redis node is a
// container started through testcontainers-go, so nodes can be killed
// (docker kill), restarted in place (docker start), frozen (docker pause) and
// have their clock shifted, without touching the host's processes.
//
// # Image
//
// By default NewBackend needs no registry: it builds redfence/redis-scratch:<hash>,
// an image FROM scratch holding the host's redis-server (from
// $REDFENCE_REDIS_SERVER or PATH, copied as /usr/local/bin/redis-server
// because Redis picks its mode from argv[0]), every library ldd lists at the
// same absolute path, the dynamic loader, and empty /data and /tmp. Symlinks
// are resolved. The tag is a hash of that content, so the image is built
// once per redis-server and libc and reused afterwards; it is kept, not
// removed, when the backend closes. WithImage runs any other image that has
// redis-server on its PATH instead.
//
// # What it guarantees
//
//   - Every container runs on the host's network (docker run --network
//     host), Redis on a port of 127.0.0.1 pinned at creation: Addr is
//     127.0.0.1:<port>, the same after Kill and Start, and it is also where
//     the other containers reach the node (PeerAddr). Not a bridge network:
//     on Docker's default bridge a restarted container gets a new address
//     and the next container started takes its old one, so a Sentinel that
//     knew it reconfigures a stranger; on a network of the backend's own,
//     with fixed addresses, Docker 20.10's engine deadlocked (libnetwork,
//     its embedded DNS) under the soak's kills and restarts.
//   - A node is ready, when StartNodes or Start returns, in the sense that it
//     answered PING through that address; the wait is bounded by the context
//     and the start timeout, and fails fast, with Redis's output, when the
//     container exits.
//   - Data lives in the container's own filesystem: with NoPersistence
//     nothing is written, so a restarted node is empty; with AOFAlways every
//     acknowledged write survives Kill and Start; with RDBSnapshot a
//     restarted node comes back as of its last explicit SAVE.
//   - Kill is SIGKILL, also for a paused container, which does not run again
//     before it dies. Pause freezes the container's cgroup: the kernel still
//     accepts connections, but nothing is answered until Resume.
//   - With NodeSpec.Clock a small LD_PRELOAD shim (package
//     chaos/internal/clockshim, compiled on the host with gcc) adds an offset
//     to gettimeofday, which Redis uses to expire keys; SetClockOffset
//     rewrites the offset file in a host directory bind-mounted read-only
//     into the container, and takes effect at once.
//   - StartSentinels (chaos.SentinelBackend) runs Sentinels from the same
//     image (redis-server /data/sentinel.conf --sentinel), each with its own
//     copy of the given sentinel.conf, on pinned ports like nodes. A replica
//     announces, and Sentinel hands out, the PeerAddr (chaos.Peer), which is
//     the Addr.
//   - Close removes every container the backend started, found also by the
//     LabelBackend label, and its temporary directory, even after failed
//     starts; a StartNodes call in flight is cancelled.
//
// # What it does not do
//
//   - It does not use Ryuk, testcontainers-go's reaper (it would have to be
//     pulled): NewBackend sets TESTCONTAINERS_RYUK_DISABLED=true unless that
//     variable is set, so containers of a process that died without Close
//     stay behind (see below).
//   - The clock shim needs a Docker engine that sees the host's filesystem
//     (bind mounts of a temporary directory) and, with WithImage, a
//     glibc-based image. Monotonic timers inside Redis are not shifted.
//   - It does not inject network faults: clients that should suffer
//     partitions or latency connect through chaos's proxies.
//
// Leftovers of crashed processes carry the LabelBackend label:
//
//	docker rm -f $(docker ps -aq --filter label=org.redfence.chaos.backend)
package docker
