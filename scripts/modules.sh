# shellcheck shell=bash
# The repository's Go modules, for the scripts that handle them all
# (check-modules.sh, release.sh, install-test.sh). Sourced, not run.

# MODULE_ROOT is the root module's path; the module in directory DIR is
# MODULE_ROOT/DIR.
MODULE_ROOT=github.com/redfence/redfence

# PUBLISHED_MODULES are tagged by make release (".": the root). A release
# VERSION creates the tag VERSION for the root and DIR/VERSION for each
# other one, as the go command looks them up for a module in a
# subdirectory.
PUBLISHED_MODULES=(. rfrueidis chaos cmd/redfence)

# UNPUBLISHED_MODULES are never tagged (bench/: the benchmarks against the
# peer libraries); they require the published ones like any other module.
UNPUBLISHED_MODULES=(bench)

# module_path DIR prints the path of the module in DIR.
module_path() {
	if [ "$1" = . ]; then echo "$MODULE_ROOT"; else echo "$MODULE_ROOT/$1"; fi
}

# module_tag DIR VERSION prints the tag that releases the module in DIR at
# VERSION.
module_tag() {
	if [ "$1" = . ]; then echo "$2"; else echo "$1/$2"; fi
}

# required_version DIR PATH prints the version of PATH that the go.mod in
# DIR requires, or nothing.
required_version() {
	(cd "$1" && go mod edit -json) | jq -r --arg p "$2" '.Require // [] | .[] | select(.Path == $p) | .Version'
}

# workspace_version PATH prints the version at which go.work replaces PATH,
# or nothing.
workspace_version() {
	go work edit -json | jq -r --arg p "$1" '.Replace // [] | .[] | select(.Old.Path == $p) | .Old.Version'
}
