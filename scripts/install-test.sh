#!/usr/bin/env bash
# make install-test: install the binaries as a user would, from a copy of
# this tree released by make release, with no go.work.
#
# The copy (the tracked and untracked files that are not ignored, as they
# are in the working tree) becomes a new git repository. There
# scripts/release.sh must refuse a malformed version, a v2 version, a dirty
# tree and a version already tagged, and release the version the modules
# require (v0.1.0 until the first release) with its four tags. Then, with
# GOWORK=off, an empty module cache of its own and git told that
# https://github.com/redfence/redfence is that repository, the go command
# fetches the modules the way the module proxy does (from the tags, in
# direct mode; every other module comes from the module cache or the proxy,
# checked against the checksum database as usual), and
#
#   go install github.com/redfence/redfence/cmd/redfence@VERSION
#   go install github.com/redfence/redfence/chaos/cmd/redfence-chaos@VERSION
#
# must work; `redfence version` must print VERSION, --help the commands, a
# wrong flag exit 2. Last, a release of the next version (requirements and
# go.work bumped, a commit, four more tags) must install the CLI again.
# Nothing is pushed anywhere, and the repository's own module cache never
# sees these versions (INSTALL_TEST_MODCACHE, default under the system's
# temporary directory, is cleaned of them first; other modules stay, so
# that a second run builds from the build cache).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# shellcheck source=scripts/modules.sh
source scripts/modules.sh
started=$SECONDS
step() { echo "install-test: [$((SECONDS - started))s] $*"; }
fail() {
	echo "install-test: FAIL: $*" >&2
	exit 1
}
command -v jq >/dev/null || fail "jq is missing (apt-get install jq)"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/redfence-install-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
repo=$tmp/repo
mkdir -p "$repo"
git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
	if [ -e "$f" ]; then printf '%s\0' "$f"; fi
done | tar --null -T - -cf - | tar -xf - -C "$repo"
export GIT_AUTHOR_NAME="install test" GIT_AUTHOR_EMAIL=install-test@localhost
export GIT_COMMITTER_NAME="install test" GIT_COMMITTER_EMAIL=install-test@localhost
git -C "$repo" init -q -b main
git -C "$repo" add -A
git -C "$repo" commit -q -m "the working tree of $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
version=$(cd "$repo/cmd/redfence" && required_version . "$MODULE_ROOT")
[ -n "$version" ] || fail "cmd/redfence/go.mod requires no version of $MODULE_ROOT"
step "copied the tree to $repo; the modules require $version"

# release.sh's refusals: each exits non-zero, says why, and leaves no tag.
refuses() {
	local want=$1
	shift
	local out tags head
	tags=$(git -C "$repo" tag) head=$(git -C "$repo" rev-parse HEAD)
	if out=$(cd "$repo" && RELEASE_CHECKS='' bash scripts/release.sh "$@" 2>&1); then
		fail "release $* succeeded; it must refuse ($want)"
	fi
	grep -qF -- "$want" <<<"$out" || fail "release $* refused without saying \"$want\": $out"
	[ "$(git -C "$repo" tag)" = "$tags" ] || fail "release $* made tags: $(git -C "$repo" tag | tr '\n' ' ')"
	[ "$(git -C "$repo" rev-parse HEAD)" = "$head" ] || fail "release $* made a commit"
}
refuses "no version given"
refuses "is not a version" v0.1
refuses "is not a version" 0.1.0
refuses "is not a version" v0.1.0+build.1
refuses "is not a version" v01.2.3
refuses "has major version 2" v2.0.0
touch "$repo/stray"
refuses "untracked files" "$version"
rm "$repo/stray"
echo "a change" >>"$repo/README.md"
refuses "has changes" "$version"
git -C "$repo" checkout -q -- README.md
step "release refuses a malformed version, v2, a dirty tree"

# The release of the required version: nothing to commit, four tags.
head=$(git -C "$repo" rev-parse HEAD)
(cd "$repo" && RELEASE_CHECKS='' bash scripts/release.sh "$version") >/dev/null
[ "$(git -C "$repo" rev-parse HEAD)" = "$head" ] || fail "release $version made a commit, with nothing to change"
want_tags() {
	local v=$1 dir tag
	for dir in "${PUBLISHED_MODULES[@]}"; do
		tag=$(module_tag "$dir" "$v")
		[ "$(git -C "$repo" rev-parse "$tag^{commit}" 2>/dev/null)" = "$(git -C "$repo" rev-parse HEAD)" ] ||
			fail "release $v: tag $tag is missing or not on HEAD"
	done
	[ -z "$(git -C "$repo" status --porcelain)" ] || fail "release $v left the tree dirty: $(git -C "$repo" status --short)"
}
want_tags "$version"
refuses "tag $version exists already" "$version"
step "released $version: tags $(git -C "$repo" tag --points-at HEAD | tr '\n' ' ')"

