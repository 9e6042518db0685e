#!/bin/sh
# The shared library's ABI: its soname is libtxl.so.MAJOR, it exports the
# functions txl.h declares TXL_API and nothing else (the C++ shim would
# leak std:: symbols), each under a version node of txl.sym.
# Usage: check-symbols.sh LIBRARY TXL_H
set -eu
lib=$1
header=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

# name@@TXL_x.y (the version nodes themselves: absolute symbols, A)
nm -D --defined-only "$lib" | awk '$2 != "A" { print $3 }' | sort \
	> "$tmp/versioned"
sed 's/@.*//' "$tmp/versioned" | sort > "$tmp/exported"
# what txl.h declares: TXL_API ... txl_name( (the name may follow a line
# break after the return type)
tr '\n' ' ' < "$header" | grep -o 'TXL_API[^;{(]*(' |
	grep -o 'txl_[a-z0-9_]*[[:space:]]*($' | tr -d ' (' | sort > "$tmp/declared"

if grep -v '^txl_' "$tmp/exported" > "$tmp/leaks"; then
	echo "FAIL: $lib exports symbols outside txl_*:" >&2
	cat "$tmp/leaks" >&2
	fail=1
fi
if [ -n "$(comm -23 "$tmp/declared" "$tmp/exported")" ]; then
	echo "FAIL: declared TXL_API in txl.h but not exported:" >&2
	comm -23 "$tmp/declared" "$tmp/exported" >&2
	fail=1
fi
if [ -n "$(comm -13 "$tmp/declared" "$tmp/exported")" ]; then
	echo "FAIL: exported but not declared TXL_API in txl.h:" >&2
	comm -13 "$tmp/declared" "$tmp/exported" >&2
	fail=1
fi
if grep -v '@@TXL_[0-9][0-9]*\.[0-9][0-9]*$' "$tmp/versioned" > "$tmp/bare"; then
	echo "FAIL: exported without a TXL_x.y version node:" >&2
	cat "$tmp/bare" >&2
	fail=1
fi
soname=$(objdump -p "$lib" | awk '$1 == "SONAME" { print $2 }')
case $soname in
libtxl.so.[0-9]*) ;;
*)
	echo "FAIL: soname '$soname' is not libtxl.so.MAJOR" >&2
	fail=1
	;;
esac

[ "$fail" -eq 0 ] || exit 1
n=$(wc -l < "$tmp/exported")
echo "ok: $soname, $n symbols, all declared in txl.h, all versioned"
[ "$n" -gt 20 ]
