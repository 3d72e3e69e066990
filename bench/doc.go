// Package bench holds benchmarks that compare ralph with its peers on the
// same work. Its tests are benchmarks only, so `go test ./...` runs none of
// them; `make bench-peers`, `make bench-serial`, `make bench-temporal`,
// `make bench-trust` and `make bench-sandbox` run them (their pure helpers
// have unit tests that do run).
//
// BenchmarkPeers (peers_test.go) runs, side by side in one run, ralph build
// --workers 1 and --workers 4, ralph-tui 0.11.0 serial and with 4 parallel
// workers, and ralphy-cli 4.7.2 serial and with --parallel --max-parallel 4,
// each on the same independent stories in a fresh git repository, with the
// same real agent CLI (Claude Code, as installed by
// scripts/install-agents.sh) against the same scripted model, which answers
// every request after the same delay. For each it prints the wall time, the
// stories that landed on the target branch, the commits there, and the
// branches and worktrees left behind.
//
//	make bench-peers              # one repetition, a few minutes
//	make bench-peers REPS=3       # medians of three
//
// BenchmarkSerial (serial_test.go) measures what each orchestrator costs
// per story over the agent CLI alone: a bare loop running `claude -p` once
// per story, ralph build --workers 1, ralph-tui --serial --delay 0 and
// ralphy, one story at a time on the same ten stories against a model that
// answers after 200 ms, in rounds of rotated order. It prints wall time and
// the CPU time of each contender's whole process tree per story, and both
// minus the same round's bare loop, with medians.
//
//	make bench-serial                        # 3 rounds, about 3 minutes
//	make bench-serial REPS=5 RALPH_BIN=/tmp/ralph
//
// BenchmarkTemporalEngine (temporal_test.go) measures ralph's own time per
// story on the Temporal engine against the local engine, on the same
// stories with the same fake agent, in alternating rounds against one
// Temporal dev server; the workflow history per story as the server counts
// it; and a 100-story build with a low [engine] history_limit that must
// continue as new and land every story exactly once.
//
//	make bench-temporal                      # 3 rounds, about 2 minutes
//
// BenchmarkTrust (trust_test.go, scenarios in trust_scenarios_test.go) is
// the false-completion benchmark. Each scenario is a repository with one
// story whose test is written first (Go, pytest, node's test runner, shell
// with make) and a scripted agent, the same shell commands whatever tool
// runs it: lazy agents, agents that only tick the task file, skip, weaken
// or delete the failing test, rewrite what the checks run, edit ralph's
// config, do half the work, echo the prompt or promise in prose, and
// honest agents. ralph build (with the config `ralph init` writes),
// ralph-tui and ralphy each run every scenario in a fresh repository with
// the real Claude Code. What each tool reports done (its own task file) is
// held against the story's held-back test: the initial commit's test files
// and runner config put back into the branch tip's tree and run by the
// runner itself. It counts false completions, false rejections of honest
// work and commits left on the branch whose tree fails the held-back test,
// and prints a table per tool, a matrix per scenario and both in markdown.
//
//	make bench-trust                                   # about 10 minutes
//	make bench-trust BENCH_ARGS='-trust-only go/ -trust-tools ralph -keep'
//
// BenchmarkSandbox (sandbox_test.go) measures what bubblewrap costs: the
// start of `true` plain, under bwrap's least and under each flag
// sandbox.Wrap uses, in rotated rounds; then a one-story `ralph build 1`
// with the fake agent, --sandbox off against bwrap, in pairs whose order
// alternates, with the medians and the median paired difference.
//
//	make bench-sandbox                       # 7 pairs, about 2 minutes
//
// scripts/install-peers.sh installs the peers from npm into a per-user
// cache; a peer that cannot be installed or run shows in the table as
// "could not run" with the reason.
package bench
