#!/usr/bin/env bash
# Issue 19's soak, as make soak runs it: for each backend of SOAK_BACKENDS
# (default "process docker"), one backend after the other, the safe and the
# unsafe soak of every configuration (redlock, single, single over
# Sentinel) run at the same time (-parallel: six soaks at once), each for
# SOAK_DURATION (default 30m) with SOAK_FLAGS (default -seed 19). Each
# command's output goes to its own log under SOAK_LOGS (default a new
# directory under /tmp) and is printed when it ends. Each command also
# records its runs as JSON in SOAK_RECORD (default docs/soak, as
# BACKEND-MODE.json; empty: no record), which make chaos puts into
# docs/chaos.md. Exits non-zero if any soak found a violation or could not
# run.
set -euo pipefail
dur=${SOAK_DURATION:-30m}
backends=${SOAK_BACKENDS:-process docker}
flags=${SOAK_FLAGS:--seed 19}
logs=${SOAK_LOGS:-$(mktemp -d /tmp/redfence-soak-logs.XXXXXX)}
mkdir -p "$logs"
root=$(cd "$(dirname "$0")/.." && pwd)
record=${SOAK_RECORD-$root/docs/soak}
cd "$root/chaos"
bin="$logs/redfence-chaos"
go build -buildvcs=auto -o "$bin" ./cmd/redfence-chaos # the soak records its commit (GOFLAGS may say -buildvcs=false)
echo "soak: $dur per run, backends: $backends, flags: $flags, logs in $logs, commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
status=0
for b in $backends; do
	safe_json=() unsafe_json=()
	if [ -n "$record" ]; then
		safe_json=(-json "$record/$b-safe.json") unsafe_json=(-json "$record/$b-unsafe.json")
	fi
	# shellcheck disable=SC2086 # flags is a list of words
	"$bin" soak -duration "$dur" -backend "$b" -parallel $flags "${safe_json[@]}" >"$logs/$b-safe.log" 2>&1 &
	safe=$!
	# shellcheck disable=SC2086
	"$bin" soak -duration "$dur" -backend "$b" -parallel -unsafe $flags "${unsafe_json[@]}" >"$logs/$b-unsafe.log" 2>&1 &
	unsafe=$!
	for run in safe unsafe; do
		pid=$safe
		[ "$run" = unsafe ] && pid=$unsafe
		if wait "$pid"; then rc=0; else rc=$?; status=1; fi
		echo "== $b $run (exit $rc): $logs/$b-$run.log"
		grep -v 'testcontainers-go\|^  [A-Z]' "$logs/$b-$run.log" | tail -n 40
	done
done
if [ -n "$record" ]; then
	echo "soak: runs recorded in $record; make chaos puts them into docs/chaos.md"
fi
exit "$status"
