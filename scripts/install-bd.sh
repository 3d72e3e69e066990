#!/usr/bin/env bash
# install-bd.sh builds the pinned beads CLI (bd) into ./.tools/bd/bd for the
# integration tests of the beads task source (make test runs it through the
# `bd` target). .tools/ is ignored by git.
#
# `go install github.com/steveyegge/beads/cmd/bd@latest` does not work behind
# a module proxy that serves only some versions (the proxy answers 403 for
# @v/list), so this script downloads the module zip of the pinned version and
# builds inside it with the module's own go.mod and go.sum. The default
# storage (embedded Dolt) needs cgo; -tags gms_pure_go avoids ICU.
# The first build takes about 5 minutes on 2 cores; the binary is ~190 MB.
#
# It is idempotent: a stamp file records the built version, and a second run
# with the same pin only prints `bd <version>`. It exits non-zero with a
# message naming what failed when go or a C compiler is missing, the download
# or the build fails, or the built binary does not report the pinned version.
set -euo pipefail

BD_MODULE=github.com/steveyegge/beads
BD_VERSION=v1.0.5

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dest="$root/.tools/bd"
bin="$dest/bd"
stamp="$dest/.installed-version"
want="$BD_MODULE@$BD_VERSION"

die() {
	echo "install-bd: $*" >&2
	exit 1
}

installed() {
	[ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$bin" ]
}

if ! installed; then
	command -v go >/dev/null 2>&1 || die "go not found: install Go 1.26.2+ (https://go.dev/dl/)"
	cc=${CC:-cc}
	command -v "$cc" >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1 ||
		die "no C compiler found: bd's embedded Dolt storage needs cgo (apt-get install gcc)"
	mkdir -p "$dest"
	rm -f "$stamp"
	echo "install-bd: building $want into .tools/bd (takes ~5 minutes the first time) ..." >&2
	start=$(date +%s)
	work=$(mktemp -d "$dest/build.XXXXXX")
	trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
	# Download outside any module so that the project's go.mod plays no part.
	if ! (cd "$work" && go mod download -json "$want" >"$work/download.json"); then
		cat "$work/download.json" >&2 2>/dev/null || true
		die "go mod download $want failed (GOPROXY=$(go env GOPROXY))"
	fi
	moddir=$(go env GOMODCACHE)/$BD_MODULE@$BD_VERSION
	[ -d "$moddir" ] || die "module directory $moddir missing after go mod download"
	src="$work/src"
	cp -r "$moddir" "$src"
	chmod -R u+w "$src"
	if ! (cd "$src" && CGO_ENABLED=1 GOFLAGS=-buildvcs=false GOWORK=off \
		go build -tags gms_pure_go -o "$work/bd" ./cmd/bd >&2); then
		die "go build of $want failed (see the output above; needs CGO_ENABLED=1 and a C compiler)"
	fi
	mv -f "$work/bd" "$bin"
	printf '%s\n' "$want" >"$stamp"
	echo "install-bd: built in $(($(date +%s) - start)) s, $(du -sh "$bin" | cut -f1)" >&2
fi

# Check that the binary runs and reports the pinned version.
out=$("$bin" version --json 2>&1) || die "$bin version failed: $out; remove .tools/bd and run scripts/install-bd.sh again"
case "$out" in
*"\"${BD_VERSION#v}\""*) ;;
*) die "$bin reports $out, want ${BD_VERSION#v}; remove .tools/bd and run scripts/install-bd.sh again" ;;
esac
echo "bd ${BD_VERSION#v}"
