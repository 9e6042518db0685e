#!/usr/bin/python3
"""Benchmark txlgen's library against PyTorch on one Transformer-XL model.

  env -u OPENBLAS_CORETYPE bench/bench.py --orig DIR \\
      [--threads N]

Builds a random model of the requested shape (default: the 14.6M benchmark
shape: 6 layers, d_model 384, 6 heads, d_inner 1536, 8000 tokens),
converts it with convert.py's conversion to every storage type (F32, F16, BF16,
Q8_0, Q4_0), and measures in one run, on the same weights:

  machine    the CPU, the kernels libtxl chose, the read bandwidth of
             memory (bench-txl --dram) and the generation floor it sets:
             the tokens/s at which generation would read, for every token,
             every weight and the memory's K, V and R from DRAM once;
  PyTorch    the original code's MemTransformerLM if --orig names its
             pytorch/ folder (a checkout of kimiyoung/transformer-xl), else
             txlgen.txl_ref (computes the same way): scoring tokens/s
             (segments of --seg-len 128, memory --mem-len 256, eval.py's
             protocol) and generation tokens/s (one token at a time);
  formats    for each storage type: file size, scoring and generation
             tokens/s, and the bits per byte of the default model
             (models/sotu.bin re-stored in that type) on --bpb-text
             (models/data/test.txt, made by models/corpus.sh) if present,
             and in Q8_0 and Q4_0 with a Q8_0 and a Q4_0 memory;
  memory     generation tokens/s against the length of the memory (the
             memory filled first), for every storage type with the memory
             in F32, for F16 and Q8_0 weights with the memory in F16,
             BF16, Q8_0 and Q4_0 (--kv-type), and for Q4_0 weights with
             the memory in Q8_0 and Q4_0; the fastest pair against F32
             weights and memory at --mem-len and at --context;
  XL         the time to recompute a --context (3800) token window from
             scratch, as a model without memory must for every token,
             against the time of a token with that memory cached;
  compute    the scoring of the BF16 file with --compute bf16 (vdpbf16ps
             where the CPU has AVX512_BF16) beside --compute f32, in
             tokens/s and in GFLOP/s against the peak of the machine's
             multiply-adds (bench-kernels: a tight loop of independent
             FMAs, or of vdpbf16ps, on as many threads), the multiply-
             adds of a token counted as the original code computes them
             (every layer's products, attention over mem_len + seg_len
             keys, the output layer); and --prime's rate of reading a
             --prime-tokens (100,000) token stream without logits,
             against scoring's.  --formats-only stops after these.

Every libtxl figure is the best of --reps runs (a shared machine only ever
slows a run down), taken after PyTorch's model is freed and the machine
left 5 s; still, run it on an idle machine.  The environment is
passed through: on machines where OPENBLAS_CORETYPE forces slower kernels,
run `env -u OPENBLAS_CORETYPE bench/bench.py` for both sides.
OMP_WAIT_POLICY=PASSIVE is set for PyTorch unless already set (its
spinning threads otherwise fight OpenBLAS's).
"""

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch                                     # noqa: E402
import torch.nn.functional as F                  # noqa: E402

import srctree  # noqa: F401,E402 (models/ on sys.path)
from txlgen import convert, original, txl_ref, txlfile  # noqa: E402
from txlgen.conventions import REL_PARTIAL  # noqa: E402
from machine import cpu_name                     # noqa: E402 (bench/)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

FORMATS = txlfile.DTYPES


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


def build_models(work, a):
    """The random model, its state_dict and config, and one file per
    storage type; kept in --work between runs."""
    state = os.path.join(work, "state.pt")
    cfg_path = os.path.join(work, "cfg.json")
    tok = os.path.join(work, "tok.model")
    if not os.path.exists(cfg_path):
        n_token = make_tokenizer(os.path.join(work, "tok"), a.n_token)
        cfg = txl_ref.TxlConfig(n_token=n_token, n_layer=a.layers,
                                n_head=a.heads, d_model=a.d_model,
                                d_head=a.d_model // a.heads,
                                d_inner=a.d_inner, tgt_len=a.seg_len,
                                mem_len=a.mem_len)
        with open(cfg_path, "w") as f:
            json.dump(cfg.hparams(), f)
    with open(cfg_path) as f:
        cfg = txl_ref.TxlConfig.from_dict(json.load(f))
    if not os.path.exists(state):
        torch.manual_seed(0)
        model = txl_ref.MemTransformerLM(cfg)
        model.init_weights(std=0.02)
        torch.save(model.state_dict(), state)
    paths = {}
    for dt in FORMATS:
        paths[dt] = os.path.join(work, f"bench-{dt}.bin")
        if not os.path.exists(paths[dt]):
            # convert.py's conversion, in process
            with open(tok, "rb") as f:
                proto = f.read()
            convert.convert(cfg, torch.load(state), proto, paths[dt], dt)
    return cfg, state, paths


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
        MemTransformerLM = original.import_original(orig)
        m = MemTransformerLM(cfg.n_token, cfg.n_layer, cfg.n_head,
                             cfg.d_model, cfg.d_head, cfg.d_inner, 0.0, 0.0,
                             tie_weight=True, d_embed=cfg.d_model,
                             div_val=1, tie_projs=[False], pre_lnorm=False,
                             tgt_len=cfg.tgt_len, ext_len=0,
                             mem_len=cfg.mem_len, cutoffs=[],
                             same_length=False, attn_type=REL_PARTIAL,
                             clamp_len=-1)
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
        name = "models/txlgen/txl_ref.py"
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


