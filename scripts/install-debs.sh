#!/usr/bin/env bash
# install-debs.sh installs the Debian packages the end-to-end tests drive
# for real: tmux (`ralph watch`, driven with send-keys and read with
# capture-pane), chromium (`ralph serve`'s page, driven headless through
# the DevTools protocol), pytest (a project whose checks ralph reads as
# JUnit XML, test by test), bubblewrap (the agents' sandbox, whose
# tests start it for real) and curl (the hostile agent that tries hosts
# through the sandbox's allow-list proxy). make test runs it; it does nothing when they
# are there already, and fails with what to do when they are missing and
# cannot be installed.
set -euo pipefail

need=()
command -v tmux >/dev/null 2>&1 || need+=(tmux)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v pytest >/dev/null 2>&1 || need+=(python3-pytest)
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
command -v curl >/dev/null 2>&1 || need+=(curl)
if [ ${#need[@]} -eq 0 ]; then
	exit 0
fi
sudo=""
if [ "$(id -u)" != 0 ]; then
	command -v sudo >/dev/null 2>&1 || {
		echo "install-debs: the tests need ${need[*]}: install them (apt-get install -y ${need[*]}) as root" >&2
		exit 1
	}
	sudo="sudo -n"
fi
echo "install-debs: installing ${need[*]} from Debian's packages"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q >/dev/null || true
$sudo apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null || {
	echo "install-debs: apt-get install ${need[*]} failed: install them by hand, then run make test again" >&2
	exit 1
}
for n in "${need[@]}"; do
	[ "$n" = python3-pytest ] && n=pytest
	[ "$n" = bubblewrap ] && n=bwrap
	command -v "$n" >/dev/null 2>&1 || {
		echo "install-debs: $n is still missing after apt-get install" >&2
		exit 1
	}
done
