#!/usr/bin/env bash
# install-agents.sh installs pinned versions of the real agent CLIs (Claude
# Code, Codex, opencode, Gemini CLI) from npm into ./.tools/agents, for the
# offline end-to-end tests against internal/testing/modelserver
# (make test runs it). .tools/ is ignored by git.
#
# It is idempotent: a stamp file records the installed versions, and a second
# run with the same pins only prints the versions. It prints one line per CLI
# ("claude 2.1.197 (Claude Code)") and exits non-zero with a message naming
# what failed when npm is missing, the install fails or a CLI does not run.
#
# Pins: @anthropic-ai/claude-code 2.1.197 is the last release whose
# engines.node (>=18) accepts Node 20; 2.1.198 and later need Node >= 22.
set -euo pipefail

PACKAGES=(
	@anthropic-ai/claude-code@2.1.197
	@openai/codex@0.169.0
	opencode-ai@1.18.33
	@google/gemini-cli@0.61.0
)
BINS=(claude codex opencode gemini)

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dest="$root/.tools/agents"
stamp="$dest/.installed-versions"
want=$(printf '%s\n' "${PACKAGES[@]}")

die() {
	echo "install-agents: $*" >&2
	exit 1
}

installed() {
	[ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] || return 1
	local b
	for b in "${BINS[@]}"; do
		[ -x "$dest/node_modules/.bin/$b" ] || return 1
	done
}

if ! installed; then
	command -v npm >/dev/null 2>&1 || die "npm not found: install Node.js 20+ and npm (apt-get install nodejs npm)"
	command -v node >/dev/null 2>&1 || die "node not found: install Node.js 20+ (apt-get install nodejs)"
	mkdir -p "$dest"
	rm -f "$stamp"
	echo "install-agents: installing ${PACKAGES[*]} into .tools/agents ..." >&2
	start=$(date +%s)
	if ! npm install --prefix "$dest" --no-audit --no-fund --omit=dev --loglevel=error "${PACKAGES[@]}" >&2; then
		die "npm install failed for: ${PACKAGES[*]} (see the npm output above; Node $(node --version 2>/dev/null || echo '?'))"
	fi
	for b in "${BINS[@]}"; do
		[ -x "$dest/node_modules/.bin/$b" ] || die "npm install finished but $b is missing from .tools/agents/node_modules/.bin"
	done
	printf '%s\n' "$want" >"$stamp"
	echo "install-agents: installed in $(($(date +%s) - start)) s, $(du -sh "$dest" | cut -f1)" >&2
fi

# Run each CLI once with an empty HOME so that a version check touches no
# real user state and stays offline.
vhome=$(mktemp -d)
trap 'rm -rf "$vhome"' EXIT
fail=0
for b in "${BINS[@]}"; do
	if out=$(cd "$vhome" && env HOME="$vhome" CODEX_HOME="$vhome/.codex" \
		CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 OPENCODE_DISABLE_AUTOUPDATE=1 \
		OPENCODE_DISABLE_MODELS_FETCH=1 \
		timeout 60 "$dest/node_modules/.bin/$b" --version </dev/null 2>&1); then
		echo "$b $(printf '%s\n' "$out" | grep -v '^\s*$' | tail -n1)"
	else
		echo "install-agents: $b --version failed: $out" >&2
		fail=1
	fi
done
[ "$fail" = 0 ] || die "some CLIs do not run; remove .tools/agents and run scripts/install-agents.sh again"
