# redfence: two commands for a new user.
#   make demo  - five local redis-server nodes, workers contending, one node killed, a report
#   make test  - every test with -race, against real redis-server processes
# Both install what they need (redis-server; PostgreSQL for the SQL fencing tests) through
# apt-get when run as root, or say what is missing. make test also needs a Docker engine
# (chaos/docker's tests): it starts an installed but stopped dockerd when run as root.

GO ?= go
GOTEST_FLAGS ?= -race -count=1 -timeout 20m
# The library is the root module; the fault harness (chaos/, with its binary
# redfence-chaos), the CLI (cmd/redfence/) and the rueidis adapter
# (rfrueidis/) are modules of their own, so that importing the locks does
# not pull in Docker, toxiproxy, porcupine, Prometheus or rueidis, and
# bench/ is one too (make bench). Each nested go.mod requires a released
# version of the others (make release sets it); go.work makes every module
# build against this checkout instead. The root module is built with
# GOWORK=off, against its own go.mod alone, as a library user builds it.
MODULES := . chaos cmd/redfence rfrueidis
# gowork_off prefixes a command run in module directory $(1).
gowork_off = $(if $(filter .,$(1)),GOWORK=off)

.PHONY: all test demo deps vet install-test release

all: test

deps:
	@bash scripts/ensure-redis.sh
	@bash scripts/ensure-postgres.sh
	@bash scripts/ensure-docker.sh

test: deps vet
	@set -e; $(foreach m,$(MODULES),echo "== go test $(m)"; (cd $(m) && $(call gowork_off,$(m)) $(GO) test $(GOTEST_FLAGS) ./...);)
	@bash scripts/install-test.sh

# vet also checks the modules (scripts/check-modules.sh): every requirement
# of one module of this repository on another names one version, which
# go.work maps to this checkout; and every module's go.mod and go.sum are
# tidy, with this repository's modules resolved to this checkout, so that a
# nested module that builds only thanks to another module's requirements
# fails here.
vet:
	@set -e; $(foreach m,$(MODULES) bench,(cd $(m) && $(call gowork_off,$(m)) $(GO) vet ./...);)
	@bash scripts/check-modules.sh
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# make install-test - as a user would: from a copy of this tree released as
# the version the modules require (v0.1.0 until the first release), with no
# go.work, go install .../cmd/redfence@VERSION and
# .../chaos/cmd/redfence-chaos@VERSION, then run them; also checks make
# release's refusals and a second release (scripts/install-test.sh). make
# test runs it.
install-test:
	@bash scripts/install-test.sh

# make release VERSION=vX.Y.Z - every module of this repository requires
# VERSION of the others, the checks (RELEASE_CHECKS, default vet
# install-test) pass, a commit, and the tags VERSION, rfrueidis/VERSION,
# chaos/VERSION, cmd/redfence/VERSION on it; nothing is pushed
# (scripts/release.sh). Refuses a malformed version and a dirty tree.
release:
	@bash scripts/release.sh '$(VERSION)'

# The demo, the chaos scenarios and the soak are commands of the chaos
# module's binary, redfence-chaos (chaos/cmd/redfence-chaos), so that the
# operator CLI (cmd/redfence) builds none of Docker, testcontainers,
# toxiproxy, porcupine or Prometheus.
CHAOS_BIN := ./cmd/redfence-chaos

demo:
	cd chaos && $(GO) run $(CHAOS_BIN) demo

# make bench - redfence against go-redsync/redsync and bsm/redislock, on local
# redis-server nodes it starts itself, on loopback (about 6 minutes) and then
# again with the nodes behind a link that adds 1ms each way (a network
# namespace, two TUN devices and a wire process: bench/internal/link; s1-s4
# and s6, about 5 minutes; needs root, and without it the link run is
# skipped and the report says why); prints the tables and rewrites
# docs/performance.md. The benchmark is its own Go module (bench/), so the
# library never depends on its peers; it is never released, and builds
# against this checkout through go.work like the others (make vet checks
# that its go.mod is tidy).
# Extra flags: make bench BENCH_FLAGS='-rounds 5'; BENCH_LINK=0 for loopback only.
BENCH_FLAGS ?=
BENCH_LINK ?= 1ms
.PHONY: bench
bench:
	@bash scripts/ensure-redis.sh
	cd bench && $(GO) run ./cmd/lockbench -out ../docs/performance.md -link-latency $(BENCH_LINK) $(BENCH_FLAGS)

