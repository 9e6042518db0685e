#!/bin/sh
# Install txlgen's dependencies from Debian's packages, then configure and
# build in ./build.  Safe to run again.
#
#   ./setup.sh            everything: what txlgen needs, and what its tests,
#                         model training and checkpoint conversion need
#                         (PyTorch among them, about 230 MB)
#   ./setup.sh --runtime  only what building and running txlgen needs, with
#                         NumPy, SentencePiece's, snappy's and crc32c's
#                         Python modules for converting and fetching models
#                         (models/convert.py, txlgen-get; the last two read
#                         TensorFlow checkpoints)
set -eu
cd "$(dirname "$0")"

runtime="build-essential pkg-config meson ninja-build
	 libopenblas-dev libsentencepiece-dev libcjson-dev libedit-dev
	 libmicrohttpd-dev
	 man-db bash-completion python3 python3-numpy python3-sentencepiece
	 python3-snappy python3-crc32c"
# python3-venv, -setuptools and -wheel: the Python package installed
# offline into a virtual environment (tests/test_package.py)
tests="sentencepiece python3-torch parallel python3-distributed tmux
	 python3-venv python3-setuptools python3-wheel"
# chromium: txlgen-server's page in a browser (tests/test_page.py)
tests="$tests chromium"
# Node.js and npm for the openai client's and the page's tests of
# txlgen-server: Debian's, unless a Node.js with its npm is there already
command -v npm >/dev/null 2>&1 || tests="$tests nodejs npm"

case "${1:-}" in
--runtime) pkgs=$runtime ;;
"") pkgs="$runtime $tests" ;;
*)
	echo "usage: $0 [--runtime]" >&2
	exit 2
	;;
esac

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

# the official openai client and puppeteer-core, at the versions
# tests/node/package-lock.json pins, for tests/server-openai.mjs and
# tests/page.mjs (puppeteer-core drives Debian's chromium: it downloads
# no browser)
if [ "${1:-}" != --runtime ] &&
	! cmp -s tests/node/package-lock.json \
		tests/node/node_modules/.installed-lock 2>/dev/null; then
	npm ci --prefix tests/node --no-audit --no-fund --loglevel=error
	cp tests/node/package-lock.json tests/node/node_modules/.installed-lock
fi

cat <<EOF

txlgen is built: $PWD/build/cmd/txlgen
  export PATH="$PWD/build/cmd:\$PATH"     # to run it as txlgen
  . cmd/txlgen.bash-completion            # its completion in this shell
  meson install -C build                  # or install it, completion included
EOF
