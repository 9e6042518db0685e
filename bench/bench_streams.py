#!/usr/bin/python3
"""Many streams of one model at once: --n-samples and --score-docs.

  env -u OPENBLAS_CORETYPE bench/bench_streams.py \
      [--work DIR] [--wt103] [--baseline BUILD] [--threads N]

Measures, in one run and on the same weights (random ones, as bench.py
makes them):

  samples   generation tokens/s, every sample counted, of --n-samples N
            for N = 1, 2, 4, 8, 16 (one prompt, then -n tokens each,
            --ignore-eos), with F32 and Q8_0 weights of the 14.6M shape
            of bench.py (6 layers, d_model 384, 6 heads, d_inner 1536,
            8,000 tokens), and with --wt103 also Q8_0 weights of the
            WikiText-103 shape of bench_wt103.py (18 layers, d_model 1024,
            d_inner 4096, 267,735 words, adaptive softmax; about 1.1 GB
            of PyTorch weights to make once, kept in --work); the speed-up
            of N samples against one;
  documents --score-docs on --docs documents of 20 to 200 tokens (text of
            tests/data/text.txt), tokens/s with --streams 1 (one document
            at a time) and with --streams 8 and 16; every run's per-document
            bits per byte against the --streams 1 run's, and --check of
            them against `txlgen --score` of the document alone (the
            largest difference; the target is 1e-5).

  baseline  with --baseline BUILD (the build directory of another
            commit, e.g. main's), one sample and --streams 1 of each
            configuration also by that build's txlgen, alternated with
            this one's: the one-stream path side by side.

Every figure is the median of --reps runs (default 5), the
configurations alternated (A B A B ...) so that a change in the
machine's load touches each alike: a run of one sample lasts a tenth of
a second or less, and the best of a few such runs measured luck more
than the program (8 samples against one gave x3.6 to x4.5 in three runs
of the same build, best of 3 to 5).  The load average (uptime) is
printed before and after: run it on an idle machine.  The CPU and the
kernels libtxl chose are printed first.
"""

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
import types

import srctree  # noqa: F401 (models/ on sys.path)

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

import bench               # bench/bench.py, beside this script  # noqa: E402
from machine import cpu_name  # noqa: E402




def txlgen_stats(argv, pattern):
    """Run txlgen; the number matched by @pattern in its --stats."""
    r = subprocess.run(argv + ["--stats"], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"bench_streams: {' '.join(argv)}: {r.stderr}")
    m = re.search(pattern, r.stderr)
    if not m:
        sys.exit(f"bench_streams: no {pattern!r} in {r.stderr}")
    return float(m.group(1)), r.stdout


def median_of(reps, configs, run):
    """{config: median result} of reps rounds, the configs alternated."""
    got = {c: [] for c in configs}
    for _ in range(reps):
        for c in configs:
            got[c].append(run(c))
    return {c: statistics.median(v) for c, v in got.items()}


def bench_samples(txlgen, model, label, a, kv=None):
    ns = [1, 2, 4, 8, 16]
    configs = [(txlgen, n) for n in ns]

    def run(c):
        exe, n = c
        v, _ = txlgen_stats(
            [exe, "-m", model, "-p", "The state of the Union is",
             "--n-samples", str(n), "-n", str(a.gen_tokens),
             "--ignore-eos", "--seed", "1", "-t", str(a.threads)] +
            (["--kv-type", kv] if kv else []),
            r"generated: \d+ tokens? in [\d.]+ s \(([\d.]+) tokens/s\)")
        return v
    med = median_of(a.reps, configs, run)
    one = med[(txlgen, 1)]
    print(f"\n{label}: --n-samples N, -n {a.gen_tokens} each "
          "(tokens/s of all samples)")
    print(f"  {'N':>3} {'tokens/s':>10} {'x one':>7}")
    for n in ns:
        print(f"  {n:>3} {med[(txlgen, n)]:>10.1f} "
              f"{med[(txlgen, n)] / one:>7.2f}")
    return med


