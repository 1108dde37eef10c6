#!/usr/bin/env bash
# ensure-docker.sh makes sure a Docker engine answers for the container
# tests (chaos/docker) and the docker chaos backend. It exits 0 quietly when
# `docker info` succeeds. When the engine is installed but not running and we
# are root, it starts dockerd in the background and waits for it (a fresh CI
# machine may boot with the daemon stopped, or still starting). Otherwise it
# prints what is missing and exits 1.
set -euo pipefail

# wait_engine polls `docker info` for up to $1 seconds.
wait_engine() {
	local deadline=$((SECONDS + $1))
	while ((SECONDS < deadline)); do
		if timeout 10 docker info >/dev/null 2>&1; then
			return 0
		fi
		sleep 1
	done
	return 1
}

if ! command -v docker >/dev/null 2>&1; then
	{
		echo "ensure-docker: the docker client is not installed."
		echo "Install Docker Engine (Debian: sudo apt-get install docker.io) and start it."
	} >&2
	exit 1
fi

if timeout 10 docker info >/dev/null 2>&1; then
	exit 0
fi

# A daemon that is starting gets a short while before we start another.
if pgrep -x dockerd >/dev/null 2>&1; then
	echo "ensure-docker: dockerd runs but does not answer yet; waiting up to 60s" >&2
	if wait_engine 60; then
		exit 0
	fi
	echo "ensure-docker: dockerd runs but \`docker info\` still fails:" >&2
	timeout 10 docker info 2>&1 | tail -3 >&2 || true
	exit 1
fi

dockerd_bin=$(command -v dockerd || true)
if [[ -z "${dockerd_bin}" && -x /usr/sbin/dockerd ]]; then
	dockerd_bin=/usr/sbin/dockerd
fi
if [[ "${EUID}" -eq 0 && -n "${dockerd_bin}" && -z "${DOCKER_HOST:-}" ]]; then
	log=${TMPDIR:-/tmp}/redfence-dockerd.log
	echo "ensure-docker: no Docker engine answers; starting ${dockerd_bin} (log: ${log})" >&2
	setsid nohup "${dockerd_bin}" >"${log}" 2>&1 </dev/null &
	if wait_engine 90; then
		exit 0
	fi
	echo "ensure-docker: started dockerd but \`docker info\` still fails after 90s; the end of ${log}:" >&2
	tail -20 "${log}" >&2 || true
	exit 1
fi

{
	echo "ensure-docker: no Docker engine answers (\`docker info\` fails)."
	echo "Start it:   sudo systemctl start docker   (or: sudo dockerd &)"
	echo "or point DOCKER_HOST at a running engine."
} >&2
exit 1
