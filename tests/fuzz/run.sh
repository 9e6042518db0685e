#!/bin/sh
# Run every libFuzzer harness of tests/fuzz for a given time each, from the
# corpora kept in tests/fuzz/corpus, and print what each did.
#
#   tests/fuzz/run.sh [-b BUILD] [-w WORKDIR] [-r RUNS] [-m] SECONDS [HARNESS...]
#
#   SECONDS   time per harness (libFuzzer's -max_total_time)
#   HARNESS   model state config sampler tokenizer api (default: every one
#             that is built)
#   -b BUILD  the build directory, configured with -Dfuzz=true by clang
#             (made here if missing; default /tmp/txl-fuzz-build)
#   -w DIR    where the working corpora and crash files go (default
#             /tmp/txl-fuzz); the committed corpus is only read
#   -r RUNS   stop a harness after RUNS executions (libFuzzer's -runs)
#             if that comes before SECONDS
#   -m        afterwards, minimise each working corpus (-merge=1) back into
#             tests/fuzz/corpus/HARNESS: the new corpus is the smallest
#             set of inputs with all the coverage of the old one and the
#             new finds
#
# One process at a time, one thread (OPENBLAS_NUM_THREADS=1); run it with
# `nice` on a shared machine.  Prints one line per harness: executions,
# seconds, executions/s, edges covered (cov), features (ft), corpus size;
# exits 1 if any harness crashed (the input is kept as DIR/HARNESS/crash-*,
# replay it with BUILD/tests/fuzz/fuzz-HARNESS FILE).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=/tmp/txl-fuzz-build
work=/tmp/txl-fuzz
merge=0
max_runs=-1
while getopts b:w:r:m opt; do
	case $opt in
	b) build=$OPTARG ;;
	w) work=$OPTARG ;;
	r) max_runs=$OPTARG ;;
	m) merge=1 ;;
	*) sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { echo "usage: $0 [-b BUILD] [-w DIR] [-r RUNS] [-m] SECONDS [HARNESS...]" >&2; exit 2; }
secs=$1
shift
case $secs in '' | *[!0-9]*) echo "$0: SECONDS must be a number" >&2; exit 2 ;; esac
case $max_runs in -1) ;; '' | *[!0-9]*) echo "$0: RUNS must be a number" >&2; exit 2 ;; esac

if [ ! -f "$build/build.ninja" ]; then
	CC=clang CXX=clang++ meson setup "$build" "$src" -Dfuzz=true >/dev/null
fi
[ $# -gt 0 ] || set -- model state config sampler tokenizer api
# the harnesses only: the rest of the project need not build with clang
targets=""
for h in "$@"; do targets="$targets tests/fuzz/fuzz-$h"; done
ninja -C "$build" $targets >/dev/null
fz=$build/tests/fuzz

export OPENBLAS_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
# ASan's default 256 MB quarantine of freed memory costs the model harness
# 40% of its time in page faults and TLB flushes; 16 MB still holds every
# block one execution frees
export ASAN_OPTIONS="${ASAN_OPTIONS:-quarantine_size_mb=16}"
export TXL_FUZZ_STATE_MODEL="$here/corpus/state-model.bin"
# txlgen-server's requests are tokenized by the default model
export TXLGEN_FUZZ_MODEL="${TXLGEN_FUZZ_MODEL:-$src/models/sotu.bin}"
status=0
printf '%-10s %12s %6s %8s %6s %7s %16s\n' harness executions secs "exec/s" \
	cov ft corpus
for h in "$@"; do
	bin=$fz/fuzz-$h
	if [ ! -x "$bin" ]; then
		echo "$h: not built ($bin)" >&2
		continue
	fi
	mkdir -p "$work/$h/corpus"
	# libFuzzer adds what it finds to the first directory and only reads
	# the committed corpus.  -timeout=60: on a busy shared machine a
	# niced process can wait seconds for a core; a real hang still shows.
	# (`set --` reuses the positional parameters: the loop's list was
	# expanded before it began.)
	set -- -max_total_time="$secs" -runs="$max_runs" -rss_limit_mb=2048 -timeout=60 \
		-print_final_stats=1 -artifact_prefix="$work/$h/" \
		"$work/$h/corpus"
	[ -f "$here/$h.dict" ] && set -- "$@" -dict="$here/$h.dict"
	[ "$h" = config ] && set -- "$@" -close_fd_mask=2
	log=$work/$h/last.log
	[ -d "$here/corpus/$h" ] && set -- "$@" "$here/corpus/$h"
	if ! "$bin" "$@" >"$log" 2>&1; then
		echo "$h: CRASHED, see $log and $work/$h/crash-*" >&2
		status=1
		continue
	fi
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
	time=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log")
	last=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -n 1)
	cov=$(echo "$last" | sed -n 's/.* cov: \([0-9]*\).*/\1/p')
	ft=$(echo "$last" | sed -n 's/.* ft: \([0-9]*\).*/\1/p')
	corp=$(echo "$last" | sed -n 's/.* corp: \([^ ]*\).*/\1/p')
	printf '%-10s %12s %6s %8s %6s %7s %16s\n' "$h" "$runs" "$time" \
		"$((runs / (time > 0 ? time : 1)))" "$cov" "$ft" "$corp"
	if [ $merge = 1 ]; then
		new=$work/$h/merged
		rm -rf "$new"
		mkdir -p "$new" "$here/corpus/$h"
		"$bin" -merge=1 -rss_limit_mb=2048 -timeout=60 \
			-artifact_prefix="$work/$h/" "$new" "$here/corpus/$h" \
			"$work/$h/corpus" >"$work/$h/merge.log" 2>&1
		rm -rf "$here/corpus/$h"
		mv "$new" "$here/corpus/$h"
		echo "$h: corpus minimised: $(ls "$here/corpus/$h" | wc -l)" \
			"files, $(du -sk "$here/corpus/$h" | cut -f1) KiB" >&2
	fi
done
exit $status
