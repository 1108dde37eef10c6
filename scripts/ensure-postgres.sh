#!/usr/bin/env bash
# ensure-postgres.sh makes sure PostgreSQL server binaries (initdb, postgres)
# are available for the redfence test rig (internal/pgtest). It exits 0
# quietly when they are found; installs them with apt-get when running as
# root on Debian/Ubuntu; otherwise prints what to install and exits 1.
#
# The rig runs its own throwaway server in a temporary directory and never
# uses a system cluster. If installing the package starts the Debian default
# cluster, this script stops it again (harmless either way).
set -euo pipefail

have_initdb() {
	local f
	for f in /usr/lib/postgresql/*/bin/initdb; do
		if [[ -x "$f" ]]; then
			return 0
		fi
	done
	return 1
}

# REDFENCE_POSTGRES_BINDIR, when set, is the directory the Go rig uses, so a
# bad value is an error that installing a package would not fix.
if [[ -n "${REDFENCE_POSTGRES_BINDIR:-}" ]]; then
	if [[ -x "${REDFENCE_POSTGRES_BINDIR}/initdb" && -x "${REDFENCE_POSTGRES_BINDIR}/postgres" ]]; then
		exit 0
	fi
	echo "ensure-postgres: REDFENCE_POSTGRES_BINDIR=${REDFENCE_POSTGRES_BINDIR} holds no initdb and postgres executables; fix it or unset it" >&2
	exit 1
fi

if have_initdb; then
	exit 0
fi
# Elsewhere (Fedora, Homebrew, ...) the rig takes initdb from PATH, with
# postgres beside it.
if initdb_path="$(command -v initdb 2>/dev/null)" && [[ -x "$(dirname "$initdb_path")/postgres" ]]; then
	exit 0
fi

if [[ "${EUID}" -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
	echo "ensure-postgres: PostgreSQL not found; installing it with apt-get" >&2
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
	# Stop any cluster the package started: the tests never use it.
	if command -v pg_lsclusters >/dev/null 2>&1 && command -v pg_ctlcluster >/dev/null 2>&1; then
		pg_lsclusters --no-header 2>/dev/null | while read -r ver name _port status _rest; do
			if [[ "$status" == online* ]]; then
				pg_ctlcluster "$ver" "$name" stop >/dev/null 2>&1 || true
			fi
		done
	fi
	if have_initdb; then
		exit 0
	fi
	echo "ensure-postgres: apt-get install postgresql finished but no /usr/lib/postgresql/*/bin/initdb exists" >&2
	exit 1
fi

{
	echo "ensure-postgres: PostgreSQL not found (no /usr/lib/postgresql/*/bin/initdb)."
	echo "Install it:   sudo apt-get install postgresql"
	echo "or point the tests at existing binaries: export REDFENCE_POSTGRES_BINDIR=/path/to/dir/with/initdb-and-postgres"
} >&2
exit 1