# go install ...@VERSION, as a user would, from that repository.
modcache=${INSTALL_TEST_MODCACHE:-${TMPDIR:-/tmp}/redfence-install-test-modcache}
mkdir -p "$modcache"
chmod -R u+w "$modcache/github.com/redfence" "$modcache/cache/download/github.com/redfence" "$modcache/cache/vcs" 2>/dev/null || true
rm -rf "$modcache/github.com/redfence" "$modcache/cache/download/github.com/redfence" "$modcache/cache/vcs"
printf '[url "file://%s"]\n\tinsteadOf = https://%s\n' "$repo" "$MODULE_ROOT" >"$tmp/gitconfig"
proxy="file://$(go env GOMODCACHE)/cache/download,$(go env GOPROXY)"
# GODEBUG=goindex=0: the go command indexes the files of each module in
# its module cache, by the module's path there, in the build cache; this
# test lays a different tree out under the same path and version on every
# run, so a kept index would name files the tree no longer has.
user_go() {
	env GODEBUG=goindex=0 GOWORK=off GOFLAGS=-modcacherw GOMODCACHE="$modcache" GOPROXY="$proxy" GOPRIVATE="$MODULE_ROOT" \
		GIT_CONFIG_GLOBAL="$tmp/gitconfig" GIT_CONFIG_NOSYSTEM=1 GOBIN="$tmp/bin" go "$@"
}
install() {
	local pkg=$1@$2
	if ! (cd "$tmp" && user_go install "$pkg") >"$tmp/go.log" 2>&1; then
		cat "$tmp/go.log" >&2
		fail "go install $pkg"
	fi
	step "go install $pkg"
}
install "$MODULE_ROOT/cmd/redfence" "$version"
install "$MODULE_ROOT/chaos/cmd/redfence-chaos" "$version"

# What a user sees.
expect() { # expect CODE PATTERN COMMAND...: exit code and a line of its output
	local code=$1 pattern=$2 out rc=0
	shift 2
	out=$("$@" 2>&1) || rc=$?
	[ "$rc" = "$code" ] || fail "$* exited $rc, want $code: $out"
	grep -qE -- "$pattern" <<<"$out" || fail "$* printed no line matching /$pattern/: $out"
}
bin=$tmp/bin
expect 0 "^redfence $version \(go" "$bin/redfence" version
expect 0 "^  exec " "$bin/redfence" --help
expect 0 "^  version " "$bin/redfence" --help
expect 2 "flag provided but not defined: -bogus" "$bin/redfence" exec -bogus
expect 2 "demo moved to the chaos module's binary" "$bin/redfence" demo
expect 0 "^redfence-chaos $version \(go" "$bin/redfence-chaos" version
expect 0 "^  scenarios " "$bin/redfence-chaos" --help
expect 2 "-duration is required" "$bin/redfence-chaos" soak
expect 0 "^	mod	$MODULE_ROOT/cmd/redfence	$version" go version -m "$bin/redfence"
expect 0 "^	dep	$MODULE_ROOT	$version" go version -m "$bin/redfence"
if go version -m "$bin/redfence" | grep -E 'moby|docker|testcontainers|toxiproxy|porcupine|prometheus'; then
	fail "the installed redfence holds the chaos harness's dependencies"
fi
step "redfence $version and redfence-chaos $version run: version, --help, wrong flags"

# The next release: requirements and go.work bumped, committed, tagged.
next=${version%%-*}
patch=${next##*.}
next=${next%.*}.$((patch + 1))-installtest
(cd "$repo" && RELEASE_CHECKS='' bash scripts/release.sh "$next") >/dev/null
want_tags "$next"
[ "$(git -C "$repo" log -1 --format=%s)" = "release $next: every module of this repository requires $next of the others" ] ||
	fail "release $next made no commit"
for dir in "${PUBLISHED_MODULES[@]}" "${UNPUBLISHED_MODULES[@]}"; do
	for dep in "${PUBLISHED_MODULES[@]}"; do
		v=$(cd "$repo" && required_version "$dir" "$(module_path "$dep")")
		[ -z "$v" ] || [ "$v" = "$next" ] || fail "after release $next, $dir requires $(module_path "$dep") $v"
	done
done
(cd "$repo" && bash scripts/check-modules.sh) || fail "check-modules after release $next"
step "released $next: a commit, tags on it, every requirement and go.work at $next"
install "$MODULE_ROOT/cmd/redfence" "$next"
expect 0 "^redfence $next \(go" "$bin/redfence" version
step "PASS"
