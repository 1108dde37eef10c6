#!/usr/bin/env bash
# ensure-redis.sh makes sure a redis-server binary is available for the
# redfence test rig (internal/redisnode). It exits 0 quietly when one is
# found; installs it with apt-get when running as root on Debian/Ubuntu;
# otherwise prints what to install and exits 1.
#
# The rig never uses port 6379, so a system redis started by the package
# install is harmless (and not relied upon).
set -euo pipefail

# REDFENCE_REDIS_SERVER, when set, is what the Go rig uses (a path, or a
# name looked up on PATH), so a bad value is an error that installing a
# package would not fix.
if [[ -n "${REDFENCE_REDIS_SERVER:-}" ]]; then
	if command -v -- "${REDFENCE_REDIS_SERVER}" >/dev/null 2>&1; then
		exit 0
	fi
	echo "ensure-redis: REDFENCE_REDIS_SERVER=${REDFENCE_REDIS_SERVER} is not an executable; fix it or unset it to use redis-server from PATH" >&2
	exit 1
fi

if command -v redis-server >/dev/null 2>&1; then
	exit 0
fi

if [[ "${EUID}" -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
	echo "ensure-redis: redis-server not found; installing it with apt-get" >&2
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
	if command -v redis-server >/dev/null 2>&1; then
		exit 0
	fi
	echo "ensure-redis: apt-get install redis-server finished but redis-server is still not on PATH (PATH=${PATH})" >&2
	exit 1
fi

{
	echo "ensure-redis: redis-server not found."
	echo "Install it:   sudo apt-get install redis-server"
	echo "or point the tests at an existing binary: export REDFENCE_REDIS_SERVER=/path/to/redis-server"
} >&2
exit 1