def bench_txl(exe, model, *args):
    """Run bench-txl; return its "key value" lines as a dict (gen_window
    lines as a list of (tokens, tok/s))."""
    cmd = [exe, model] + [str(x) for x in args]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    res = {"gen_window": []}
    for line in out.stdout.splitlines():
        k, *v = line.split(maxsplit=1)
        if k == "gen_window":
            n, r = v[0].split()
            res[k].append((int(n), float(r)))
        elif k in ("kernels", "kv_type", "compute"):
            res[k] = v[0]
        else:
            res[k] = float(v[0])
    return res


def flops_per_token(cfg, mem, seg):
    """Multiply-adds of a scored token, times 2, as the original computes
    them: each layer's qkv, o, ff1 and ff2, its attention's q.k, q.R and
    p.v over mem + seg keys, and the output layer."""
    L, M, HD, I = cfg.n_layer, cfg.d_model, cfg.n_head * cfg.d_head, \
        cfg.d_inner
    per_layer = 4 * HD * M + 2 * I * M + 3 * HD * (mem + seg)
    return 2.0 * (L * per_layer + cfg.n_token * cfg.d_embed)


def peaks(build, threads):
    """bench-kernels' peak lines: {(kernel, threads): GFLOP/s}"""
    exe = os.path.join(build, "bench", "bench-kernels")
    out = subprocess.run([exe, "--no-gemv", "--no-gemm", "--ms", "300"],
                         check=True, capture_output=True, text=True)
    res = {}
    for line in out.stdout.splitlines():
        f = line.split()
        if len(f) == 7 and f[1].startswith("peak_"):
            res[f[1], int(f[4])] = float(f[5])
    return {k[0]: v for k, v in res.items() if k[1] == min(threads, 2)}



def bytes_per_token(cfg, dtype, mem):
    """What generating one token reads: the weight matrices of every layer
    and the output layer in dtype (r_net is used once per session, the
    embedding one row), the vectors in F32, and the K, V (mem + 1
    positions) and R (as many distances) of every layer in F32."""
    L, M, HD, I = cfg.n_layer, cfg.d_model, cfg.n_head * cfg.d_head, \
        cfg.d_inner
    per_value = {"F32": 4, "F16": 2, "BF16": 2, "Q8_0": 34 / 32,
                 "Q4_0": 18 / 32}[dtype]
    mats = L * (3 * HD * M + M * HD + 2 * I * M) + cfg.n_token * cfg.d_embed
    vecs = L * (4 * M + I + M) + cfg.n_token
    kvr = L * 3 * (mem + 1) * HD * 4
    return mats * per_value + vecs * 4, kvr


