#!/usr/bin/python3
"""A WikiText-103-sized Transformer-XL: txlgen against the original code
on the same weights, in the same run.

  bench/bench_wt103.py --orig PATH/TO/transformer-xl \\
      [--build build]
      [--small] [--keep DIR] [--score-tokens 2049] [--gen-tokens 100]

The model is the original code's MemTransformerLM in the shape of the
paper's WikiText-103 model: 18 layers, d_model 1024, 16 heads of 64,
d_inner 4096, 267,735 words, adaptive input and softmax with cutoffs
20000/40000/200000, div_val 4, tie_projs [F, T, T, T], tied weights
(about 285M parameters), every parameter N(0, 0.02) (LayerNorm gains
N(1, 0.02)) as its train.py initialises them.  It is saved the way
train.py saves it (torch.save(model): model.pt), with a word vocabulary
of 267,735 symbols (one per line, <eos> first), converted with

  models/convert.py --weights model.pt --vocab vocab.txt --dataset wt103

and measured:
  - load: wall time and peak resident memory of `txlgen --model m.bin
    --info` (mapping: pages are touched only when used), and of `--ids
    --score` on 2 tokens (every weight a prediction needs touched);
  - scoring tokens/s: --score --ids on a stream of pseudo-random ids, the
    paper's evaluation settings (seg_len 128, mem_len 1600, clamp_len
    1000, same_length), for txlgen and for the original eval.py loop;
  - txlgen's log-probs of that stream against the original's (max
    difference: the converted model computes what the original does);
  - generation tokens/s, greedy, one token at a time, from a 3-word prompt
    and with the memory filled first (mem_len 1600 tokens: --prime for
    txlgen, the same ids fed in segments for the original);
  - memory for mem_len 1600: txlgen's peak RSS while scoring, and the
    original's (the process's peak RSS growth, and the size of its mems:
    19 tensors of 1600 x 1024 floats);
  - the same txlgen figures for each of --dtypes (default Q8_0: the
    checkpoint converted with --dtype Q8_0, generating with a Q8_0
    memory too; Q4_0 with a Q4_0 memory), with its mean log-prob against
    the original's.
--threads N sets both sides' threads (default: every CPU the process may
use); on a shared machine --threads 1 and the tokens per CPU second
printed beside tokens/s are the fairer comparison.  --keep DIR keeps
model.pt and m.bin for the next run.  --small runs the same pipeline on a 2-layer model of the same
structure (for checking the script).  Run on an idle machine with
OPENBLAS_CORETYPE unset; `nice` it where others share the cores.
"""

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch                                         # noqa: E402

import srctree  # noqa: F401,E402 (models/ on sys.path)
from txlgen import original, txl_ref  # noqa: E402
from txlgen.conventions import REL_PARTIAL  # noqa: E402
import bench                                         # noqa: E402 (bench/)
from machine import cpu_name                         # noqa: E402 (bench/)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

WT103 = dict(n_token=267735, n_layer=18, n_head=16, d_model=1024,
             d_head=64, d_inner=4096, cutoffs=[20000, 40000, 200000],
             div_val=4)
SMALL = dict(n_token=12000, n_layer=2, n_head=4, d_model=64, d_head=16,
             d_inner=128, cutoffs=[1000, 2000, 8000], div_val=4)


def build(orig, shape, work):
    MemTransformerLM = original.import_original(orig)
    model_pt = os.path.join(work, "model.pt")
    vocab = os.path.join(work, "vocab.txt")
    if os.path.exists(model_pt) and os.path.exists(vocab):
        m = torch.load(model_pt)          # a run before, kept by --keep
        if m.n_token == shape["n_token"] and m.n_layer == shape["n_layer"]:
            m.eval()
            return m, model_pt, vocab
    torch.manual_seed(0)
    m = MemTransformerLM(
        shape["n_token"], shape["n_layer"], shape["n_head"],
        shape["d_model"], shape["d_head"], shape["d_inner"], 0.0, 0.0,
        tie_weight=True, d_embed=shape["d_model"], div_val=shape["div_val"],
        tie_projs=[False] + [True] * len(shape["cutoffs"]),
        pre_lnorm=False, tgt_len=128, ext_len=0, mem_len=1600,
        cutoffs=list(shape["cutoffs"]), same_length=True,
        attn_type=REL_PARTIAL, clamp_len=1000)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if "layer_norm.weight" in name:
                p.normal_(1.0, 0.02)
            elif name.endswith("bias") and "r_" not in name:
                p.zero_()
            else:
                p.normal_(0.0, 0.02)
    m.eval()
    torch.save(m, model_pt)
    with open(vocab, "w") as f:
        f.write("<eos>\n<unk>\n")
        for i in range(shape["n_token"] - 2):
            f.write(f"w{i}\n")
    return m, model_pt, vocab