# make bench-smoke - the bench module's own tests (TestRateLimitMatchesRedisRate
# and, as root, the link's among them) and a -quick run of every scenario and
# row, then of the link scenarios over a 1ms link (skipped, and said so,
# without root), so that the module cannot rot; CI runs it. The figures of a
# quick run mean nothing.
.PHONY: bench-smoke
bench-smoke:
	@bash scripts/ensure-redis.sh
	cd bench && $(GO) test -race -count=1 ./... && $(GO) run ./cmd/lockbench -quick -q -link-latency 1ms > /dev/null

# make chaos - the fault scenarios of docs/chaos.md (kills, pauses, partitions,
# latency, resets, clock jumps, failover) against redlock and single, on local
# redis-server processes and on Docker containers over go-redis clients, then
# on processes over rueidis clients (module rfrueidis); prints one line per run and
# the results table, rewrites docs/chaos.md, and fails if any run misses its
# expectation. Docker is skipped, loudly, only when `docker info` fails.
# Extra flags: make chaos CHAOS_FLAGS='-seed 7'.
CHAOS_FLAGS ?=
.PHONY: chaos
chaos:
	@bash scripts/ensure-redis.sh
	@bash scripts/ensure-docker.sh || echo "make chaos: no Docker engine; the docker backend will be skipped" >&2
	cd chaos && $(GO) run $(CHAOS_BIN) scenarios -backend all -client all -out ../docs/chaos.md $(CHAOS_FLAGS)

# golangci-lint, pinned, installed from the Go module proxy into ./bin on first use.
GOLANGCI_LINT_VERSION ?= v2.15.0
GOLANGCI_LINT := $(CURDIR)/bin/golangci-lint-$(GOLANGCI_LINT_VERSION)

$(GOLANGCI_LINT):
	@mkdir -p $(CURDIR)/bin
	GOBIN=$(CURDIR)/bin/.install $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv $(CURDIR)/bin/.install/golangci-lint $(GOLANGCI_LINT)

.PHONY: lint
lint: $(GOLANGCI_LINT)
	@set -e; $(foreach m,$(MODULES),echo "== lint $(m)"; (cd $(m) && $(call gowork_off,$(m)) $(GOLANGCI_LINT) run ./...);)

# make soak - issue 19's soak (docs/chaos.md, Soak; docs/soak.md): on each
# backend in turn (SOAK_BACKENDS, default "process docker"), every lock
# (redlock, single, single over Sentinel) runs four clients for
# SOAK_DURATION (default 30m) under a seeded mix of every fault the harness
# has, within what the lock tolerates (no double grant allowed) and, at the
# same time, beyond it (-unsafe: double grants allowed, fenced violations
# never). About an hour with the defaults. Fails on any violation; each
# command's log is kept, and its runs recorded as docs/soak/BACKEND-MODE.json,
# which make chaos puts into docs/chaos.md (scripts/soak.sh; SOAK_RECORD=
# records nothing). Extra flags: make soak
# SOAK_FLAGS='-seed 7' SOAK_DURATION=5m SOAK_BACKENDS=process.
SOAK_DURATION ?= 30m
SOAK_BACKENDS ?= process docker
SOAK_FLAGS ?= -seed 19
.PHONY: soak
soak:
	@bash scripts/ensure-redis.sh
	@case ' $(SOAK_BACKENDS) ' in *' docker '*) bash scripts/ensure-docker.sh;; esac
	SOAK_DURATION='$(SOAK_DURATION)' SOAK_BACKENDS='$(SOAK_BACKENDS)' SOAK_FLAGS='$(SOAK_FLAGS)' bash scripts/soak.sh

# make soak-smoke - about a minute of soak on the process backend (12s per
# run: both locks, safe and unsafe), so that a regression in the nemesis or
# the checkers fails CI; CI runs it after make chaos.
.PHONY: soak-smoke
soak-smoke:
	@bash scripts/ensure-redis.sh
	cd chaos && $(GO) run $(CHAOS_BIN) soak -duration 12s -backend process && $(GO) run $(CHAOS_BIN) soak -duration 12s -backend process -unsafe