def default_model_bpb(txlgen, model, text, dtype, work, *args):
    """Bits per byte of the default model re-stored as dtype on text
    (txlgen --score with args)."""
    path = os.path.join(work, f"sotu-{dtype}.bin")
    if not os.path.exists(path):
        txlfile.restore(model, path, dtype)
    out = subprocess.run([txlgen, "--model", path, "--score", text,
                          "--json", *args], check=True, capture_output=True,
                         text=True)
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    return float(summary.get("bpb", summary.get("bits_per_byte"))), \
        os.path.getsize(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--orig", help="the original code's pytorch/ folder")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--work", help="keep the models here between runs "
                    "(default: a temporary folder)")
    ap.add_argument("--threads", type=int, default=0,
                    help="threads for both sides (default: every CPU)")
    ap.add_argument("--reps", type=int, default=3)
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
    ap.add_argument("--context", type=int, default=3800,
                    help="the long memory of the memory and XL figures")
    ap.add_argument("--mem-lens", default="256,1024,2048,3800")
    ap.add_argument("--bpb-model", default=os.path.join(ROOT, "models",
                                                        "sotu.bin"))
    ap.add_argument("--bpb-text", default=os.path.join(ROOT, "models",
                                                       "data", "test.txt"))
    ap.add_argument("--no-bpb", action="store_true")
    ap.add_argument("--prime-tokens", type=int, default=100000)
    ap.add_argument("--formats-only", action="store_true",
                    help="stop after the table of formats and the "
                         "figures of --compute and --prime")
    ap.add_argument("--long", type=int, default=0,
                    help="also generate this many tokens (F32) and print "
                         "tokens/s per window")
    a = ap.parse_args()

    exe = os.path.join(a.build, "bench", "bench-txl")
    txlgen = os.path.join(a.build, "cmd", "txlgen")
    if not os.path.exists(exe):
        sys.exit(f"bench.py: {exe}: not built (meson setup build && "
                 "ninja -C build)")
    threads = a.threads or len(os.sched_getaffinity(0))
    torch.set_num_threads(threads)
    common = ["--threads", threads, "--reps", a.reps]

    tmp = None
    if a.work:
        os.makedirs(a.work, exist_ok=True)
        work = a.work
    else:
        tmp = tempfile.TemporaryDirectory(prefix="txl-bench-")
        work = tmp.name
    cfg, state, paths = build_models(work, a)
    n_params = sum(p.numel() for p in
                   txl_ref.MemTransformerLM(cfg).parameters())

    # ---- the machine
    dram = bench_txl(exe, paths["F32"], "--score", 0, "--gen", 0, "--dram",
                     *common)
    bw = dram["dram_read_GBps"]
    print(f"CPU: {cpu_name()}, {threads} threads; libtxl kernels: "
          f"{dram.get('kernels', '?')}")
    print(f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}"
          f" OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}")
    print(f"model: {cfg.n_layer} layers, d_model {cfg.d_model}, "
          f"{cfg.n_head} heads, d_inner {cfg.d_inner}, {cfg.n_token} "
          f"tokens, {n_params / 1e6:.1f}M parameters; seg_len "
          f"{a.seg_len}, mem_len {a.mem_len}")
    w32, kvr = bytes_per_token(cfg, "F32", a.mem_len)
    floor = bw * 1e9 / (w32 + kvr)
    print(f"memory read bandwidth: {bw:.1f} GB/s ({threads} threads, "
          f"{dram['dram_buffer_bytes'] / 2**30:.1f} GiB buffer)")
    print(f"F32 generation reads {w32 / 1e6:.1f} MB of weights and "
          f"{kvr / 1e6:.1f} MB of K, V, R per token: DRAM floor "
          f"{floor:.0f} tokens/s ({bw * 1e9 / w32:.0f} counting the "
          f"weights alone)")

    # ---- PyTorch, F32
    step, init, name = torch_model(cfg, state, a.orig)
    ids = pseudo_random_ids(a.score_tokens, cfg.n_token)
    pt = bench_torch(step, init, ids, a.seg_len, a.torch_gen_tokens)
    # the machine settles before libtxl's figures: run right after PyTorch
    # (its model still held), F32 generation came out at 713 tokens/s,
    # against 843-999 after freeing it and 5 s (AVX2 alone, Zen 5)
    del step, init
    gc.collect()
    time.sleep(5)

    # ---- each format
    res = {}
    for dt in FORMATS:
        res[dt] = bench_txl(exe, paths[dt], "--score", a.score_tokens,
                            "--gen", a.gen_tokens, "--seg-len", a.seg_len,
                            "--mem-len", a.mem_len, *common)
    bpb = {}
    if not a.no_bpb and os.path.exists(a.bpb_model) and \
            os.path.exists(a.bpb_text) and os.path.exists(txlgen):
        for dt in FORMATS:
            bpb[dt] = default_model_bpb(txlgen, a.bpb_model, a.bpb_text, dt,
                                        work)
        # one token at a time, as generation computes: Q8_0's and Q4_0's
        # activations quantized for the integer kernels
        bpb1 = {dt: default_model_bpb(txlgen, a.bpb_model, a.bpb_text, dt,
                                      work, "--seg-len", "1")[0]
                for dt in ("F32", "Q8_0", "Q4_0")}
        # Q8_0 and Q4_0 weights with the compact memories
        bpb_kv = {(dt, kv): default_model_bpb(txlgen, a.bpb_model,
                                              a.bpb_text, dt, work,
                                              "--kv-type", kv)[0]
                  for dt in ("Q8_0", "Q4_0") for kv in ("Q8_0", "Q4_0")}
    print()
    print(f"{'':24} {'file MB':>8} {'score tok/s':>12} {'gen tok/s':>10} "
          f"{'mean NLL':>9} {'bpb':>9} {'bpb MB':>7}")
    print(f"{'PyTorch ' + ('original' if a.orig else 'txl_ref') + ' F32':24}"
          f" {os.path.getsize(paths['F32']) / 1e6:8.1f} "
          f"{pt['score_tok_per_s']:12.0f} {pt['gen_tok_per_s']:10.1f} "
          f"{pt['score_mean_nll']:9.4f}")
    for dt in FORMATS:
        r = res[dt]
        b, size = bpb.get(dt, (float("nan"), 0))
        print(f"{'txlgen ' + dt:24} {os.path.getsize(paths[dt]) / 1e6:8.1f} "
              f"{r['score_tok_per_s']:12.0f} {r['gen_tok_per_s']:10.1f} "
              f"{r['score_mean_nll']:9.4f} {b:9.5f} {size / 1e6:7.1f}")
    f32, q8, q4 = res["F32"], res["Q8_0"], res["Q4_0"]
    print(f"PyTorch: {name}")
    if bpb:
        print(f"bpb: the default model ({os.path.basename(a.bpb_model)}) "
              f"on {os.path.relpath(a.bpb_text, ROOT)}, each type minus F32: "
              + ", ".join(f"{dt} {bpb[dt][0] - bpb['F32'][0]:+.6f}"
                          for dt in FORMATS[1:]))
        print(f"bpb one token at a time (--seg-len 1, as generation "
              f"computes; Q8_0's and Q4_0's activations quantized too), "
              f"minus F32's ({bpb1['F32']:.5f}): " + ", ".join(
                  f"{dt} {bpb1[dt] - bpb1['F32']:+.6f}"
                  for dt in ("Q8_0", "Q4_0")))
        print("bpb with a compact memory (--kv-type), minus with an F32 "
              "one: " + ", ".join(
                  f"{dt}/{kv} {bpb_kv[dt, kv] - bpb[dt][0]:+.6f}"
                  for dt, kv in bpb_kv))
    print(f"scoring: x{f32['score_tok_per_s'] / pt['score_tok_per_s']:.2f} "
          f"the PyTorch code (F32), best format x"
          f"{max(r['score_tok_per_s'] for r in res.values()) / pt['score_tok_per_s']:.2f}")
    print(f"generation: F32 x{f32['gen_tok_per_s'] / pt['gen_tok_per_s']:.1f}"
          f" the PyTorch code, {100 * f32['gen_tok_per_s'] / floor:.0f}% of "
          f"the DRAM floor; Q8_0 x{q8['gen_tok_per_s'] / f32['gen_tok_per_s']:.2f}"
          f" F32, Q4_0 x{q4['gen_tok_per_s'] / f32['gen_tok_per_s']:.2f}")

    # ---- BF16 computed as stored, against the machine's peak; --prime
    bf = {c: bench_txl(exe, paths["BF16"], "--score", a.score_tokens,
                       "--gen", a.gen_tokens, "--seg-len", a.seg_len,
                       "--mem-len", a.mem_len, "--compute", c, *common)
          for c in ("f32", "bf16")}
    pk = peaks(a.build, threads)
    fpt = flops_per_token(cfg, a.mem_len, a.seg_len)
    print()
    print(f"a scored token: {fpt / 1e6:.1f} MFLOP (as the original code "
          f"computes it); peak on {min(threads, 2)} threads: F32 FMA "
          f"{pk.get('peak_fma', float('nan')):.1f} GFLOP/s"
          + (f", vdpbf16ps {pk['peak_vdpbf16ps']:.1f}"
             if "peak_vdpbf16ps" in pk else ""))
    for label, r in (("F32 weights", f32), ("BF16, --compute f32",
                                            bf["f32"]),
                     ("BF16, --compute bf16", bf["bf16"])):
        gf = r["score_tok_per_s"] * fpt / 1e9
        print(f"  {label:22} scoring {r['score_tok_per_s']:8.0f} tok/s = "
              f"{gf:6.1f} GFLOP/s, {100 * gf / pk['peak_fma']:3.0f}% of "
              f"the F32 peak; generation {r['gen_tok_per_s']:.0f} tok/s; "
              f"mean NLL {r['score_mean_nll']:.4f} ({r['compute']})")
    print(f"BF16 compute x{bf['bf16']['score_tok_per_s'] / bf['f32']['score_tok_per_s']:.2f}"
          f" F32 compute in scoring (x"
          f"{bf['bf16']['score_tok_per_s'] / f32['score_tok_per_s']:.2f}"
          f" F32 weights)")
    if bpb:
        b16, _ = default_model_bpb(txlgen, a.bpb_model, a.bpb_text,
                                   "BF16", work, "--compute", "bf16")
        print(f"bpb of the default model in BF16 with --compute bf16: "
              f"{b16:.6f} ({b16 - bpb['F32'][0]:+.6f} against F32)")
    pr = bench_txl(exe, paths["F32"], "--score", 0, "--gen", 1,
                   "--prime", a.prime_tokens, "--seg-len", a.seg_len,
                   "--mem-len", a.mem_len, *common)
    print(f"--prime of {a.prime_tokens} tokens (F32, segments of "
          f"{a.seg_len}, no logits): {pr['prime_tok_per_s']:.0f} tok/s, x"
          f"{pr['prime_tok_per_s'] / f32['score_tok_per_s']:.2f} scoring")
    if a.formats_only:
        if tmp:
            tmp.cleanup()
        return

    # ---- generation against memory length
    mem_lens = [int(x) for x in a.mem_lens.split(",")]
    n_gen = 300
    # (weights, memory): every format with an F32 memory, then compact
    # memories with compact weights
    cols = [(dt, "F32") for dt in FORMATS] + \
        [(dt, kv) for dt in ("F16", "Q8_0")
         for kv in ("F16", "BF16", "Q8_0", "Q4_0")] + \
        [("Q4_0", kv) for kv in ("Q8_0", "Q4_0")]
    print()
    print(f"generation tokens/s against memory length (memory filled first, "
          f"{n_gen} tokens); columns: weights/memory (--kv-type):")
    print(f"{'mem_len':>8} " + " ".join(f"{dt + '/' + kv:>10}"
                                      for dt, kv in cols))
    rates = {}
    for mem in mem_lens:
        row = []
        for dt, kv in cols:
            r = bench_txl(exe, paths[dt], "--score", 0, "--gen", n_gen,
                          "--prime", mem, "--seg-len", a.seg_len,
                          "--mem-len", mem, "--kv-type", kv, *common)
            row.append(r["gen_tok_per_s"])
            rates.setdefault(mem, {})[dt, kv] = r["gen_tok_per_s"]
        print(f"{mem:8d} " + " ".join(f"{x:10.1f}" for x in row))
    # the fastest pair against F32 weights and memory: at the generation
    # setting of the table above and at the long memory
    for mem in dict.fromkeys((a.mem_len, a.context)):
        if ("F32", "F32") in rates.get(mem, {}):
            r = rates[mem]
            best = max(r, key=r.get)
            print(f"at {mem} positions: {best[0]} weights with a "
                  f"{best[1]} memory x{r[best] / r['F32', 'F32']:.2f}"
                  f" F32/F32")
    long_rate = rates.get(a.context, {})

    # ---- XL memory against recomputing the window
    if long_rate:
        print()
        recompute = {}
        # Q8_0 weights with an F32 memory, then Q8_0 and Q4_0 weights
        # each with its fastest memory
        pairs = [("F32", "F32"), ("Q8_0", "F32")]
        for w in ("Q8_0", "Q4_0"):
            compact = [kv for dt, kv in long_rate if dt == w and kv != "F32"]
            if compact:
                pairs.append((w, max(compact,
                                     key=lambda kv: long_rate[w, kv])))
        for dt, kv in pairs:
            if (dt, kv) not in long_rate:
                continue
            if dt not in recompute:
                recompute[dt] = bench_txl(exe, paths[dt], "--score", 0,
                                          "--gen", 0, "--recompute",
                                          a.context, *common)
            r = recompute[dt]
            per_tok = 1 / long_rate[dt, kv]
            print(f"XL memory vs recomputing the {a.context}-token window "
                  f"({dt} weights, {kv} memory): {r['recompute_s']:.2f} s "
                  f"per window vs {per_tok * 1e3:.2f} ms per token with "
                  f"the memory cached: x{r['recompute_s'] / per_tok:.0f}")

    if a.long:
        window = max(a.long // 10, 1)
        r = bench_txl(exe, paths["F32"], "--score", 0, "--gen", a.long,
                      "--window", window, "--seg-len", a.seg_len,
                      "--mem-len", a.mem_len, "--threads", threads)
        print(f"txlgen generating {a.long} tokens, tokens/s per "
              f"{window}-token window:")
        print("  " + "  ".join(f"{n}:{x:.0f}" for n, x in r["gen_window"]))
    if tmp:
        tmp.cleanup()


if __name__ == "__main__":
    main()
