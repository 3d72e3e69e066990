# ralph's build and test entry points. `make test` is the one test command:
# CI (.ci/run) runs exactly it.

GO ?= go

.PHONY: build test demo bench lint agents bd debs temporal bench-peers bench-serial bench-temporal bench-sandbox

build:
	$(GO) build -o bin/ralph ./cmd/ralph
	$(GO) build -o bin/ralph-sandbox-net ./cmd/ralph-sandbox-net

demo:
	$(GO) run ./cmd/ralph demo

# lint fails on unformatted code, vet findings or an untidy go.mod.
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) mod tidy -diff

# test installs the real agent CLIs (pinned, from npm, cached in .tools/)
# that the end-to-end tests run against a local scripted model server.
# -timeout: go test's default of 10 minutes per package was hit under load;
# the slowest package takes a few minutes, and 30m still leaves go test,
# not CI's 90-minute limit, to end a hung package with its goroutine dump
# (internal/testing/clitest's TestMakeTestHasTimeout holds this).
test: lint agents bd debs temporal
	@command -v git >/dev/null || { echo "the tests need git: apt-get install git"; exit 1; }
	$(GO) test -race -count=1 -timeout 30m ./...

agents: bd
	bash scripts/install-agents.sh

# debs installs tmux and chromium from Debian's packages when missing: the
# end-to-end tests of `ralph watch` and `ralph serve` drive them.
debs:
	bash scripts/install-debs.sh

# temporal builds the pinned Temporal CLI, whose dev server the Temporal
# engine's integration tests start on 127.0.0.1 (once per user, cached by
# version; see the script).
temporal:
	bash scripts/install-temporal.sh

# bd builds the pinned beads CLI into .tools/bd/bd (cached; see the script).
bd:
	bash scripts/install-bd.sh

bench:
	$(GO) test -run '^$$' -bench . -benchtime 5x ./internal/loop/ ./internal/tasks/ ./internal/gitx/ ./internal/session/

# bench-peers runs ralph (--workers 1 and 4), ralph-tui and ralphy-cli side
# by side on the same stories, with the real Claude Code against a scripted
# model that answers after 2 s (bench/, README "Performance"). It takes a
# few minutes; REPS=3 gives medians of three. A peer that cannot be
# installed is not skipped: the table says it could not run, and why.
REPS ?= 1
BENCH_ARGS ?=
bench-peers:
	bash scripts/install-agents.sh
	-bash scripts/install-peers.sh
	$(GO) test -run '^$$' -bench BenchmarkPeers -benchtime 1x -timeout 90m ./bench/ -args -reps $(REPS) $(BENCH_ARGS)

# bench-serial runs, one story at a time, a bare `claude -p` loop, ralph
# build --workers 1, ralph-tui --serial --delay 0 and ralphy on the same 10
# stories with the real Claude Code against a model that answers after
# 200 ms, in REPS rounds (3 unless given) of rotated order, and prints wall
# and CPU per story over the bare loop (bench/serial_test.go, README
# "Performance"). About 3 minutes. RALPH_BIN=path runs that ralph binary
# instead of one built from the checkout; RALPH_BASE=path runs another
# beside it in the same rounds (a before and after).
bench-serial: REPS = 3
bench-serial:
	bash scripts/install-agents.sh
	-bash scripts/install-peers.sh
	$(GO) test -run '^$$' -bench BenchmarkSerial -benchtime 1x -timeout 60m ./bench/ -args -serial-rounds $(REPS) $(if $(RALPH_BIN),-ralph $(abspath $(RALPH_BIN))) $(if $(RALPH_BASE),-ralph-base $(abspath $(RALPH_BASE))) $(BENCH_ARGS)

# bench-trust is the false-completion benchmark: scripted agents that cheat
# (say they are done and do nothing, tick the task file, skip, weaken or
# delete the failing test, rewrite what the checks run, edit ralph's
# config, do half the work, echo the prompt) and honest ones, in Go,
# pytest, node's test runner and shell with make, each in a repository of
# its own whose story's test is written first, run by ralph, ralph-tui and
# ralphy with the real Claude Code against a scripted model. It counts each
# tool's false completions, false rejections and unverified commits
# against the story's held-back test and prints the tables, text and
# markdown (bench/trust_test.go, README "Performance"). About 10 minutes;
# needs pytest (make debs). RALPH_BIN=path runs that ralph binary;
# BENCH_ARGS='-trust-only go/,sh/honest -trust-tools ralph -keep' runs some.
.PHONY: bench-trust
bench-trust:
	bash scripts/install-agents.sh
	-bash scripts/install-peers.sh
	$(GO) test -run '^$$' -bench BenchmarkTrust -benchtime 1x -timeout 60m ./bench/ -args $(if $(RALPH_BIN),-ralph $(abspath $(RALPH_BIN))) $(BENCH_ARGS)

# bench-temporal measures ralph's own time per story on the Temporal engine
# against the local engine (same fake agent, alternating rounds, one dev
# server), the workflow history per story, and a 100-story build that must
# continue as new (bench/temporal_test.go, README "Performance"). About 2
# minutes. REPS rounds (3 unless given); RALPH_BIN=path runs that ralph binary.
bench-temporal: REPS = 3
bench-temporal: temporal
	$(GO) test -run '^$$' -bench BenchmarkTemporalEngine -benchtime 1x -timeout 30m ./bench/ -args -temporal-rounds $(REPS) $(if $(RALPH_BIN),-ralph $(abspath $(RALPH_BIN))) $(BENCH_ARGS)

# bench-sandbox measures what bubblewrap costs: the start of `true` under
# each flag sandbox.Wrap uses, and a one-story ralph build with --sandbox
# off and bwrap in PAIRS alternating pairs (bench/sandbox_test.go,
# docs/performance.md "Sandbox"). About a minute.
bench-sandbox: PAIRS = 7
bench-sandbox:
	$(GO) test -run '^$$' -bench BenchmarkSandbox -benchtime 1x -timeout 20m ./bench/ -args -sandbox-pairs $(PAIRS) $(if $(RALPH_BIN),-ralph $(abspath $(RALPH_BIN))) $(BENCH_ARGS)
