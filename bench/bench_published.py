#!/usr/bin/python3
"""Scoring at the enwik8 model's published shape, against the machine's peak.

  env -u OPENBLAS_CORETYPE /usr/bin/python3 bench/bench_published.py \\
      [--build build] [--base OTHER_BUILD] [--work DIR] [--tokens 512] \\
      [--threads 2] [--reps 2] [--layers 24]

Makes (once, kept in --work) random models of the shape of the paper's
enwik8 model (24 layers, d_model 1024, 8 heads of 128, d_inner 3072;
models/txlgen/random_model.py, the tests' 320-piece vocabulary instead of
204 symbols: the output layer is 0.6% of the work either way) in F32 and
BF16, and scores them with `txlgen --score` at the paper's evaluation
settings (seg_len 128, mem_len 3800, clamp_len 1000, same_length, a
memory of zero states, --mem-init zeros).  The memory is first filled by
--prime with a text of more than mem_len tokens (so that no zero state is
left: a zero state's products are skipped), then --tokens ids are scored:
the steady state.  Measured in one run, alternated, each the best of
--reps:

  - the peak of the machine's F32 multiply-adds and of vdpbf16ps on
    --threads threads (bench-kernels: a loop of independent FMAs in
    registers), before and after the runs;
  - txlgen F32, and BF16 weights with --compute bf16, of --build and, if
    given, of --base (another build, e.g. of main, to compare with);
  - for each, tokens/s (txlgen --stats, the scored part), GFLOP/s and %
    of the peak (BF16 against twice the F32 peak, vdpbf16ps doing two
    products a lane), in two counts:
      effective: the work as the original code computes it, each product
        counted once (every layer's q, k, v, o, ff1, ff2; attention's
        q.k, q.R and p.v over mem_len + seg_len keys; the output layer):
        bench.py's count;
      arithmetic: what txlgen computes: the position term q.R over the
        clamp_len + 1 distances only (every distance beyond clamp_len
        shares one row of R).

Prints the load average before and after.  A shared machine only ever
slows a run down: compare the two builds of one run, not runs.
"""

import argparse
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from machine import cpu_name  # noqa: E402 (bench/)

SHAPE = dict(n_layer=24, n_head=8, d_model=1024, d_head=128, d_inner=3072)
SEG, MEM, CLAMP = 128, 3800, 1000


def make_models(work, layers):
    """{dtype: path} of the random models, made if absent."""
    out = {}
    for dt in ("F32", "BF16"):
        d = os.path.join(work, f"enwik8-L{layers}-{dt}")
        path = os.path.join(d, "m.bin")
        if not os.path.exists(path):
            print(f"making {path} ...", file=sys.stderr, flush=True)
            shape = dict(SHAPE, n_layer=layers)
            subprocess.run(
                ["/usr/bin/python3",
                 os.path.join(ROOT, "tests", "make_random_model.py"),
                 "-o", d, "--tgt-len", str(SEG), "--mem-len", str(MEM),
                 "--clamp-len", str(CLAMP), "--same-length", "true",
                 "--dtype", dt] +
                [x for k, v in shape.items()
                 for x in (f"--{k.replace('_', '-')}", str(v))],
                check=True, stdout=subprocess.DEVNULL)
        out[dt] = path
    return out


def n_token(txlgen, model):
    r = subprocess.run([txlgen, "-m", model, "--info"], capture_output=True,
                       text=True, check=True)
    m = re.search(r"n_token: (\d+)", r.stdout)
    if not m:
        sys.exit(f"{txlgen} --info: no n_token")
    return int(m.group(1))


def flops_per_token(layers, V, arithmetic):
    """Multiply-adds of a scored token, times 2 (see the docstring)."""
    M, HD, I = SHAPE["d_model"], SHAPE["n_head"] * SHAPE["d_head"], \
        SHAPE["d_inner"]
    keys = MEM + SEG
    pos = min(keys, CLAMP + 1) if arithmetic else keys
    per_layer = 4 * HD * M + 2 * I * M + HD * (2 * keys + pos)
    return 2.0 * (layers * per_layer + V * M)


def peaks(build, threads):
    """{'peak_fma': GFLOP/s, 'peak_vdpbf16ps': ...} on threads threads."""
    r = subprocess.run([os.path.join(build, "bench", "bench-kernels"),
                        "--no-gemv", "--no-gemm", "--ms", "300"],
                       capture_output=True, text=True, check=True)
    res = {}
    for line in r.stdout.splitlines():
        f = line.split()
        if len(f) == 7 and f[1].startswith("peak_") and \
                int(f[4]) == threads:
            res[f[1]] = max(res.get(f[1], 0.0), float(f[5]))
    return res


