#!/usr/bin/env bash
# install-peers.sh installs the pinned peer orchestrators that the benchmark
# in bench/ runs side by side with ralph (make bench-peers runs it):
#
#   ralph-tui 0.11.0, run with bun (npm package bun 1.4.5), and
#   ralphy-cli 4.7.2, which ships a compiled binary in its npm package.
#
# Each goes from npm into a per-user cache keyed by its version, so that
# every checkout and every later run reuses it:
#
#   ${RALPH_PEERS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ralph/peers}/<name>@<version>/
#
# It is idempotent like install-agents.sh: a stamp file in each folder
# records what was installed, and a second run only prints one line per
# peer ("ralph-tui 0.11.0 <folder>"). A peer that cannot be installed or
# does not run does not stop the others: its error goes to stderr and into
# <folder>/.install-error, where the benchmark reads it to say why that peer
# could not run, and the script exits non-zero at the end.
set -euo pipefail

cache=${RALPH_PEERS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ralph/peers}

# name@version, the npm packages that make it up, and the command that shows
# it runs (relative to the folder).
PEERS=(
	"ralph-tui@0.11.0|ralph-tui@0.11.0 bun@1.4.5|node_modules/.bin/bun node_modules/ralph-tui/dist/cli.js --version"
	"ralphy-cli@4.7.2|ralphy-cli@4.7.2|node_modules/.bin/ralphy --version"
)

fail=0
for spec in "${PEERS[@]}"; do
	IFS='|' read -r peer packages probe <<<"$spec"
	dest="$cache/$peer"
	stamp="$dest/.installed"
	errfile="$dest/.install-error"
	mkdir -p "$dest"
	if ! [ -f "$stamp" ] || [ "$(cat "$stamp")" != "$packages" ]; then
		rm -f "$stamp" "$errfile"
		if ! command -v npm >/dev/null 2>&1; then
			echo "npm not found: install Node.js 20+ and npm (apt-get install nodejs npm)" | tee "$errfile" >&2
			fail=1
			continue
		fi
		echo "install-peers: installing $packages into $dest ..." >&2
		start=$(date +%s)
		# shellcheck disable=SC2086 # packages is a list of words
		if ! out=$(npm install --prefix "$dest" --no-audit --no-fund --omit=dev --loglevel=error $packages 2>&1); then
			printf 'npm install %s failed (Node %s):\n%s\n' "$packages" "$(node --version 2>/dev/null || echo '?')" "$out" | tee "$errfile" >&2
			fail=1
			continue
		fi
		printf '%s\n' "$packages" >"$stamp"
		echo "install-peers: installed $peer in $(($(date +%s) - start)) s, $(du -sh "$dest" | cut -f1)" >&2
	fi
	# Run it once with an empty HOME, offline, to show that it starts.
	vhome=$(mktemp -d)
	# shellcheck disable=SC2086 # probe is a command line
	if out=$(cd "$dest" && env HOME="$vhome" timeout 60 $probe </dev/null 2>&1); then
		rm -f "$errfile"
		echo "$peer: $(printf '%s\n' "$out" | grep -v '^\s*$' | tail -n1) ($dest)"
	else
		printf '%s does not run: `%s` in %s failed:\n%s\n' "$peer" "$probe" "$dest" "$out" | tee "$errfile" >&2
		fail=1
	fi
	rm -rf "$vhome"
done
[ "$fail" = 0 ] || {
	echo "install-peers: some peers are missing (see above); the benchmark reports them as could not run" >&2
	exit 1
}