CPU = {}      # what timed() last measured: CPU seconds of the command


def timed(argv):
    """(exit status, stdout, stderr, wall s, peak RSS MB) of a command;
    its CPU seconds (user + system) in CPU["s"]."""
    t0 = time.perf_counter()
    r = subprocess.run(["/usr/bin/time", "-f", "TIME %M %U %S"] + argv,
                       capture_output=True, text=True)
    wall = time.perf_counter() - t0
    m = re.search(r"TIME (\d+) ([\d.]+) ([\d.]+)", r.stderr)
    err = re.sub(r"TIME [\d. ]+\n?", "", r.stderr).strip()
    CPU["s"] = float(m.group(2)) + float(m.group(3)) if m else float("nan")
    return r.returncode, r.stdout, err, wall, \
        (int(m.group(1)) / 1024 if m else float("nan"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--orig", required=True,
                    help="kimiyoung/transformer-xl checkout")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--keep")
    ap.add_argument("--score-tokens", type=int, default=2049)
    ap.add_argument("--gen-tokens", type=int, default=100)
    ap.add_argument("--torch-gen-tokens", type=int, default=30)
    ap.add_argument("--dtypes", default="Q8_0",
                    help="compact formats to measure too, comma-separated "
                    "(F16, BF16, Q8_0, Q4_0; '' for none)")
    ap.add_argument("--threads", type=int, default=0,
                    help="threads for both sides (default: every CPU)")
    a = ap.parse_args()
    threads = a.threads or len(os.sched_getaffinity(0))
    torch.set_num_threads(threads)
    shape = SMALL if a.small else WT103
    txlgen = os.path.join(a.build, "cmd", "txlgen")
    work = a.keep or tempfile.mkdtemp(prefix="txl-wt103-")
    os.makedirs(work, exist_ok=True)
    seg, mem, clamp = 128, 1600, 1000
    print(f"CPU: {cpu_name()}, {threads} threads (both sides); "
          f"OPENBLAS_CORETYPE="
          f"{os.environ.get('OPENBLAS_CORETYPE', '(unset)')}")
    try:
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        m, model_pt, vocab = build(os.path.join(a.orig, "pytorch"), shape,
                                   work)
        n_params = sum(p.numel() for p in m.parameters())
        print(f"model: {shape}, {n_params / 1e6:.1f}M parameters, "
              f"model.pt {os.path.getsize(model_pt) / 1e6:.0f} MB")
        mbin = os.path.join(work, "m.bin")
        if os.path.exists(mbin) and \
                os.path.getmtime(mbin) > os.path.getmtime(model_pt):
            print(f"m.bin of a run before (--keep {work})")
        else:
            t0 = time.perf_counter()
            r = subprocess.run([sys.executable, os.path.join(
                ROOT, "models", "convert.py"), "--weights", model_pt,
                "--vocab", vocab, "--dataset", "wt103", "-o", mbin],
                capture_output=True, text=True)
            if r.returncode:
                sys.exit(f"convert.py refused the model: "
                         f"{r.stderr.strip()}")
            print(f"convert.py: {time.perf_counter() - t0:.1f} s, m.bin "
                  f"{os.path.getsize(mbin) / 1e6:.0f} MB")

        ids = bench.pseudo_random_ids(a.score_tokens, shape["n_token"])
        ids_path = os.path.join(work, "ids.txt")
        with open(ids_path, "w") as f:
            f.write(" ".join(map(str, ids)) + "\n")
        two = os.path.join(work, "two.txt")
        with open(two, "w") as f:
            f.write("0 1\n")
        common = ["--seg-len", str(seg), "--mem-len", str(mem),
                  "--clamp-len", str(clamp), "--same-length", "--threads",
                  str(threads)]
        rc, _, err, wall, rss = timed([txlgen, "--model", mbin, "--info"])
        if rc:
            sys.exit(f"txlgen refused the model: {err}")
        print(f"txlgen load (--info): {wall:.2f} s, peak RSS {rss:.0f} MB")
        rc, _, err, wall, rss = timed([txlgen, "--model", mbin, "--score",
                                       two, "--ids"])
        if rc:
            sys.exit(f"txlgen refused the model: {err}")
        print(f"txlgen load + 1 prediction: {wall:.2f} s, peak RSS "
              f"{rss:.0f} MB")
        # mem_len tokens to fill the memory (--prime): ids 2.. are the
        # words w0..
        fill = (ids * (mem // len(ids) + 1))[:mem]
        prime = os.path.join(work, "prime.txt")
        with open(prime, "w") as f:
            f.write(" ".join(f"w{max(i, 2) - 2}" for i in fill[:-1]) +
                    "\n")
        f32 = txlgen_runs(txlgen, mbin, ids_path, prime, common,
                          a.gen_tokens, "F32")
        txl_score, txl_lp, txl_gen = f32["score"], f32["lp"], f32["gen"]
        compact = {}
        for dt in filter(None, a.dtypes.split(",")):
            path = os.path.join(work, f"m-{dt}.bin")
            r = subprocess.run([sys.executable, os.path.join(
                ROOT, "models", "convert.py"), "--weights", model_pt,
                "--vocab", vocab, "--dataset", "wt103", "--dtype", dt,
                "-o", path], capture_output=True, text=True)
            if r.returncode:
                sys.exit(f"convert.py --dtype {dt}: {r.stderr.strip()}")
            print(f"{dt}: m.bin {os.path.getsize(path) / 1e6:.0f} MB")
            # the block types generate with a memory of their own kind
            kv = ["--kv-type", dt] if dt in ("Q8_0", "Q4_0") and \
                shape["d_head"] % 32 == 0 else []
            compact[dt] = txlgen_runs(txlgen, path, ids_path, prime,
                                      common, a.gen_tokens, dt, kv)

        # the original, same weights, same run
        step, init = original_step(m)
        m.reset_length(seg, 0, mem)
        m.clamp_len, m.same_length = clamp, True
        t0, c0 = time.perf_counter(), time.process_time()
        cfg = txl_ref.TxlConfig.from_dict(shape)
        lp = original.original_logprobs(m, cfg, ids, seg, mem, clamp,
                                              True)
        pt_score = len(lp) / (time.perf_counter() - t0)
        pt_score_cpu = len(lp) / (time.process_time() - c0)
        diff = max(abs(x - y) for x, y in zip(txl_lp, lp))
        print(f"original scoring: {pt_score:.1f} tokens/s, "
              f"{pt_score_cpu:.1f} tokens per CPU second; max |txlgen - "
              f"original| log-prob over {len(lp)} tokens: {diff:.2e}")
        for dt, c in compact.items():
            mean_nll = -sum(c["lp"]) / len(c["lp"]) + sum(lp) / len(lp)
            print(f"{dt} against the original: mean NLL "
                  f"{mean_nll:+.2e} nats per token, max |log-prob diff| "
                  f"{max(abs(x - y) for x, y in zip(c['lp'], lp)):.2e}; "
                  f"scoring x{c['score'] / pt_score:.1f}")
        rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        pt_gen = {}
        with torch.no_grad():
            for label in ("short", "full"):
                mems = init()
                if label == "full":         # mem_len ids fed first
                    for s in range(0, mem, seg):
                        _, mems = step(torch.tensor(fill[s:s + seg])[:, None],
                                       mems, logits=False)
                tok = torch.tensor([[1]])
                t0, c0 = time.perf_counter(), time.process_time()
                for _ in range(a.torch_gen_tokens):
                    logits, mems = step(tok, mems)
                    tok = logits[-1, 0].argmax().view(1, 1)
                pt_gen[label] = a.torch_gen_tokens / \
                    (time.perf_counter() - t0)
                print(f"original generation, memory {label}: "
                      f"{pt_gen[label]:.2f} tokens/s, "
                      f"{a.torch_gen_tokens / (time.process_time() - c0):.2f}"
                      f" tokens per CPU second")
        mem_mb = (shape["n_layer"] + 1) * mem * shape["d_model"] * 4 / 1e6
        print(f"original: process peak RSS {rss1:.0f} MB (before the model "
              f"{rss0:.0f} MB); its mems at mem_len {mem}: {mem_mb:.0f} MB")
        print(json.dumps({"params_M": n_params / 1e6,
                          "txlgen_score_tok_s": txl_score,
                          "txlgen_gen_tok_s": txl_gen,
                          "orig_score_tok_s": pt_score,
                          "txlgen_score_tok_cpu_s": f32["score_cpu"],
                          "orig_score_tok_cpu_s": pt_score_cpu,
                          "orig_gen_tok_s": pt_gen,
                          "max_logprob_diff": diff,
                          "txlgen_score_rss_mb": f32["rss"],
                          "txlgen_gen_rss_mb": f32["rss_gen"],
                          "compact": {dt: {"score_tok_s": c["score"],
                                           "gen_tok_s": c["gen"]}
                                      for dt, c in compact.items()}}))
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)


def txlgen_runs(txlgen, mbin, ids_path, prime, common, gen_tokens, label,
                gen_extra=()):
    """Scoring, then generation from a 3-word prompt and with the memory
    filled first (--prime: mem_len words), of one model file; returns
    {score: tokens/s, score_cpu: tokens per CPU second, lp: log-probs,
    gen: {short, full: tokens/s}, rss, rss_gen: peak RSS, MB}."""
    rc, out, err, wall, rss = timed([txlgen, "--model", mbin, "--score",
                                     ids_path, "--ids", "--stats",
                                     "--json"] + common)
    sc = re.search(r"scored (\d+) tokens in ([\d.]+) s", err)
    if rc or not sc:
        sys.exit(f"txlgen scoring ({label}): exit {rc}: {err}")
    score = int(sc.group(1)) / float(sc.group(2))
    score_cpu = int(sc.group(1)) / CPU["s"]
    print(f"txlgen {label} scoring: {score:.1f} tokens/s, "
          f"{score_cpu:.1f} tokens per CPU second, peak RSS {rss:.0f} MB")
    lp = [float(json.loads(x)["logprob"]) for x in out.splitlines()
          if '"pos"' in x]
    gen = {}
    for what, extra in (("short", []), ("full", ["--prime", prime])):
        rc, out, err, wall, rss_gen = timed(
            [txlgen, "--model", mbin, "--text", "w1 w2 w3", "-n",
             str(gen_tokens), "--temp", "0", "--stats"] + common + extra +
            list(gen_extra))
        # txlgen's own rate: the seconds it prints are rounded to
        # milliseconds, 0.000 for a few tokens
        g = re.search(r"generated: \d+ tokens? in [\d.]+ s "
                      r"\(([\d.]+) tokens/s\)", err)
        if rc or not g:
            sys.exit(f"txlgen generation ({label}, {what}): exit {rc}: "
                     f"{err}")
        gen[what] = float(g.group(1))
        print(f"txlgen {label} generation, memory {what}"
              f"{' ' + ' '.join(gen_extra) if gen_extra else ''}: "
              f"{gen[what]:.2f} tokens/s, peak RSS {rss_gen:.0f} MB (the "
              f"run: {wall:.1f} s, {CPU['s']:.1f} CPU s)")
    return {"score": score, "score_cpu": score_cpu, "lp": lp, "gen": gen,
            "rss": rss, "rss_gen": rss_gen}


def original_step(m):
    """One call of the original model on tokens x with memory: the
    logits of every position through its adaptive softmax, as a log-prob
    table (the same work generation needs)."""
    import torch.nn.functional as F

    def step(x, mems, logits=True):
        hidden, new = m._forward(x, mems=mems)
        if not logits:
            return None, new
        # ProjectedAdaptiveLogSoftmax on a dummy target gives NLLs, not
        # the distribution: compute the full log-probs as it does
        crit = m.crit
        h = hidden.view(-1, hidden.size(-1))
        head_w = torch.cat([crit.out_layers[0].weight, crit.cluster_weight])
        head_b = torch.cat([crit.out_layers[0].bias, crit.cluster_bias])
        head = F.log_softmax(crit._compute_logit(h, head_w, head_b,
                                                 crit.out_projs[0]), -1)
        parts = [head[:, :crit.cutoffs[0]]]
        for i in range(1, len(crit.cutoffs)):
            tail = F.log_softmax(crit._compute_logit(
                h, crit.out_layers[i].weight, crit.out_layers[i].bias,
                crit.out_projs[i]), -1)
            parts.append(tail + head[:, -i, None])
        return torch.cat(parts, -1).view(x.size(0), x.size(1), -1), new
    return step, m.init_mems


if __name__ == "__main__":
    main()
