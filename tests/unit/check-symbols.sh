#!/bin/sh
# Fail if the shared library exports a symbol outside the txl_ namespace.
set -eu
lib=$1
leaks=$(nm -D --defined-only "$lib" | awk '{ print $3 }' | grep -v '^txl_' || true)
if [ -n "$leaks" ]; then
	echo "FAIL: $lib exports symbols outside txl_*:" >&2
	echo "$leaks" >&2
	exit 1
fi
n=$(nm -D --defined-only "$lib" | grep -c ' txl_')
echo "ok: $n symbols, all txl_*"
[ "$n" -gt 20 ]
