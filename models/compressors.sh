#!/bin/sh
# Bits per byte of general-purpose compressors on held-out texts, given the
# training text as context, to set beside `txlgen --score`: for each FILE,
#   8 * (size(compress(train + FILE)) - size(compress(train))) / bytes(FILE)
# with `xz -9e` and `zpaq -m5` (Debian packages xz-utils and zpaq).
#
#   models/compressors.sh TRAIN FILE...
set -eu
[ $# -ge 2 ] || { echo "usage: $0 TRAIN FILE..." >&2; exit 2; }
train=$1
shift
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

xz_size() { xz -9e -T1 -c "$@" | wc -c; }
zpaq_size() {
	rm -f "$tmp/a.zpaq"
	# zpaq stores the files by name; copies keep the names short and equal
	i=0
	for f in "$@"; do cp "$f" "$tmp/f$i"; i=$((i + 1)); done
	(cd "$tmp" && zpaq a a.zpaq f* -m5 -threads 1 >/dev/null 2>&1)
	rm -f "$tmp"/f[0-9]*
	wc -c < "$tmp/a.zpaq"
}

xz0=$(xz_size "$train")
zp0=$(zpaq_size "$train")
printf '%-24s %10s %8s %8s\n' file bytes xz-9e zpaq-m5
for f in "$@"; do
	n=$(wc -c < "$f")
	xz1=$(cat "$train" "$f" | xz -9e -T1 -c | wc -c)
	zp1=$(zpaq_size "$train" "$f")
	awk -v f="$(basename "$f")" -v n="$n" -v a="$xz0" -v b="$xz1" \
	    -v c="$zp0" -v d="$zp1" 'BEGIN {
		printf "%-24s %10d %8.3f %8.3f\n", f, n, 8 * (b - a) / n,
		       8 * (d - c) / n }'
done
