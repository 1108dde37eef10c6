#!/usr/bin/env bash
# make vet's module checks.
#
# 1. One version: every requirement of a module of this repository on
#    another (chaos on the root and rfrueidis, the CLI on the root, ...)
#    names the same version, and go.work replaces each published module at
#    that version with its directory, so that in a checkout every module
#    builds against the others as they are here.
# 2. Tidy: each module's go.mod and go.sum are what `go mod tidy` makes of
#    them when this repository's modules resolve to this checkout, as
#    go.work makes them resolve. Tidy runs on a copy of the go.mod (-modfile)
#    that adds a replace directive to the checkout for each published
#    module, with GOWORK=off: the requirements, and the go.sum lines of every
#    other module, come out exactly as with the released versions (whose
#    go.mod files are the ones here), and no go.sum line is written or kept
#    for this repository's own modules. Those would be the hashes of a
#    working tree that no proxy serves; a user's go command checks the
#    released modules against the checksum database instead.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# shellcheck source=scripts/modules.sh
source scripts/modules.sh
command -v jq >/dev/null || { echo "check-modules: jq is missing (apt-get install jq)" >&2; exit 1; }
status=0
fail() {
	echo "check-modules: $*" >&2
	status=1
}

# 1. One version.
version=
for dir in "${PUBLISHED_MODULES[@]}" "${UNPUBLISHED_MODULES[@]}"; do
	for dep in "${PUBLISHED_MODULES[@]}"; do
		v=$(required_version "$dir" "$(module_path "$dep")")
		[ -n "$v" ] || continue
		if [ -z "$version" ]; then
			version=$v
		elif [ "$v" != "$version" ]; then
			fail "$dir/go.mod requires $(module_path "$dep") $v, other modules $version: run make release, or set them alike"
		fi
	done
done
used=$(go work edit -json | jq -r '.Use // [] | .[].DiskPath')
for dir in "${PUBLISHED_MODULES[@]}" "${UNPUBLISHED_MODULES[@]}"; do
	want=./$dir
	[ "$dir" = . ] && want=.
	grep -qxF -- "$want" <<<"$used" || fail "go.work does not use $want"
	case " ${PUBLISHED_MODULES[*]} " in *" $dir "*) ;; *) continue ;; esac
	p=$(module_path "$dir")
	v=$(workspace_version "$p")
	if [ -n "$version" ] && [ "$v" != "$version" ]; then
		fail "go.work replaces $p at ${v:-no version}, the modules require $version: go work edit -dropreplace=$p${v:+@$v} -replace=$p@$version=$want"
	fi
done

# 2. Tidy.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
replaces=()
for dep in "${PUBLISHED_MODULES[@]}"; do
	replaces+=("-replace=$(module_path "$dep")=$root/$dep")
done
for dir in "${PUBLISHED_MODULES[@]}" "${UNPUBLISHED_MODULES[@]}"; do
	mod=$tmp/$dir/go.mod
	mkdir -p "$tmp/$dir"
	cp "$dir/go.mod" "$mod"
	if [ -f "$dir/go.sum" ]; then cp "$dir/go.sum" "$tmp/$dir/go.sum"; else : >"$tmp/$dir/go.sum"; fi
	self=$(module_path "$dir")
	own=()
	for r in "${replaces[@]}"; do
		[ "${r#-replace="$self"=}" = "$r" ] && own+=("$r")
	done
	(cd "$dir" && go mod edit -modfile="$mod" "${own[@]}")
	if ! out=$(cd "$dir" && GOWORK=off go mod tidy -diff -modfile="$mod" 2>&1); then
		fail "$dir: go.mod or go.sum is not tidy (a - line is the checkout's, a + line what tidy wants; the replace lines are the check's own):"
		echo "$out" >&2
	fi
done
exit "$status"
