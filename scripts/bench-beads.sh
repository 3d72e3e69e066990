#!/usr/bin/env bash
# bench-beads.sh measures what ralph costs per iteration over beads, against
# a bare shell loop making seed 004's four bd calls per task (bd prime,
# bd ready --limit 1, bd close, bd comments add) and nothing else: the
# floor any beads loop pays. Both work N tasks (default 5) in a fresh
# repository with the pinned bd (scripts/install-bd.sh); ralph's agent is a
# shell line that writes one file, so the difference is ralph's own work
# (its bd processes, git, checks, records). It prints seconds per iteration
# and bd processes per iteration for each. Usage: scripts/bench-beads.sh [N]
set -euo pipefail

n=${1:-5}
root=$(cd "$(dirname "$0")/.." && pwd)
bd=${RALPH_BD:-$root/.tools/bd/bd}
[ -x "$bd" ] || { echo "needs the pinned bd at $bd: run scripts/install-bd.sh" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/ralph" "$root/cmd/ralph"

# A wrapper counts bd processes.
cat > "$work/bd" <<WRAP
#!/bin/sh
echo x >> "$work/count"
exec "$bd" "\$@"
WRAP
chmod 755 "$work/bd"
export BD_NON_INTERACTIVE=1 BEADS_ACTOR=bench GIT_AUTHOR_NAME=b GIT_AUTHOR_EMAIL=b@example.invalid GIT_COMMITTER_NAME=b GIT_COMMITTER_EMAIL=b@example.invalid

repo() { # repo DIR: a git repository with a beads database of n tasks
	mkdir -p "$1" && cd "$1"
	git init -q && git commit -q --allow-empty -m initial
	"$bd" init --non-interactive --prefix rl --skip-agents --skip-hooks -q
	for i in $(seq "$n"); do "$bd" create --title "Task $i" -p 2 --acceptance "t$i.txt exists" --silent >/dev/null; done
	: > "$work/count"
}

now() { date +%s.%N; }
per() { awk -v a="$1" -v b="$2" -v n="$3" 'BEGIN { printf "%.2f", (b - a) / n }'; }
count() { wc -l < "$work/count"; }

repo "$work/bare"
start=$(now)
while :; do
	"$work/bd" prime >/dev/null
	id=$("$work/bd" ready --json --limit 1 | sed -n 's/.*"id": "\([^"]*\)".*/\1/p' | head -1)
	[ -n "$id" ] || break
	date +%s%N > "$id.txt"
	"$work/bd" close "$id" --reason done --json >/dev/null
	"$work/bd" comments add "$id" "done" --json >/dev/null
done
end=$(now)
echo "bare loop (prime, ready, close, comment): $(per "$start" "$end" "$n") s/iteration, $(per 0 "$(count)" "$n") bd processes/iteration"

repo "$work/ralph-repo"
mkdir -p .ralph
cat > .ralph/config.toml <<'TOML'
[agent]
default = "sh"
timeout = "60s"
[agents.sh]
command = ["sh", "-c", "date +%s%N > out-$(date +%s%N).txt"]
TOML
git add -A && git commit -q -m config
start=$(now)
RALPH_BD="$work/bd" "$work/ralph" build "$n" --tasks beads >/dev/null
end=$(now)
echo "ralph build:                              $(per "$start" "$end" "$n") s/iteration, $(per 0 "$(count)" "$n") bd processes/iteration"
