#!/usr/bin/env bash
# install-temporal.sh builds the pinned Temporal CLI (which carries the dev
# server, `temporal server start-dev`) for the integration tests of the
# Temporal engine (make test runs it through the `temporal` target).
#
# The binary is built once per user into a cache keyed by version
# (${XDG_CACHE_HOME:-~/.cache}/ralph/tools/temporal-<version>/temporal), so a
# fresh clone reuses it and only a fresh machine builds it, and linked into
# ./.tools/temporal/temporal, where the tests look (.tools/ is ignored by git).
#
# Only v1.5.1 installs from the module proxy: @latest (v1.9.1) has a
# `replace ... => ./cliext` that `go install` refuses. The first build takes
# about 4 minutes on 2 cores and ~2 GB of memory; the binary is ~250 MB.
#
# It is idempotent and exits non-zero with a message naming what failed.
set -euo pipefail

TEMPORAL_MODULE=github.com/temporalio/cli/cmd/temporal
TEMPORAL_VERSION=v1.5.1

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache="${RALPH_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ralph/tools}/temporal-$TEMPORAL_VERSION"
bin="$cache/temporal"
link="$root/.tools/temporal/temporal"

die() {
	echo "install-temporal: $*" >&2
	exit 1
}

if [ ! -x "$bin" ]; then
	command -v go >/dev/null 2>&1 || die "go not found: install Go 1.26.2+ (https://go.dev/dl/)"
	mkdir -p "$cache"
	echo "install-temporal: building $TEMPORAL_MODULE@$TEMPORAL_VERSION into $cache (takes ~4 minutes the first time) ..." >&2
	start=$(date +%s)
	work=$(mktemp -d "$cache/build.XXXXXX")
	trap 'rm -rf "$work"' EXIT
	# Outside any module, so that the project's go.mod plays no part.
	if ! (cd "$work" && GOBIN="$work" GOWORK=off GOFLAGS=-buildvcs=false \
		go install "$TEMPORAL_MODULE@$TEMPORAL_VERSION" >&2); then
		die "go install $TEMPORAL_MODULE@$TEMPORAL_VERSION failed (see above; GOPROXY=$(go env GOPROXY))"
	fi
	mv -f "$work/temporal" "$bin"
	echo "install-temporal: built in $(($(date +%s) - start)) s, $(du -sh "$bin" | cut -f1)" >&2
fi

mkdir -p "$(dirname "$link")"
ln -sfn "$bin" "$link"
out=$("$link" --version 2>&1) || die "$link --version failed: $out; remove $cache and run scripts/install-temporal.sh again"
case "$out" in
*"Server 1.29"*) ;;
*) die "$link reports \"$out\", want the dev server of $TEMPORAL_VERSION (Server 1.29.x); remove $cache and run again" ;;
esac
echo "$out"