def make_docs(txlgen, model, path, n, seed=1):
    """n documents of 20 to 200 tokens by this model's tokenizer: runs of
    words of tests/data/text.txt, those of another length dropped."""
    words = open(os.path.join(ROOT, "tests", "data", "text.txt"),
                 encoding="utf-8").read().split()
    r = random.Random(seed)
    ids = subprocess.run([txlgen, "-m", model, "--tokenize", "-"],
                         input=" ".join(words), capture_output=True,
                         text=True, check=True).stdout.split()
    per_word = len(ids) / len(words)
    docs = []
    while len(docs) < n:
        cands = []
        for _ in range(2 * (n - len(docs))):
            k = max(1, round(r.randint(20, 200) / per_word))
            s = r.randrange(len(words) - k)
            cands.append(" ".join(words[s:s + k]))
        lines = subprocess.run([txlgen, "-m", model, "--tokenize", "-"],
                               input="".join(c + "\n" for c in cands),
                               capture_output=True, text=True,
                               check=True).stdout.splitlines()
        docs += [c for c, l in zip(cands, lines)
                 if 20 <= len(l.split()) <= 200][:n - len(docs)]
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(d + "\n" for d in docs))
    return docs


def bench_docs(txlgen, model, label, a, work):
    path = os.path.join(work, "docs.txt")
    docs = make_docs(txlgen, model, path, a.docs)
    configs = [(txlgen, k) for k in (1, 8, 16)]
    outs = {}

    def run(c):
        exe, k = c
        v, out = txlgen_stats(
            [exe, "-m", model, "--score-docs", path, "--streams", str(k),
             "-t", str(a.threads)],
            r"in [\d.]+ s \(([\d.]+) tokens/s\)")
        outs[c] = [json.loads(l) for l in out.splitlines()]
        return v
    med = median_of(a.doc_reps or a.reps, configs, run)
    one = outs[(txlgen, 1)]
    toks = [d["tokens"] for d in one]
    print(f"\n{label}: --score-docs, {len(docs)} documents of "
          f"{min(toks)} to {max(toks)} tokens (tokens/s)")
    print(f"  {'streams':>7} {'tokens/s':>10} {'x one':>7} "
          f"{'max |bpb - one|':>16}")
    for c in configs:
        diff = max(abs(x["bpb"] - y["bpb"]) for x, y in
                   zip(outs[c], one) if y["bpb"] is not None)
        print(f"  {c[1]:>7} {med[c]:>10.1f} "
              f"{med[c] / med[(txlgen, 1)]:>7.2f} {diff:>16.2e}")
    # against --score of each document alone
    worst = 0.0
    for i, (d, got) in enumerate(zip(docs[:a.check], outs[(txlgen, 8)])):
        one_doc = os.path.join(work, "one.txt")
        with open(one_doc, "w", encoding="utf-8") as f:
            f.write(d)
        r = subprocess.run([txlgen, "-m", model, "--score", one_doc,
                            "--json"], capture_output=True, text=True,
                           check=True)
        alone = json.loads(r.stdout.splitlines()[-1])
        worst = max(worst, abs(alone["bpb"] - got["bpb"]))
    print(f"  max |bpb - --score alone| over {min(a.check, len(docs))} "
          f"documents (--streams 8): {worst:.2e}")
    return med


