// Package docker is the Docker backend of package chaos: each Redis node
// is a container, started through testcontainers-go, that can be killed
// (docker kill), restarted in place (docker start), frozen (docker pause)
// and have its clock shifted. Backend implements chaos.Backend and
// chaos.SentinelBackend; Node implements chaos.Node.
//
// NewBackend needs no registry: by default it builds, once per
// redis-server and libc, redfence/redis-scratch:<hash>, an image FROM
// scratch holding the host's redis-server ($REDFENCE_REDIS_SERVER or PATH)
// and the libraries it links; WithImage runs another image instead.
//
// What it guarantees:
//
//   - Containers run on the host's network, Redis on a port of 127.0.0.1
//     pinned at creation: Addr stays the same across Kill and Start, and
//     the other containers (a replica, a Sentinel) reach the node there.
//   - StartNodes and Start return once the node answered PING, bounded by
//     the context and the start timeout (WithStartTimeout).
//   - Persistence is chaos.NodeSpec's: with NoPersistence a restarted node
//     is empty, with AOFAlways it keeps every acknowledged write, with
//     RDBSnapshot it comes back as of its last SAVE.
//   - Kill is SIGKILL, also for a paused container. Pause freezes the
//     container: connections are accepted, nothing is answered.
//   - With NodeSpec.Clock, SetClockOffset shifts gettimeofday, which Redis
//     expires keys by, through an LD_PRELOAD shim compiled on the host with
//     gcc and bind-mounted (so the engine must see the host's filesystem,
//     and an image from WithImage must use glibc).
//   - Close removes every container the backend started and its temporary
//     files, even after failed starts.
//
// It does not inject network faults (clients that should suffer them
// connect through a chaos.Network), and it does not run Ryuk, the
// testcontainers-go reaper: containers of a process that died without
// Close stay behind, labelled LabelBackend:
//
//	docker rm -f $(docker ps -aq --filter label=org.redfence.chaos.backend)
package docker
