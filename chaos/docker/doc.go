// Package docker is the Docker backend of package chaos: each Redis node is
// a container (testcontainers-go) that can be killed, restarted in place,
// paused and have its clock shifted. Backend implements chaos.Backend and
// chaos.SentinelBackend; Node implements chaos.Node.
//
// It needs no registry: by default it builds, once per redis-server and
// libc, an image FROM scratch with the host's redis-server and its
// libraries (WithImage runs another). Containers use the host's network on
// a port pinned at creation, so Addr survives Kill and Start; Start returns
// once the node answers PING. Persistence follows chaos.NodeSpec. Clock
// shifts use an LD_PRELOAD shim built with the host's gcc. Close removes
// every container it started (the others carry LabelBackend). It injects
// no network faults: use chaos.Network.
package docker
