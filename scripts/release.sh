#!/usr/bin/env bash
# make release VERSION=vX.Y.Z: release every published module at VERSION,
# locally. It
#
# 1. refuses a VERSION that is not a canonical semantic version the go
#    command accepts for these module paths (vMAJOR.MINOR.PATCH with an
#    optional -prerelease, major 0 or 1: v2 and later would need /v2 module
#    paths), a tree with any change or untracked file, and a VERSION any of
#    whose tags exists;
# 2. sets every requirement of a module of this repository on another to
#    VERSION, and go.work's replacements of the published modules to
#    VERSION (the one-version check of scripts/check-modules.sh);
# 3. runs the checks, the make targets in RELEASE_CHECKS (default: vet
#    install-test, which installs both binaries from a copy of the tree
#    tagged as VERSION); on a failure it puts the files back and stops;
# 4. commits the change ("release VERSION"; nothing to commit when the
#    modules already require VERSION, as for the first release, v0.1.0) and
#    creates an annotated tag per published module on that commit: VERSION
#    for the root, DIR/VERSION for the module in DIR (chaos/VERSION,
#    rfrueidis/VERSION, cmd/redfence/VERSION).
#
# Nothing is pushed: it prints the command that publishes the release.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# shellcheck source=scripts/modules.sh
source scripts/modules.sh
die() {
	echo "release: $*" >&2
	exit 1
}

version=${1:-}
[ -n "$version" ] || die "no version given: make release VERSION=vX.Y.Z"
id='(0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)'
if ! [[ $version =~ ^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-$id(\.$id)*)?$ ]]; then
	die "$version is not a version: want vMAJOR.MINOR.PATCH, optionally with a -prerelease (v0.1.0, v1.2.3-rc.1), as the go command takes for a module version"
fi
major=${BASH_REMATCH[1]}
if [ "$major" -gt 1 ]; then
	die "$version has major version $major: a v2+ release of these modules needs module paths ending in /v$major (go.mod, every import), which this script does not make"
fi
command -v jq >/dev/null || die "jq is missing (apt-get install jq)"
git rev-parse --git-dir >/dev/null 2>&1 || die "$root is not a git repository"
if [ -n "$(git status --porcelain)" ]; then
	git status --short >&2
	die "the tree has changes or untracked files: commit or remove them first, so that the release holds exactly what is tagged"
fi
tags=()
for dir in "${PUBLISHED_MODULES[@]}"; do
	tag=$(module_tag "$dir" "$version")
	if git rev-parse -q --verify "refs/tags/$tag" >/dev/null; then
		die "tag $tag exists already"
	fi
	tags+=("$tag")
done

# Put the files back if anything below fails before the commit.
files=(go.work)
if [ -f go.work.sum ]; then files+=(go.work.sum); fi
for dir in "${PUBLISHED_MODULES[@]}" "${UNPUBLISHED_MODULES[@]}"; do files+=("$dir/go.mod"); done
restore() {
	git checkout -q -- "${files[@]}"
	echo "release: failed; ${files[*]} are as they were, nothing was committed or tagged" >&2
}
trap restore ERR

for dir in "${PUBLISHED_MODULES[@]}" "${UNPUBLISHED_MODULES[@]}"; do
	edits=()
	for dep in "${PUBLISHED_MODULES[@]}"; do
		p=$(module_path "$dep")
		if [ -n "$(required_version "$dir" "$p")" ]; then edits+=("-require=$p@$version"); fi
	done
	if [ ${#edits[@]} -gt 0 ]; then (cd "$dir" && go mod edit "${edits[@]}"); fi
done
for dir in "${PUBLISHED_MODULES[@]}"; do
	p=$(module_path "$dir")
	old=$(workspace_version "$p")
	target=./$dir
	[ "$dir" = . ] && target=./
	[ "$old" != "$version" ] || continue
	if [ -n "$old" ]; then go work edit -dropreplace="$p@$old"; fi
	go work edit -replace="$p@$version=$target"
done

checks=${RELEASE_CHECKS-vet install-test}
if [ -n "$checks" ]; then
	echo "release: running make $checks"
	# shellcheck disable=SC2086 # a list of make targets
	make --no-print-directory $checks
fi

trap - ERR
if [ -n "$(git status --porcelain)" ]; then
	git add -- "${files[@]}"
	git commit -q -m "release $version: every module of this repository requires $version of the others"
fi
for tag in "${tags[@]}"; do
	git tag -a -m "redfence ${tag}" "$tag"
done
echo "release: tagged $(git rev-parse --short HEAD) as ${tags[*]}"
echo "release: publish with: git push origin HEAD ${tags[*]}"
