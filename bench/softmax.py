#!/usr/bin/python3
"""The output layer of a WikiText-103 model: adaptive softmax against the
full softmax, with libtxl (bench-softmax).

  bench/softmax.py [--bench build/bench/bench-softmax]
                   [--dir DIR]
                   [--rows 64] [--reps 5] [--threads T] [--keep]

Builds two models with random weights and the output shape of the
original code's WikiText-103 model (267,735 tokens, d_model 1024; a tiny
Transformer body of one layer, so that the output layer dominates):

  adaptive: cutoffs 20000/40000/200000, div_val 4, d_embed 1024,
            tie_weight, tie_projs [false, true, true, true] (as wt103)
  full:     one softmax over the 267,735 tokens, [267735, 1024], tied

(about 150 MB and 1.1 GB of F32 in DIR, a temporary directory by default,
removed afterwards unless --keep), then runs bench-softmax on each and
prints its figures side by side: milliseconds per token to score a target
(adaptive: txl_session_score, the head and the target's cluster only), to
compute the full distribution (txl_session_logits), and per sampled token
greedy and at temperature 0.8 (adaptive: cluster by cluster).  Targets
follow a Zipf law over the ids (their cluster shares are printed).

Timings are the best of --reps runs; run on an idle machine, with
OPENBLAS_CORETYPE unset.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

import srctree  # noqa: F401 (models/ on sys.path)
from txlgen import txlfile, vocab
from txlgen.conventions import REL_PARTIAL

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

N_TOKEN = 267735
D_MODEL = 1024
CUTOFFS = [20000, 40000, 200000]
BODY = dict(n_layer=1, n_head=2, d_head=16, d_inner=64, tgt_len=64,
            mem_len=64, clamp_len=-1, same_length=False, pre_lnorm=False,
            attn_type=REL_PARTIAL, ext_len=0, untie_r=False)


def tokenizer():
    """A word-level SentencePiece model of N_TOKEN pieces (wt103's
    conventions: <eos> ends lines, <unk>)."""
    syms = ["<eos>", "<unk>"] + [f"w{i}" for i in range(N_TOKEN - 2)]
    v = vocab.Vocabulary(syms, False, None, "wt103", 1, "bench")
    proto, meta = vocab.to_spm(v)
    return proto, meta


def body(rng):
    """The tensors of a one-layer Transformer-XL body."""
    L, H, D, M, I = (BODY["n_layer"], BODY["n_head"], BODY["d_head"],
                     D_MODEL, BODY["d_inner"])
    HD = H * D

    def w(*shape, fan_in=None):
        fan_in = fan_in or shape[-1]
        return (rng.standard_normal(shape, dtype=np.float32) /
                np.float32(np.sqrt(fan_in)))

    t = {"r_w_bias": w(H, D, fan_in=1), "r_r_bias": w(H, D, fan_in=1)}
    for i in range(L):
        p = f"layers.{i}."
        t[p + "dec_attn.qkv_net.weight"] = w(3 * HD, M)
        t[p + "dec_attn.r_net.weight"] = w(HD, M)
        t[p + "dec_attn.o_net.weight"] = w(M, HD)
        t[p + "pos_ff.CoreNet.0.weight"] = w(I, M)
        t[p + "pos_ff.CoreNet.0.bias"] = w(I, fan_in=1)
        t[p + "pos_ff.CoreNet.3.weight"] = w(M, I)
        t[p + "pos_ff.CoreNet.3.bias"] = w(M, fan_in=1)
        for ln in ("dec_attn.layer_norm", "pos_ff.layer_norm"):
            t[p + ln + ".weight"] = np.ones(M, np.float32)
            t[p + ln + ".bias"] = np.zeros(M, np.float32)
    return t, w


def write_adaptive(path, proto, meta, rng):
    t, w = body(rng)
    ends = [0] + CUTOFFS + [N_TOKEN]
    for i in range(len(ends) - 1):
        d = D_MODEL // 4 ** i
        size = ends[i + 1] - ends[i]
        t[f"word_emb.emb_layers.{i}.weight"] = w(size, d, fan_in=D_MODEL)
        t[f"word_emb.emb_projs.{i}"] = w(D_MODEL, d)
        t[f"crit.out_layers.{i}.bias"] = w(size, fan_in=1)
    t["crit.out_projs.0"] = w(D_MODEL, D_MODEL)
    t["crit.cluster_weight"] = w(len(CUTOFFS), D_MODEL)
    t["crit.cluster_bias"] = w(len(CUTOFFS), fan_in=1)
    hp = dict(BODY, n_token=N_TOKEN, d_model=D_MODEL, d_embed=D_MODEL,
              div_val=4, cutoffs=CUTOFFS, tie_weight=True,
              tie_projs=[False, True, True, True])
    txlfile.write(path, hp, t, proto, extra=meta)


def write_full(path, proto, meta, rng):
    t, w = body(rng)
    t["word_emb.emb_layers.0.weight"] = w(N_TOKEN, D_MODEL)
    t["crit.out_layers.0.bias"] = w(N_TOKEN, fan_in=1)
    hp = dict(BODY, n_token=N_TOKEN, d_model=D_MODEL, d_embed=D_MODEL,
              div_val=1, cutoffs=[], tie_weight=True, tie_projs=[False])
    txlfile.write(path, hp, t, proto, extra=meta)


def run(bench, model, a):
    argv = [bench, model, "--rows", str(a.rows), "--reps", str(a.reps)]
    if a.threads:
        argv += ["--threads", str(a.threads)]
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"softmax.py: {' '.join(argv)}: {r.stderr.strip()}")
    return dict(line.split(" ", 1) for line in r.stdout.splitlines())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench", default=os.path.join(ROOT, "build", "bench",
                                                    "bench-softmax"))
    ap.add_argument("--dir", help="where the models go (default: a "
                    "temporary directory)")
    ap.add_argument("--rows", type=int, default=64)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--keep", action="store_true",
                    help="keep the models (with --dir: reuse them)")
    a = ap.parse_args()

    d = a.dir or tempfile.mkdtemp(prefix="txl-softmax-")
    os.makedirs(d, exist_ok=True)
    paths = {"adaptive": os.path.join(d, "wt103-adaptive.bin"),
             "full": os.path.join(d, "wt103-full.bin")}
    try:
        if not all(os.path.exists(p) for p in paths.values()) or \
                not a.keep:
            proto, meta = tokenizer()
            rng = np.random.default_rng(0)
            write_adaptive(paths["adaptive"], proto, meta, rng)
            write_full(paths["full"], proto, meta, rng)
        res = {k: run(a.bench, p, a) for k, p in paths.items()}
    finally:
        if not a.keep:
            for p in paths.values():
                if os.path.exists(p):
                    os.unlink(p)
            if not a.dir:
                shutil.rmtree(d, ignore_errors=True)

    ad, fu = res["adaptive"], res["full"]
    print(f"output layer of a WikiText-103 model ({N_TOKEN} tokens, "
          f"d_model {D_MODEL}), {a.rows} rows per call, ms per token:")
    shares = " / ".join(f"{float(ad[f'targets_in_cluster_{c}']):.2f}"
                        for c in range(len(CUTOFFS) + 1))
    print(f"  targets by cluster (Zipf 1.0): {shares}")
    print(f"  {'':34} {'adaptive':>10} {'full softmax':>13}")
    for key, what in (("score_ms_per_token", "score a target"),
                      ("full_logits_ms_per_token",
                       "full distribution (logits)"),
                      ("greedy_ms", "greedy, txl_session_sample"),
                      ("greedy_full_ms", "greedy from the full logits"),
                      ("temp_0.8_ms", "temperature 0.8, session_sample"),
                      ("temp_0.8_full_ms", "temperature 0.8, full logits")):
        print(f"  {what:34} {float(ad[key]):10.3f} {float(fu[key]):13.3f}")
    print(f"  {'(the body: eval per token)':34} "
          f"{float(ad['eval_ms_per_token']):10.3f} "
          f"{float(fu['eval_ms_per_token']):13.3f}")


if __name__ == "__main__":
    main()