def bench_baseline(txlgen, paths, a, work):
    """The one-stream path of this build and of --baseline's, alternated:
    generation (no --n-samples) and --score of the documents as one
    text."""
    docs = os.path.join(work, "docs.txt")
    cases = [("generation, F32", paths["F32"], []),
             ("generation, Q8_0 + Q8_0 memory", paths["Q8_0"],
              ["--kv-type", "Q8_0"]),
             ("--score, F32", paths["F32"], ["--score", docs])]
    print(f"\none stream, this build against --baseline "
          f"(tokens/s, median of {a.reps})")
    print(f"  {'':<32} {'this':>9} {'baseline':>9} {'ratio':>6}")
    for label, model, extra in cases:
        score = "--score" in extra

        def run(exe):
            argv = [exe, "-m", model, "-t", str(a.threads)] + extra
            if not score:
                argv += ["-p", "The state of the Union is", "-n",
                         str(a.gen_tokens), "--ignore-eos", "--seed", "1"]
                pat = (r"generated: \d+ tokens? in [\d.]+ s "
                       r"\(([\d.]+) tokens/s\)")
            else:
                pat = r"scored \d+ tokens? in [\d.]+ s \(([\d.]+) tokens/s"
            return txlgen_stats(argv, pat)[0]
        med = median_of(a.reps, [txlgen, a.baseline_txlgen], run)
        t, b = med[txlgen], med[a.baseline_txlgen]
        print(f"  {label:<32} {t:>9.1f} {b:>9.1f} {t / b:>6.2f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--work", help="keep the models here between runs")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--gen-tokens", type=int, default=64)
    ap.add_argument("--docs", type=int, default=2000)
    ap.add_argument("--doc-reps", type=int,
                    help="runs of --score-docs (default --reps)")
    ap.add_argument("--check", type=int, default=50,
                    help="documents checked against --score alone")
    ap.add_argument("--wt103", action="store_true",
                    help="also the WikiText-103 shape (Q8_0)")
    ap.add_argument("--baseline", metavar="BUILD",
                    help="another build directory (e.g. main's): its "
                    "one-stream figures side by side")
    a = ap.parse_args()
    txlgen = os.path.join(a.build, "cmd", "txlgen")
    a.baseline_txlgen = (os.path.join(a.baseline, "cmd", "txlgen")
                         if a.baseline else None)
    work = a.work or tempfile.mkdtemp(prefix="txl-bench-streams-")
    os.makedirs(work, exist_ok=True)

    shape = types.SimpleNamespace(n_token=8000, layers=6, heads=6,
                                  d_model=384, d_inner=1536, seg_len=128,
                                  mem_len=256)
    _, _, paths = bench.build_models(work, shape)
    commit = subprocess.run(["git", "-C", ROOT, "describe", "--always",
                             "--dirty"], capture_output=True,
                            text=True).stdout.strip()
    version = subprocess.run([txlgen, "--version"], capture_output=True,
                             text=True).stdout
    print(f"CPU: {cpu_name(cpus=True)}; commit "
          f"{commit}; {version.splitlines()[1]}; threads "
          f"{a.threads or os.cpu_count()}")
    if a.baseline:
        print("baseline: " + subprocess.run(
            [a.baseline_txlgen, "--version"], capture_output=True,
            text=True).stdout.splitlines()[0])
    print("load average before: %.2f %.2f %.2f" % os.getloadavg())
    t0 = time.time()
    bench_samples(txlgen, paths["F32"], "14.6M shape, F32 weights", a)
    bench_samples(txlgen, paths["Q8_0"],
                  "14.6M shape, Q8_0 weights, Q8_0 memory", a, "Q8_0")
    bench_samples(txlgen, paths["Q8_0"],
                  "14.6M shape, Q8_0 weights, F32 memory", a)
    bench_docs(txlgen, paths["F32"], "14.6M shape, F32 weights", a, work)
    if a.baseline:
        bench_baseline(txlgen, paths, a, work)
    if a.wt103:
        bench_samples(txlgen, wt103_model(work),
                      "WikiText-103 shape, Q8_0 weights, Q8_0 memory", a,
                      "Q8_0")
    print("\nload average after: %.2f %.2f %.2f (%.0f s)" %
          (*os.getloadavg(), time.time() - t0))


def wt103_model(work):
    """The WikiText-103 shape in Q8_0, made once with models/txl_ref.py
    (random weights, N(0, 0.02)) and models/convert.py."""
    path = os.path.join(work, "wt103-Q8_0.bin")
    if os.path.exists(path):
        return path
    import torch
    from txlgen import convert, txl_ref, vocab
    cfg = txl_ref.TxlConfig(n_token=267735, n_layer=18, n_head=16,
                            d_model=1024, d_head=64, d_inner=4096,
                            div_val=4, cutoffs=[20000, 40000, 200000],
                            tie_projs=[False, True, True, True],
                            tgt_len=128, mem_len=1600, clamp_len=1000,
                            same_length=True)
    # a word vocabulary, as bench_wt103.py's: <eos>, <unk>, w0, w1, ...
    words = os.path.join(work, "wt103-vocab.txt")
    with open(words, "w") as f:
        f.write("<eos>\n<unk>\n")
        f.writelines(f"w{i}\n" for i in range(cfg.n_token - 2))
    proto, meta = vocab.to_spm(vocab.read_vocab(words, "wt103"))
    torch.manual_seed(0)
    model = txl_ref.MemTransformerLM(cfg)
    model.init_weights(std=0.02)
    convert.convert(cfg, model.state_dict(), proto, path, "Q8_0",
                    extra=meta)
    return path


if __name__ == "__main__":
    main()
