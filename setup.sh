#!/bin/sh
# Install txlgen's build and test dependencies from Debian's packages,
# then configure and build in ./build.  Safe to run again.
set -eu
cd "$(dirname "$0")"

pkgs="build-essential pkg-config meson ninja-build
      libopenblas-dev libsentencepiece-dev sentencepiece libcjson-dev
      libedit-dev man-db
      python3 python3-numpy python3-torch python3-sentencepiece"

missing=$(dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' $pkgs 2>/dev/null |
	awk '$1 != "ii" { print $2 }')
# dpkg-query omits packages it has never heard of: compare the counts too
known=$(dpkg-query -W -f='${Package}\n' $pkgs 2>/dev/null | wc -l)
if [ -n "$missing" ] || [ "$known" -ne "$(echo $pkgs | wc -w)" ]; then
	sudo=""
	[ "$(id -u)" -eq 0 ] || sudo="sudo"
	$sudo apt-get update -q
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q \
		--no-install-recommends $pkgs
fi

[ -d build ] || meson setup build
ninja -C build
