#!/usr/bin/python3
"""What the adaptive spans buy: generation on the published small shape.

  env -u OPENBLAS_CORETYPE bench/bench_span.py \\
      [--orig PATH/TO/adaptive-span] [--threads N] [--work DIR] [--prime N]

Builds two checkpoints of the published enwik8 model's shape (12 layers,
d_model 512, 8 heads, d_inner 2048, attn_span 8192, ramp 32, 205
symbols), saved as the adaptive-span trainer saves them and converted
with convert.py --vocab-corpus (F32 weights), on the same random weights
but for the spans:

  paper   spans like the paper's (its figure of the enwik8 model): the
          heads of the lower layers under a hundred positions, most of
          the upper ones a few hundred, a few long, one the whole 8,192;
  full    every head's span the whole 8,192 (current_val 1).

and measures in one run, generating one token at a time from a full
memory (the zero states the evaluation starts from fill every span;
libtxl reads no K or V of a zero state, so that the K and V of the
bytes below are what a memory of real positions costs: --prime 8192
feeds that many tokens first, to measure it, at about a minute a rep
with every span 8,192 on two cores):

  machine   the CPU, libtxl's kernels, the memory's read bandwidth
            (bench-txl --dram) and the load average;
  bytes     what a token reads: every weight matrix (the output layer
            included) and each head's V over its span and K over its
            layer's window (the softmax's keys), in F32, and
            the floor those bytes set at the measured bandwidth (the
            shared position table, read from the caches, besides);
  txlgen    generation tokens/s of both (bench-txl, the best of --reps);
  original  the adaptive-span code's TransformerSeq on the same weights
            (--orig: a checkout of facebookresearch/adaptive-span; its
            forward token by token from a zero cache of each layer's
            get_cache_size(), as its evaluation holds it), else
            txlgen.span_ref.

The issue's targets (F32 weights and memory): paper >= 2.5x full, paper
within 80% of its floor, paper >= 20x the original.  PyTorch runs with
OMP_WAIT_POLICY=PASSIVE and as many threads as libtxl.
"""

import argparse
import datetime
import gc
import json
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch                                     # noqa: E402

import srctree  # noqa: F401,E402 (models/ on sys.path)
from txlgen import random_model as mrm, span_model, span_ref  # noqa: E402
from txlgen.original import SpanOriginal  # noqa: E402

from bench import bench_txl                     # noqa: E402 (bench/)
from machine import cpu_name                    # noqa: E402 (bench/)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

S, RAMP = 8192, 32


def paper_spans():
    """current_val per layer and head (z = current_val * 8192 positions
    before the ramp): layers 0-5 5 to 100, 6-9 20 to 400, 10 up to
    2,000, 11 up to the whole span."""
    z = [[5, 10, 15, 20, 30, 40, 60, 100]] * 6 + \
        [[20, 40, 60, 100, 150, 200, 300, 400]] * 4 + \
        [[50, 100, 200, 300, 500, 800, 1200, 2000],
         [100, 200, 300, 400, 600, 1500, 3000, S]]
    return [[v / S for v in row] for row in z]


def corpus(work):
    """An enwik8-layout train.txt of 204 byte values and newlines: 205
    symbols, as the real enwik8's."""
    path = os.path.join(work, "train.txt")
    data = bytes(b for b in range(256) if b != 10)[:204] + b"\n"
    with open(path, "w") as f:
        f.write(span_model.prepare_enwik8(data * 3))
    return path


def build(work, train, name, spans):
    ckpt = os.path.join(work, f"{name}.pt")
    out = os.path.join(work, f"{name}.bin")
    if not os.path.exists(out):
        n_token = len(span_model.vocab.corpus_symbols(train))
        span_model.make_checkpoint(ckpt, n_token, spans, attn_span=S,
                                   span_ramp=RAMP, d_model=512, d_inner=2048,
                                   block_size=512, seed=1)
        subprocess.run([mrm.PYTHON, mrm.CONVERT, "--weights", ckpt,
                        "--vocab-corpus", train, "--dataset", "enwik8",
                        "-o", out], check=True)
    return ckpt, out


def info(txlgen, path):
    return json.loads(subprocess.run([txlgen, "--model", path, "--info",
                                      "--json"], check=True,
                                     capture_output=True, text=True).stdout)


def bytes_per_token(inf):
    """(weights, K and V) bytes a token reads, F32: the matrices and
    vectors of every layer and the output layer, each head's span of V
    and its layer's window of K (none for a head of span 0)."""
    a = inf["architecture"]
    L, M, I = a["n_layer"], a["d_model"], a["d_inner"]
    V = inf["vocabulary"]["tokens"]
    mats = L * (4 * M * M + 2 * M * I) + V * M
    vecs = L * (4 * M + I + M) + V + M
    att = inf["attention"]
    # (a txlgen before the windows: K over the spans too)
    windows = att.get("windows") or [None] * len(att["spans"])
    rows = sum(n + (n if w is None else w if n else 0)
               for row, w in zip(att["spans"], windows) for n in row)
    kv = rows * a["d_head"] * 4
    return 4 * (mats + vecs), kv