def score(build, model, prime, ids, threads, bf16):
    """(tokens/s of the scored part, CPU seconds of the whole run)."""
    txlgen = os.path.join(build, "cmd", "txlgen")
    argv = ["/usr/bin/time", "-f", "TIME %U %S", txlgen, "-m", model,
            "--ids", "--prime", prime, "--score", ids, "--stats",
            "-t", str(threads), "--seg-len", str(SEG), "--mem-len",
            str(MEM), "--clamp-len", str(CLAMP), "--same-length",
            "--mem-init", "zeros"]
    if bf16:
        argv += ["--compute", "bf16"]
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"{txlgen}: {r.stderr.strip()}")
    m = re.search(r"scored (\d+) tokens in ([\d.]+) s", r.stderr)
    fill = re.search(r"memory: (\d+)/(\d+) positions", r.stderr)
    if not m or not fill or fill.group(1) != fill.group(2):
        sys.exit(f"{txlgen}: no full memory or no --stats line:\n"
                 f"{r.stderr}")
    t = re.search(r"TIME ([\d.]+) ([\d.]+)", r.stderr)
    return int(m.group(1)) / float(m.group(2)), \
        float(t.group(1)) + float(t.group(2))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--base", help="another build to measure beside")
    ap.add_argument("--work", default="/tmp/txl-bench-published")
    ap.add_argument("--tokens", type=int, default=512,
                    help="ids scored after the memory is full")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--layers", type=int, default=24,
                    help="fewer for a quick look (the per-layer work is "
                    "the same)")
    a = ap.parse_args()

    os.makedirs(a.work, exist_ok=True)
    models = make_models(a.work, a.layers)
    V = n_token(os.path.join(a.build, "cmd", "txlgen"), models["F32"])
    # a text of a few more tokens than mem_len (numbers: about a piece a
    # character with the tests' vocabulary; the run checks the fill)
    prime = os.path.join(a.work, "prime.txt")
    ids = os.path.join(a.work, f"ids-{a.tokens}.txt")
    state = 12345
    words = []
    while sum(len(w) + 1 for w in words) < MEM * 11 // 10:
        state = (state * 1103515245 + 12345) % 2 ** 31
        words.append(str(state % 1000))
    with open(prime, "w") as f:
        f.write(" ".join(words) + "\n")
    with open(ids, "w") as f:
        f.write(" ".join(str((i * 7919 + 13) % V)
                         for i in range(a.tokens + 1)) + "\n")

    builds = [("this", a.build)] + ([("base", a.base)] if a.base else [])
    print(f"CPU: {cpu_name(True)}; {a.threads} threads; enwik8 shape, "
          f"{a.layers} layers; seg {SEG}, mem {MEM}, clamp {CLAMP}, "
          f"same_length, --mem-init zeros; {a.tokens} tokens scored after "
          f"the memory is full")
    print(f"load average before: {os.getloadavg()}", flush=True)
    pk = [peaks(a.build, a.threads)]
    best = {}
    for _ in range(a.reps):
        for label, b in builds:
            for dt in ("F32", "BF16"):
                tok_s, cpu = score(b, models[dt], prime, ids, a.threads,
                                   dt == "BF16")
                key = (label, dt)
                old = best.get(key, (0.0, 1e30))
                best[key] = (max(old[0], tok_s), min(old[1], cpu))
                print(f"  {label} {dt}: {tok_s:.1f} tokens/s (run: "
                      f"{cpu:.1f} CPU s)", flush=True)
    pk.append(peaks(a.build, a.threads))
    fma = max(p.get("peak_fma", 0.0) for p in pk)
    print(f"load average after: {os.getloadavg()}")
    print(f"F32 FMA peak on {a.threads} threads: "
          + " / ".join(f"{p.get('peak_fma', float('nan')):.0f}" for p in pk)
          + " GFLOP/s (before / after; the higher is used)"
          + "".join(f"; vdpbf16ps {p['peak_vdpbf16ps']:.0f}" for p in pk
                    if "peak_vdpbf16ps" in p))
    eff = flops_per_token(a.layers, V, False)
    ari = flops_per_token(a.layers, V, True)
    print(f"work a token: effective {eff / 1e9:.3f} GFLOP, arithmetic "
          f"{ari / 1e9:.3f} GFLOP")
    for (label, dt), (tok_s, cpu) in best.items():
        peak = fma * (2 if dt == "BF16" else 1)
        print(f"{label:5s} {dt:5s}{' --compute bf16' if dt == 'BF16' else ''}"
              f": {tok_s:7.1f} tokens/s; effective {tok_s * eff / 1e9:6.1f} "
              f"GFLOP/s = {100 * tok_s * eff / 1e9 / peak:4.1f}%, "
              f"arithmetic {tok_s * ari / 1e9:6.1f} GFLOP/s = "
              f"{100 * tok_s * ari / 1e9 / peak:4.1f}% of "
              f"{'twice ' if dt == 'BF16' else ''}the F32 peak")
    if a.base:
        for dt in ("F32", "BF16"):
            print(f"{dt}: this / base x{best['this', dt][0] / best['base', dt][0]:.3f}")


if __name__ == "__main__":
    main()
