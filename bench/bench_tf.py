#!/usr/bin/python3
"""The paper's four TensorFlow checkpoints, in their shapes with random
weights: what converting and scoring them costs.

  bench/bench_tf.py [--shapes enwik8,wt103,lm1b]
      [--dir DIR] [--keep] [--tokens 256] [--threads 2] [--dtype F32]

For each shape (tf/sota/*.sh: enwik8 and text8 24 layers, d_model 1024,
8 heads of 128, d_inner 3072, 204 / 27 symbols; wt103 18 layers, d_model
1024, 16 heads of 64, d_inner 4096, 267,735 words, cutoffs
20000/40000/200000, div_val 4, projections tied but the first; lm1b 24
layers, d_model 1280, 16 heads of 80, d_inner 8192, 793,471 words,
cutoffs 60000/100000/640000, div_val 4, proj_same_dim off, nothing tied)
it writes a TF checkpoint directory as download.sh lays it out
(txlgen/tfwrite.py; every weight N(0, 0.02), LayerNorm gains 1) with a
Python 2 cache.pkl of a vocabulary of that size, and measures:

  - convert.py --weights DIR: wall time and peak resident memory;
  - txlgen --score --ids with the model's recommended settings (the
    data set's evaluation: enwik8 mem_len 3800, wt103 1600, lm1b 128):
    the memory first filled with mem_len ids (--prime), then --tokens
    ids scored; tokens/s as txlgen --stats gives it for the scored part,
    and the peak resident memory of the run.

text8 has enwik8's shape but for its 27 symbols: its figures are
enwik8's.  Prints one JSON line per shape.  Needs the disk and memory of
the checkpoint twice (lm1b: about 7 GB of disk and 5 GB of memory).
"""

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

import srctree  # noqa: F401 (models/ on sys.path)
from txlgen import tfwrite

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONVERT = os.path.join(ROOT, "models", "convert.py")

SHAPES = {
    "enwik8": dict(n_layer=24, d_model=1024, n_head=8, d_head=128,
                   d_inner=3072, n_token=204, cutoffs=[], div_val=1,
                   untie_r=False, tie_projs=None, proj_same_dim=True),
    "wt103": dict(n_layer=18, d_model=1024, n_head=16, d_head=64,
                  d_inner=4096, n_token=267735,
                  cutoffs=[20000, 40000, 200000], div_val=4, untie_r=True,
                  tie_projs=[False, True, True, True], proj_same_dim=True),
    "lm1b": dict(n_layer=24, d_model=1280, n_head=16, d_head=80,
                 d_inner=8192, n_token=793471,
                 cutoffs=[60000, 100000, 640000], div_val=4, untie_r=True,
                 tie_projs=[False] * 4, proj_same_dim=False),
}


def shapes_of(s):
    """TF name -> shape of the checkpoint of shape s (tf/model.py)."""
    T = "transformer/"
    M, H, D, L = s["d_model"], s["n_head"], s["d_head"], s["n_layer"]
    bias = (L, H, D) if s["untie_r"] else (H, D)
    out = {T + "r_w_bias": bias, T + "r_r_bias": bias}
    E, S = T + "adaptive_embed/", T + "adaptive_softmax/"
    if not s["cutoffs"]:
        out[E + "lookup_table"] = (s["n_token"], M)
        out[S + "bias"] = (s["n_token"],)
    else:
        ends = [0] + s["cutoffs"] + [s["n_token"]]
        for i in range(len(ends) - 1):
            d = M // s["div_val"] ** i
            out[E + f"cutoff_{i}/lookup_table"] = (ends[i + 1] - ends[i], d)
            out[S + f"cutoff_{i}/b"] = (ends[i + 1] - ends[i],)
            if d != M or s["proj_same_dim"]:
                out[E + f"cutoff_{i}/proj_W"] = (d, M)
                if not s["tie_projs"][i]:
                    out[S + f"cutoff_{i}/proj"] = (d, M)
        out[S + "cutoff_0/cluster_W"] = (len(s["cutoffs"]), M)
        out[S + "cutoff_0/cluster_b"] = (len(s["cutoffs"]),)
    for i in range(L):
        P = f"{T}layer_{i}/"
        out.update({P + "rel_attn/qkv/kernel": (M, 3 * H * D),
                    P + "rel_attn/r/kernel": (M, H * D),
                    P + "rel_attn/o/kernel": (H * D, M),
                    P + "rel_attn/LayerNorm/gamma": (M,),
                    P + "rel_attn/LayerNorm/beta": (M,),
                    P + "ff/layer_1/kernel": (M, s["d_inner"]),
                    P + "ff/layer_1/bias": (s["d_inner"],),
                    P + "ff/layer_2/kernel": (s["d_inner"], M),
                    P + "ff/layer_2/bias": (M,),
                    P + "ff/LayerNorm/gamma": (M,),
                    P + "ff/LayerNorm/beta": (M,)})
    return out


