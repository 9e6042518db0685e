#!/usr/bin/python3
"""Benchmark txlgen's library against PyTorch on one Transformer-XL model.

  bench/bench.py [--orig DIR] [--build build] [--layers 6 --d-model 384 ...]

Builds a random model of the requested shape (default: about 15M
parameters, 6 layers, d_model 384, 6 heads, d_inner 1536, 8000 tokens),
converts it with models/convert.py, then measures on the same weights, in
the same run:
  scoring    tokens/s, segments of --seg-len (128) with memory --mem-len
             (256), the original eval.py protocol;
  generation tokens/s, one token at a time with memory --mem-len (256),
             greedy, logits of every step;
for libtxl (build/bench/bench-txl) and for PyTorch: the original code's
MemTransformerLM if --orig names its pytorch/ folder (a checkout of
kimiyoung/transformer-xl), else models/txl_ref.py, which computes the same
thing the same way (both recompute the keys and values of the whole memory
at every call).  --long N adds a txlgen run of N generated tokens with
tokens/s per window, to show that the cost per token stays flat.

The environment is passed through unchanged: on machines where
OPENBLAS_CORETYPE forces slower kernels, run `env -u OPENBLAS_CORETYPE
bench/bench.py` for both sides.  OMP_WAIT_POLICY=PASSIVE is set for PyTorch
unless already set (its spinning threads otherwise fight OpenBLAS's).
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "models"))

import torch                                     # noqa: E402
import torch.nn.functional as F                  # noqa: E402
import txl_ref                                   # noqa: E402

torch.set_num_threads(os.cpu_count() or 1)


def make_tokenizer(path_prefix, n_token):
    """A SentencePiece model of exactly n_token pieces: a small one trained
    on the test text, padded with user-defined symbols."""
    text = os.path.join(ROOT, "tests", "data", "text.txt")
    base = 320
    extra = ",".join(f"<x{i}>" for i in range(n_token - base))
    cmd = ["spm_train", f"--input={text}", f"--model_prefix={path_prefix}",
           f"--vocab_size={n_token}", "--model_type=unigram",
           "--byte_fallback=true", "--character_coverage=0.98",
           "--hard_vocab_limit=false"]
    if extra:
        cmd.append(f"--user_defined_symbols={extra}")
    subprocess.run(cmd, check=True, capture_output=True)
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=path_prefix + ".model")
    return sp.get_piece_size()


def build_model(work, a):
    n_token = make_tokenizer(os.path.join(work, "tok"), a.n_token)
    cfg = txl_ref.TxlConfig(n_token=n_token, n_layer=a.layers,
                            n_head=a.heads, d_model=a.d_model,
                            d_head=a.d_model // a.heads, d_inner=a.d_inner,
                            tgt_len=a.seg_len, mem_len=a.mem_len)
    torch.manual_seed(0)
    model = txl_ref.MemTransformerLM(cfg)
    model.init_weights(std=0.02)
    state = os.path.join(work, "state.pt")
    torch.save(model.state_dict(), state)
    import json
    with open(os.path.join(work, "cfg.json"), "w") as f:
        json.dump(cfg.hparams(), f)
    out = os.path.join(work, "bench.bin")
    subprocess.run([sys.executable, os.path.join(ROOT, "models", "convert.py"),
                    "--config", os.path.join(work, "cfg.json"),
                    "--weights", state, "--tokenizer",
                    os.path.join(work, "tok.model"), "-o", out], check=True)
    return cfg, state, out


def pseudo_random_ids(n, V):
    """The same stream bench-txl.c scores (xorshift64)."""
    x, m, ids = 88172645463325252, (1 << 64) - 1, []
    for _ in range(n):
        x ^= (x << 13) & m
        x ^= x >> 7
        x ^= (x << 17) & m
        ids.append(x % V)
    return ids


def torch_model(cfg, state, orig):
    if orig:
        sys.path.insert(0, orig)
        sys.path.insert(0, os.path.join(orig, "utils"))
        # The original reads torch.version.cuda at import; CPU builds lack it.
        if torch.version.cuda is None:
            torch.version.cuda = "11.0"
        from mem_transformer import MemTransformerLM
        m = MemTransformerLM(cfg.n_token, cfg.n_layer, cfg.n_head,
                             cfg.d_model, cfg.d_head, cfg.d_inner, 0.0, 0.0,
                             tie_weight=True, d_embed=cfg.d_model,
                             div_val=1, tie_projs=[False], pre_lnorm=False,
                             tgt_len=cfg.tgt_len, ext_len=0,
                             mem_len=cfg.mem_len, cutoffs=[],
                             same_length=False, attn_type=0, clamp_len=-1)
        m.load_state_dict(torch.load(state))
        m.eval()

        def step(x, mems):
            hidden, new = m._forward(x, mems=mems)
            crit = m.crit
            logits = crit._compute_logit(hidden, crit.out_layers[0].weight,
                                         crit.out_layers[0].bias,
                                         crit.out_projs[0])
            return logits, new
        init = m.init_mems
        name = "original (kimiyoung/transformer-xl)"
    else:
        m = txl_ref.MemTransformerLM(cfg)
        m.load_state_dict(torch.load(state))
        m.eval()

        def step(x, mems):
            hidden, new = m.forward(x, mems)
            return m.logits(hidden), new

        def init():
            return None
        name = "models/txl_ref.py"
    return step, init, name


@torch.no_grad()
def bench_torch(step, init, ids, seg, n_gen):
    x = torch.tensor(ids)
    mems = init()
    t0 = time.perf_counter()
    nll = 0.0
    for s in range(0, len(ids) - 1, seg):
        inp = x[s:s + seg]
        tgt = x[s + 1:s + 1 + seg]
        inp = inp[:len(tgt)]
        logits, mems = step(inp[:, None], mems)
        lp = F.log_softmax(logits.float(), -1)[:, 0]
        nll -= lp.gather(1, tgt[:, None]).sum().item()
    score_s = time.perf_counter() - t0

    mems = init()
    tok = torch.tensor([[1]])
    t0 = time.perf_counter()
    for _ in range(n_gen):
        logits, mems = step(tok, mems)
        tok = logits[-1, 0].argmax().view(1, 1)
    gen_s = time.perf_counter() - t0
    return {"score_tok_per_s": (len(ids) - 1) / score_s,
            "gen_tok_per_s": n_gen / gen_s,
            "score_mean_nll": nll / (len(ids) - 1)}


def run_txl(exe, model, a, n_gen, window=0):
    cmd = [exe, model, "--score", str(a.score_tokens), "--gen", str(n_gen),
           "--seg-len", str(a.seg_len), "--mem-len", str(a.mem_len)]
    if window:
        cmd += ["--window", str(window)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    res, windows = {}, []
    for line in out.stdout.splitlines():
        k, *v = line.split()
        if k == "gen_window":
            windows.append((int(v[0]), float(v[1])))
        else:
            res[k] = float(v[0])
    return res, windows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--orig", help="the original code's pytorch/ folder")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--d-model", type=int, default=384)
    ap.add_argument("--heads", type=int, default=6)
    ap.add_argument("--d-inner", type=int, default=1536)
    ap.add_argument("--n-token", type=int, default=8000)
    ap.add_argument("--seg-len", type=int, default=128)
    ap.add_argument("--mem-len", type=int, default=256)
    ap.add_argument("--score-tokens", type=int, default=4097)
    ap.add_argument("--gen-tokens", type=int, default=1000)
    ap.add_argument("--torch-gen-tokens", type=int, default=200)
    ap.add_argument("--long", type=int, default=0,
                    help="also generate this many tokens with txlgen and "
                         "print tokens/s per window")
    a = ap.parse_args()

    exe = os.path.join(a.build, "bench", "bench-txl")
    if not os.path.exists(exe):
        sys.exit(f"bench.py: {exe}: not built (meson setup build && "
                 "ninja -C build)")
    print(f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}"
          f" OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}"
          f" torch threads={torch.get_num_threads()} cpus={os.cpu_count()}")
    with tempfile.TemporaryDirectory(prefix="txl-bench-") as work:
        cfg, state, model = build_model(work, a)
        n_params = sum(p.numel() for p in
                       txl_ref.MemTransformerLM(cfg).parameters())
        print(f"model: {cfg.n_layer} layers, d_model {cfg.d_model}, "
              f"{cfg.n_head} heads, d_inner {cfg.d_inner}, {cfg.n_token} "
              f"tokens, {n_params / 1e6:.1f}M parameters; seg_len "
              f"{a.seg_len}, mem_len {a.mem_len}")
        txl, _ = run_txl(exe, model, a, a.gen_tokens)
        step, init, name = torch_model(cfg, state, a.orig)
        ids = pseudo_random_ids(a.score_tokens, cfg.n_token)
        pt = bench_torch(step, init, ids, a.seg_len, a.torch_gen_tokens)
        print(f"{'':34} {'score tok/s':>12} {'gen tok/s':>10} "
              f"{'mean NLL':>9}")
        print(f"{'txlgen (libtxl)':34} {txl['score_tok_per_s']:12.0f} "
              f"{txl['gen_tok_per_s']:10.1f} {txl['score_mean_nll']:9.4f}")
        print(f"{'PyTorch: ' + name:34} {pt['score_tok_per_s']:12.0f} "
              f"{pt['gen_tok_per_s']:10.1f} {pt['score_mean_nll']:9.4f}")
        print(f"speed-up: scoring x{txl['score_tok_per_s'] / pt['score_tok_per_s']:.2f}"
              f", generation x{txl['gen_tok_per_s'] / pt['gen_tok_per_s']:.1f}")
        if a.long:
            window = max(a.long // 10, 1)
            _, windows = run_txl(exe, model, argparse.Namespace(
                score_tokens=0, seg_len=a.seg_len, mem_len=a.mem_len),
                a.long, window)
            print(f"txlgen generating {a.long} tokens, tokens/s per "
                  f"{window}-token window:")
            print("  " + "  ".join(f"{n}:{r:.0f}" for n, r in windows))


if __name__ == "__main__":
    main()
