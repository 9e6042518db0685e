#!/usr/bin/python3
"""Check txlgen and txlgen.txl_ref against the ORIGINAL Transformer-XL
code (not run in CI).

  tools/check_original.py --orig PATH/TO/transformer-xl/pytorch \\
      [--txlgen build/cmd/txlgen] [--tol 1e-4] [--only NAME,...] [--keep DIR]

For every model the original code builds (attn_type 0 with pre_lnorm
on/off, tied/untied output weights, d_embed != d_model with tied or
untied projections; the adaptive input and softmax with div_val 1 with and
without projection, div_val 2 and 4 with tie_projs mixed, together with
same_length and clamp_len; attn_type 1 with memory; attn_type 2 and 3
without) it builds the original MemTransformerLM with every parameter
random (tests/make_random_model.randomize), saves its state_dict and a
CFG.json, converts them with models/convert.py (the user's path), loads
the same state_dict into txl_ref, and compares every per-token log-prob
with the original model's own loss, forward(data, target, *mems), segment
by segment in eval mode after reset_length(T, 0, M), with same_length and
clamp_len set on the model, as the original eval.py does: over several
segments with memory, token by token (T = 1), and without memory.  For
attn_type 2 and 3 it also compares the sliding-window protocol of the
vanilla Transformer (txl_ref.score_windows, stride S: the original's loss
on every window, its last S tokens kept; stride 1 is the paper's
protocol).  txlgen is run as

  txlgen --model m.bin --score IDS --ids --json --seg-len T --mem-len M
         --clamp-len C --same-length|--no-same-length [--score-stride S]

(for attn_type 2 and 3 always with --score-stride: S = T for eval.py's
segments; for S = 1 without it where txlgen does not know the option,
libtxl's default stride being 1)

and a model of a variant this txlgen refuses (exit 3), or an option it
does not know (exit 2), is reported as "txlgen: not supported yet", not
as a failure.  Exit
status 0 if every difference is within --tol, 1 otherwise.

The original's adaptive softmax returns the losses grouped by cluster
(keep_order is False in MemTransformerLM); they are put back in token
order here.  The original code cannot be committed here; give its
pytorch/ folder with --orig.  It is imported unmodified
(txlgen.original says how).
"""

import json
import os
import subprocess
import sys

import torch

import srctree  # noqa: F401 (models/ on sys.path)
from txlgen import random_model as mrm, txl_ref
from txlgen.conventions import ABS_LEARNED, NO_MEMORY_KINDS, REL_PARTIAL
from txlgen.original import (OriginalError, checker_args, finish,
                             import_original, only_names, original_logprobs,
                             original_model, original_windows, work_folder)

ROOT = mrm.ROOT

# (name, hyperparameters) of the models built with the original code; the
# tokenizer has 320 pieces, so uniform random ids fall mostly into tails.
CONFIGS = [
    ("post_tied", dict(n_layer=2, n_head=2, d_model=32, d_head=16,
                       d_inner=64, tgt_len=8, mem_len=8)),
    ("pre_untied", dict(n_layer=3, n_head=2, d_model=32, d_head=16,
                        d_inner=64, tgt_len=8, mem_len=8, pre_lnorm=True,
                        tie_weight=False)),
    ("proj_tied", dict(n_layer=2, n_head=4, d_model=48, d_head=8,
                       d_inner=96, d_embed=24, tie_weight=True,
                       tie_projs=True, tgt_len=6, mem_len=12)),
    ("proj_untied_pre", dict(n_layer=2, n_head=2, d_model=32, d_head=16,
                             d_inner=64, d_embed=40, tie_weight=False,
                             tie_projs=False, pre_lnorm=True, tgt_len=8,
                             mem_len=8)),
    ("wide", dict(n_layer=3, n_head=4, d_model=64, d_head=16, d_inner=128,
                  tgt_len=16, mem_len=16, clamp_len=10, same_length=True)),
    # adaptive input and softmax
    ("adapt_div1", dict(cutoffs=[40, 120])),
    ("adapt_div1_proj", dict(cutoffs=[40, 120], d_embed=24,
                             tie_weight=False, pre_lnorm=True,
                             tie_projs=[False, True, False])),
    ("adapt_div2", dict(cutoffs=[40, 120], div_val=2, d_embed=48,
                        tie_projs=[False, True, False])),
    ("adapt_div4", dict(n_head=4, d_head=8, cutoffs=[20, 60, 200],
                        div_val=4, d_embed=64, tie_weight=False,
                        pre_lnorm=True, tie_projs=[True, False, True,
                                                   False])),
    ("adapt_same_clamp", dict(cutoffs=[100, 200], div_val=2, tgt_len=6,
                              mem_len=12, clamp_len=5, same_length=True,
                              tie_projs=[False, True, True])),
    # attn_type 1: memory, windows longer than the tables, clamp_len
    ("attn1", dict(attn_type=1, tgt_len=8, mem_len=8)),
    ("attn1_pre_adapt", dict(attn_type=1, pre_lnorm=True, tgt_len=6,
                             mem_len=10, cutoffs=[80], div_val=2,
                             tie_projs=[False, True])),
    # attn_type 2 and 3: no memory (attn3_built_mem: built with mem_len 6,
    # so its tables have tgt_len + 6 rows)
    ("attn2", dict(attn_type=2, tgt_len=8, mem_len=0)),
    ("attn2_pre_adapt", dict(attn_type=2, pre_lnorm=True, tgt_len=8,
                             mem_len=0, clamp_len=5, cutoffs=[60, 200],
                             div_val=2, tie_projs=[False, True, False])),
    ("attn3", dict(attn_type=3, tgt_len=10, mem_len=0)),
    ("attn3_built_mem", dict(attn_type=3, pre_lnorm=True, tgt_len=8,
                             mem_len=6, tie_weight=False)),
]

