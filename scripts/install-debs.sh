#!/usr/bin/env bash
# install-debs.sh installs the Debian packages the end-to-end tests of the
# front ends drive for real: tmux (`ralph watch`, driven with send-keys and
# read with capture-pane) and chromium (`ralph serve`'s page, driven
# headless through the DevTools protocol). make test runs it; it does
# nothing when both are there already, and fails with what to do when they
# are missing and cannot be installed.
set -euo pipefail

need=()
command -v tmux >/dev/null 2>&1 || need+=(tmux)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
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
	command -v "$n" >/dev/null 2>&1 || {
		echo "install-debs: $n is still missing after apt-get install" >&2
		exit 1
	}
done