def symbols(name):
    """The vocabulary (symbols, specials) of shape name: byte values,
    or words w0, w1, ... around the data set's special symbols."""
    n = SHAPES[name]["n_token"]
    if name == "enwik8":
        return [str(i) for i in range(n)], []
    if name == "wt103":
        return ["<eos>"] + [f"w{i}" for i in range(n - 1)], ["<eos>"]
    return ["<S>", "<UNK>"] + [f"w{i}" for i in range(n - 2)], []


def make(name, d):
    s = SHAPES[name]
    rng = np.random.default_rng(0)

    def maker(k, shape):
        def f():
            if k.endswith("gamma"):
                return np.ones(shape, np.float32)
            a = rng.standard_normal(shape, dtype=np.float32)
            a *= 0.02
            return a
        return f
    shapes = shapes_of(s)
    tensors = {k: maker(k, v) for k, v in shapes.items()}
    n = s["n_token"]
    syms, special = symbols(name)
    vocab = tfwrite.tf_vocab(syms, special=special,
                             lower_case=name == "enwik8")
    corpus = tfwrite.tf_corpus(name, vocab, {
        "train": np.arange(10000, dtype=np.int64) % n,
        "valid": np.zeros(10, np.int64), "test": np.zeros(10, np.int64)},
        [0] + s["cutoffs"] + [n] if s["cutoffs"] else [])
    info = {"vocab_size": n, "dataset": name,
            "cutoffs": [0] + s["cutoffs"] + [n] if s["cutoffs"] else []}
    t = time.time()
    tfwrite.write_tf_dir(d, tensors, tfwrite.py2_pickle(corpus), info)
    params = sum(int(np.prod(v)) for v in shapes.values())
    return params, time.time() - t


def run_measured(argv):
    """(CompletedProcess, wall s, peak RSS of the child in MB)."""
    code = ("import resource, subprocess, sys, time\n"
            "t = time.time(); r = subprocess.run(sys.argv[1:], "
            "capture_output=True, text=True)\n"
            "sys.stdout.write(r.stdout); sys.stderr.write(r.stderr)\n"
            "print('MEASURED', time.time() - t, resource.getrusage("
            "resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\n"
            "sys.exit(r.returncode)\n")
    r = subprocess.run([sys.executable, "-c", code] + argv,
                       capture_output=True, text=True)
    line = [x for x in r.stderr.splitlines() if x.startswith("MEASURED")][-1]
    _, wall, rss = line.split()
    return r, float(wall), int(rss) / 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default="enwik8,wt103,lm1b")
    ap.add_argument("--dir")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dtype", default="F32")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    a = ap.parse_args()
    txlgen = os.path.join(a.build, "cmd", "txlgen")
    root = a.dir or tempfile.mkdtemp(prefix="txl-bench-tf-")
    for name in a.shapes.split(","):
        d = os.path.join(root, f"tf_{name}")
        mbin = os.path.join(root, f"{name}.bin")
        res = {"shape": name}
        if not os.path.exists(mbin):
            res["params"], res["write_s"] = make(name, d)
            r, wall, rss = run_measured([sys.executable, CONVERT,
                                         "--weights", d, "-o", mbin,
                                         "--dtype", a.dtype])
            if r.returncode:
                sys.exit(r.stderr)
            res.update(convert_s=round(wall, 1), convert_rss_mb=round(rss))
            if not a.keep:
                shutil.rmtree(d)
        res["file_mb"] = round(os.path.getsize(mbin) / 1e6)
        info = json.loads(subprocess.run(
            [txlgen, "-m", mbin, "--info", "--json"], capture_output=True,
            text=True).stdout)
        n = info["vocabulary"]["tokens"]
        mem = info["session"]["mem_len"]
        rng = np.random.default_rng(1)
        prime = os.path.join(root, "prime.txt")
        ids = os.path.join(root, "ids.txt")
        # the memory's worth of text (a symbol a position)
        syms = symbols(name)[0]
        with open(prime, "w") as f:
            if name == "enwik8":
                f.write("".join(chr(33 + k % 90) for k in
                                rng.integers(0, 90, mem)))
            else:
                f.write(" ".join(syms[k] for k in
                                 rng.integers(2, n, mem)) + "\n")
        with open(ids, "w") as f:
            f.write(" ".join(map(str, rng.integers(0, n, a.tokens + 1))) +
                    "\n")
        r, wall, rss = run_measured([txlgen, "-m", mbin, "--ids", "--prime",
                                     prime, "--score", ids, "--stats", "-t",
                                     str(a.threads)])
        if r.returncode:
            sys.exit(r.stderr)
        stat = [x for x in r.stderr.splitlines() if "tokens/s" in x][-1]
        res.update(settings={k: info["session"][k] for k in
                             ("seg_len", "mem_len", "clamp_len",
                              "same_length")},
                   score_tokens=a.tokens, stats=stat.split(": ", 1)[1],
                   score_rss_mb=round(rss), score_wall_s=round(wall, 1))
        print(json.dumps(res), flush=True)
    if not a.dir and not a.keep:
        shutil.rmtree(root)


if __name__ == "__main__":
    main()