# run-time settings: (seg_len, mem_len, clamp_len, same_length); None =
# the model's value
SETTINGS = [
    (None, None, None, None),            # training settings
    (1, None, None, None),               # token by token
    (8, 32, 0, False),                   # memory longer than training
    (8, 16, 0, True),                    # same_length
    (1, 20, 5, True),                    # token by token, clamp, same_length
    (5, 24, 3, False),                   # clamp_len
    (12, 0, 0, False),                   # no memory
]
# attn_type 2 and 3 (no memory): (seg_len, clamp_len, stride); stride None
# = segments (eval.py), else sliding windows
WINDOW_SETTINGS = [
    (None, None, None),                  # training settings
    (1, None, None),                     # token by token
    (5, 0, None),
    (7, 3, None),                        # clamp_len (type 2)
    (None, None, 1),                     # the paper's vanilla protocol
    (6, 4, 3),
]


class NotSupported(Exception):
    pass


def txlgen_logprobs(txlgen, path, ids_path, ids, seg, mem, clamp, same,
                    stride=None, variant=True):
    argv = [txlgen, "--model", path, "--score", ids_path, "--ids", "--json",
            "--seg-len", str(seg), "--mem-len", str(mem),
            "--clamp-len", str(max(clamp, 0)),
            "--same-length" if same else "--no-same-length"]
    if stride is not None:
        argv += ["--score-stride", str(stride)]
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
    r = subprocess.run(argv, capture_output=True, text=True, env=env)
    err = r.stderr.strip()
    if stride == 1 and r.returncode == 2 and "unknown option" in err:
        # libtxl's default stride is 1 (txl.h): without the option
        argv = argv[:-2]
        r = subprocess.run(argv, capture_output=True, text=True, env=env)
        err = r.stderr.strip()
    # A model of a variant refused as a bad model (exit 3), or an option
    # refused as unknown (exit 2): what this txlgen does not load yet.
    if (r.returncode == 3 and (variant or "not supported" in err)) or \
            (r.returncode == 2 and "unknown option" in err):
        raise NotSupported(err.splitlines()[0] if err else "")
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {r.returncode}: {err}")
    recs = [json.loads(line) for line in r.stdout.splitlines()
            if line.strip()]
    recs = [x for x in recs if "pos" in x]
    assert [x["id"] for x in recs] == ids[1:], "ids differ"
    return [float(x["logprob"]) for x in recs], " ".join(argv[1:])


def runs(cfg):
    """The (seg, mem, clamp, same, stride) runs of a configuration."""
    hp = cfg.hparams()
    if cfg.attn_type in NO_MEMORY_KINDS:
        for seg, clamp, stride in WINDOW_SETTINGS:
            seg = hp["tgt_len"] if seg is None else seg
            if cfg.attn_type == ABS_LEARNED and seg > cfg.max_klen:
                continue
            yield (seg, 0, hp["clamp_len"] if clamp is None else clamp,
                   False, stride)
        return
    for s in SETTINGS:
        run = tuple(hp[k] if v is None else v for k, v in
                    zip(("tgt_len", "mem_len", "clamp_len", "same_length"),
                        s))
        if not (run[3] and run[1] == 0):
            yield run + (None,)