def torch_generate(model, n, warm=1):
    """tokens/s of n greedy tokens from a full (zero) cache."""
    m = model.module if hasattr(model, "module") else model
    if hasattr(m, "zero_cache"):                   # span_ref
        cache = m.zero_cache()

        def step(x, c):
            lp, c = m(x[0], c)
            return lp[None], c
    else:
        cache = [torch.zeros(1, layer.attn.attn.get_cache_size(),
                             m.in_emb.weight.size(1)) for layer in m.layers]

        def step(x, c):
            lp, c, _ = model(x, c)
            return lp, c
    tok = torch.tensor([[1]])
    with torch.no_grad():
        for _ in range(warm):
            lp, cache = step(tok, cache)
        t0 = time.perf_counter()
        for _ in range(n):
            lp, cache = step(tok, cache)
            tok = lp[0, -1].argmax().view(1, 1)
    return n / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--orig", help="a checkout of facebookresearch/"
                    "adaptive-span (else txlgen.span_ref)")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--work", help="keep the models here between runs")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--gen-tokens", type=int, default=64)
    ap.add_argument("--prime", type=int, default=0,
                    help="tokens fed before generating (default 0: from "
                    "the zero states)")
    ap.add_argument("--torch-tokens", type=int, default=8)
    a = ap.parse_args()
    exe = os.path.join(a.build, "bench", "bench-txl")
    txlgen = os.path.join(a.build, "cmd", "txlgen")
    threads = a.threads or len(os.sched_getaffinity(0))
    torch.set_num_threads(threads)
    work = a.work or tempfile.mkdtemp(prefix="txl-bench-span-")
    os.makedirs(work, exist_ok=True)
    train = corpus(work)
    variants = {"paper": paper_spans(), "full": [[1.0] * 8] * 12}
    files = {k: build(work, train, k, v) for k, v in variants.items()}
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short",
                             "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    # the models' memory: every head its span (a session caps them at
    # mem_len; bench-txl's default is 256)
    common = ["--threads", threads, "--reps", a.reps, "--mem-len", S,
              "--seg-len", 512]

    dram = bench_txl(exe, files["paper"][1], "--score", 0, "--gen", 0,
                     "--dram", *common)
    bw = dram["dram_read_GBps"]
    print(f"{datetime.date.today()}, commit {commit}")
    print(f"CPU: {cpu_name()}, {threads} threads; libtxl kernels: "
          f"{dram.get('kernels', '?')}; load average "
          f"{open('/proc/loadavg').read().split()[0]}")
    print(f"memory read bandwidth: {bw:.1f} GB/s")
    print("model: 12 layers, d_model 512, 8 heads, d_inner 2048, "
          f"attn_span {S}, ramp {RAMP}, F32 weights and memory; "
          + (f"{a.prime} tokens primed" if a.prime else
             "from the zero states"))
    res = {}
    for k, (ckpt, path) in files.items():
        inf = info(txlgen, path)
        w, kv = bytes_per_token(inf)
        g = bench_txl(exe, path, "--score", 0, "--gen", a.gen_tokens,
                      "--prime", a.prime, *common)
        res[k] = dict(inf=inf, w=w, kv=kv, gen=g["gen_tok_per_s"],
                      floor=bw * 1e9 / (w + kv))
        spans = inf["attention"]["spans"]
        print(f"{k:>5}: spans mean {inf['attention']['span_mean']:.0f}, "
              f"longest {max(map(max, spans))}; a token reads "
              f"{w / 1e6:.1f} MB of weights + {kv / 1e6:.1f} MB of K, V = "
              f"{(w + kv) / 1e6:.1f} MB; floor {res[k]['floor']:.1f} "
              f"tokens/s; txlgen {res[k]['gen']:.1f} tokens/s "
              f"({100 * res[k]['gen'] / res[k]['floor']:.0f}% of the "
              "floor)")
    # the original, on the same weights
    orig = SpanOriginal(os.path.abspath(a.orig)) if a.orig else None
    for k, (ckpt, path) in files.items():
        cfg = res[k]["inf"]
        ck = torch.load(ckpt)
        state = ck["model"]
        from txlgen.hparams import SpanConfig
        ar = cfg["architecture"]
        sc = SpanConfig(n_token=cfg["vocabulary"]["tokens"],
                        n_layer=ar["n_layer"], n_head=ar["n_head"],
                        d_model=ar["d_model"], d_inner=ar["d_inner"],
                        attn_span=S, span_ramp=RAMP, block_size=512)
        if orig:
            model = orig.model(sc)
            model.load_state_dict(state)
            who = "original adaptive-span code"
        else:
            model = span_ref.AdaptiveSpanLM(sc)
            model.load_state_dict({n[len("module."):]: v
                                   for n, v in state.items()})
            who = "txlgen.span_ref"
        model.eval()
        del ck, state
        res[k]["torch"] = torch_generate(model, a.torch_tokens)
        del model
        gc.collect()
        print(f"{k:>5}: {who}: {res[k]['torch']:.2f} tokens/s "
              f"({a.torch_tokens} tokens)")
    p, f = res["paper"], res["full"]
    print(f"\npaper-like spans against full spans: x{p['gen'] / f['gen']:.2f}"
          f" (bytes x{(f['w'] + f['kv']) / (p['w'] + p['kv']):.2f})")
    print(f"paper-like spans against their floor: "
          f"{100 * p['gen'] / p['floor']:.0f}%")
    print(f"txlgen against the PyTorch code, paper-like spans: "
          f"x{p['gen'] / p['torch']:.0f}; full spans: "
          f"x{f['gen'] / f['torch']:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