def check_config(k, name, hp, MemTransformerLM, a, work):
    """Compare one configuration; returns (worst txl_ref difference, worst
    txlgen difference or None, failures, what txlgen does not support)."""
    cfg = mrm.make_config(**hp)
    torch.manual_seed(k)
    orig = original_model(MemTransformerLM, cfg)
    mrm.randomize(orig, seed=k, cfg=cfg)
    orig.eval()
    problems = mrm.check_params(orig)
    if problems:
        sys.exit(f"{name}: randomisation failed: {problems}")
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    state, cfgp, mbin = (os.path.join(d, f) for f in
                         ("state.pt", "CFG.json", "m.bin"))
    torch.save(orig.state_dict(), state)
    with open(cfgp, "w") as f:
        json.dump({k2: v for k2, v in cfg.hparams().items()
                   if k2 != "untie_r"}, f, indent=1)
    mrm.convert(cfgp, state, mrm.TOKENIZER, mbin)

    with open(cfgp) as f:
        ref = txl_ref.MemTransformerLM(txl_ref.TxlConfig.from_dict(
            json.load(f)))
    missing, unexpected = ref.load_state_dict(orig.state_dict(),
                                              strict=False)
    assert not unexpected and all(m.endswith("inv_freq") for m in missing), \
        (missing, unexpected)

    variant = cfg.attn_type != REL_PARTIAL or bool(cfg.cutoffs) or \
        cfg.div_val != 1
    ids = mrm.random_ids(a.tokens, cfg.n_token, seed=100 + k)
    ids_path = os.path.join(d, "ids.txt")
    with open(ids_path, "w") as f:
        f.write(" ".join(map(str, ids)) + "\n")
    worst_ref, worst_txl, failures, unsupported = 0.0, None, [], {}
    for seg, mem, clamp, same, stride in runs(cfg):
        if stride is None:
            want = original_logprobs(orig, cfg, ids, seg, mem, clamp, same)
            r = txl_ref.score_ids(ref, ids, seg, mem, clamp, same).tolist()
            what = (f"seg {seg:>2} mem {mem:>2} clamp {clamp:>2} same "
                    f"{int(same)}")
        else:
            want = original_windows(orig, cfg, ids, seg, clamp, stride)
            r = txl_ref.score_windows(ref, ids, seg, stride, clamp).tolist()
            what = f"seg {seg:>2} clamp {clamp:>2} windows, stride {stride}"
        assert len(r) == len(want) == len(ids) - 1
        dref = max(abs(x - y) for x, y in zip(r, want))
        worst_ref = max(worst_ref, dref)
        flag = "" if dref <= a.tol else "   <-- FAIL (txl_ref)"
        if dref > a.tol:
            failures.append(f"{name} {what}: txl_ref max diff {dref:.3g}")
        txl = "txlgen: not supported yet"
        if "model" not in unsupported:
            try:
                # models without memory score in windows: eval.py's
                # segments are windows of stride seg_len
                txl_stride = stride if stride is not None else \
                    seg if cfg.attn_type in NO_MEMORY_KINDS else None
                got, cmd = txlgen_logprobs(a.txlgen, mbin, ids_path, ids,
                                           seg, mem, clamp, same, txl_stride,
                                           variant)
                dtxl = max(abs(x - y) for x, y in zip(got, want))
                worst_txl = max(worst_txl or 0.0, dtxl)
                txl = f"txlgen {dtxl:.2e}"
                if dtxl > a.tol:
                    flag += "   <-- FAIL (txlgen)"
                    failures.append(f"{name}: {cmd}: max diff {dtxl:.3g}")
            except NotSupported as e:
                unsupported["model" if "option" not in str(e) else
                            "windows"] = str(e)
                txl = f"txlgen: not supported yet ({e})"
            except (RuntimeError, AssertionError, OSError) as e:
                failures.append(f"{name} {what}: {e}")
                txl = f"txlgen error: {e}"
        print(f"{name:<17} {what:<38} txl_ref {dref:.2e}  {txl}{flag}")
    return worst_ref, worst_txl, failures, unsupported


def main():
    ap = checker_args(__doc__, "pytorch/ folder of kimiyoung/transformer-xl")
    ap.add_argument("--tokens", type=int, default=200)
    a = ap.parse_args()

    try:
        MemTransformerLM = import_original(os.path.abspath(a.orig))
    except OriginalError as e:
        sys.exit(f"check_original.py: {e}")
    torch.set_num_threads(1)
    work = work_folder(a.keep, "txl-orig-")
    only = only_names("check_original.py", a.only, [n for n, _ in CONFIGS])
    summary, failures = [], []
    for k, (name, hp) in enumerate(CONFIGS):
        if only and name not in only:
            continue
        wr, wt, f, unsupported = check_config(k, name, hp, MemTransformerLM,
                                              a, work)
        failures += f
        summary.append((name, wr, wt, unsupported))
    print(f"\nworst |log-prob difference| from the original per "
          f"configuration ({a.tokens} tokens, tolerance {a.tol}):")
    for name, wr, wt, unsupported in summary:
        txl = f"txlgen {wt:.2e}" if wt is not None else \
            "txlgen: not supported yet"
        if wt is not None and "windows" in unsupported:
            txl += " (--score-stride not supported yet)"
        print(f"  {name:<17} txl_ref {wr:.2e}  {txl}")
    return finish(work, a.keep, failures)


if __name__ == "__main__":
    sys.exit(main())
