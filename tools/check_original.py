#!/usr/bin/python3
"""Check txlgen against the ORIGINAL Transformer-XL code (not run in CI).

  tools/check_original.py --orig PATH/TO/transformer-xl/pytorch \\
      [--txlgen build/cmd/txlgen] [--tol 1e-4] [--keep DIR]

For several configurations (attn_type 0, div_val 1, no cutoffs; pre_lnorm
on/off, tied/untied output weights, d_embed != d_model with tied or untied
projections) it builds the original MemTransformerLM with every parameter
random (tests/make_random_model.randomize), saves its state_dict and a
CFG.json, converts them with models/convert.py (the user's path), scores
random ids with

  txlgen --model m.bin --score IDS --ids --json --seg-len T --mem-len M
         --clamp-len C --same-length|--no-same-length

and compares every log-prob with the original model's own loss:
forward(data, target, *mems) segment by segment in eval mode after
reset_length(T, 0, M), with same_length and clamp_len set on the model,
as the original eval.py does.  It also reports how far models/txl_ref.py
(loaded with the same state_dict) is from the original.  Exit status 0 if
every difference is within --tol, 1 otherwise.

The original code cannot be committed here; give its pytorch/ folder with
--orig.  It is imported unmodified: its utils/proj_adaptive_softmax.py
reads torch.version.cuda at import time, which is None in CPU-only torch,
so a version string is put there before the import.  Its uint8 attention
masks only trigger a deprecation warning (silenced here).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import make_random_model as mrm                      # noqa: E402
import torch                                         # noqa: E402
import txl_ref                                       # noqa: E402

# (name, hyperparameters) of the models built with the original code
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


def import_original(orig):
    if not os.path.exists(os.path.join(orig, "mem_transformer.py")):
        sys.exit(f"check_original.py: {orig}: no mem_transformer.py (give "
                 "the pytorch/ folder of kimiyoung/transformer-xl)")
    if torch.version.cuda is None:
        torch.version.cuda = "11.0"      # read (split) at import time
    sys.path.insert(0, os.path.join(orig, "utils"))
    sys.path.insert(0, orig)
    warnings.filterwarnings("ignore", message=".*masked_fill_ received a "
                            "mask with dtype torch.uint8.*")
    import mem_transformer
    return mem_transformer.MemTransformerLM


def original_model(MemTransformerLM, cfg):
    m = MemTransformerLM(
        cfg.n_token, cfg.n_layer, cfg.n_head, cfg.d_model, cfg.d_head,
        cfg.d_inner, dropout=0.0, dropatt=0.0, tie_weight=cfg.tie_weight,
        d_embed=cfg.d_embed, div_val=1, tie_projs=list(cfg.tie_projs),
        pre_lnorm=cfg.pre_lnorm, tgt_len=cfg.tgt_len, ext_len=0,
        mem_len=cfg.mem_len, cutoffs=[], adapt_inp=False,
        same_length=cfg.same_length, attn_type=0, clamp_len=cfg.clamp_len)
    return m


@torch.no_grad()
def original_logprobs(model, ids, seg_len, mem_len, clamp_len, same_length):
    """The original eval.py loop on one stream of ids."""
    model.eval()
    model.reset_length(seg_len, 0, mem_len)
    model.clamp_len = clamp_len
    model.same_length = same_length
    ids = torch.as_tensor(ids, dtype=torch.long)
    out, mems = [], tuple()
    for s in range(0, len(ids) - 1, seg_len):
        target = ids[s + 1:s + 1 + seg_len]
        data = ids[s:s + len(target)]
        ret = model(data[:, None], target[:, None], *mems)
        out.append(-ret[0][:, 0].double())
        mems = ret[1:]
    return torch.cat(out).tolist()


def txlgen_logprobs(txlgen, path, ids_path, ids, seg, mem, clamp, same):
    argv = [txlgen, "--model", path, "--score", ids_path, "--ids", "--json",
            "--seg-len", str(seg), "--mem-len", str(mem),
            "--clamp-len", str(max(clamp, 0)),
            "--same-length" if same else "--no-same-length"]
    r = subprocess.run(argv, capture_output=True, text=True,
                       env=dict(os.environ, OMP_WAIT_POLICY="PASSIVE"))
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {r.returncode}: "
                           f"{r.stderr.strip()}")
    recs = [json.loads(line) for line in r.stdout.splitlines()
            if line.strip()]
    recs = [x for x in recs if "pos" in x]
    assert [x["id"] for x in recs] == ids[1:], "ids differ"
    return [float(x["logprob"]) for x in recs], " ".join(argv[1:])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--orig", required=True,
                    help="pytorch/ folder of kimiyoung/transformer-xl")
    ap.add_argument("--txlgen", default=os.path.join(ROOT, "build", "cmd",
                                                     "txlgen"))
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--tokens", type=int, default=200)
    ap.add_argument("--keep", help="keep the models in this folder")
    a = ap.parse_args()

    MemTransformerLM = import_original(os.path.abspath(a.orig))
    work = a.keep or tempfile.mkdtemp(prefix="txl-orig-")
    os.makedirs(work, exist_ok=True)
    worst_txl, worst_ref, failures = 0.0, 0.0, []
    for k, (name, hp) in enumerate(CONFIGS):
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

        ref = txl_ref.MemTransformerLM(txl_ref.TxlConfig.from_dict(
            cfg.hparams()))
        ref.load_state_dict(orig.state_dict(), strict=False)

        ids = mrm.random_ids(a.tokens, cfg.n_token, seed=100 + k)
        ids_path = os.path.join(d, "ids.txt")
        with open(ids_path, "w") as f:
            f.write(" ".join(map(str, ids)) + "\n")
        for s in SETTINGS:
            seg, mem, clamp, same = (
                cfg.tgt_len if s[0] is None else s[0],
                cfg.mem_len if s[1] is None else s[1],
                cfg.clamp_len if s[2] is None else s[2],
                cfg.same_length if s[3] is None else s[3])
            if same and mem == 0:
                continue
            want = original_logprobs(orig, ids, seg, mem, clamp, same)
            r = txl_ref.score_ids(ref, ids, seg, mem, clamp, same).tolist()
            dref = max(abs(x - y) for x, y in zip(r, want))
            try:
                got, cmd = txlgen_logprobs(a.txlgen, mbin, ids_path, ids,
                                           seg, mem, clamp, same)
                dtxl = max(abs(x - y) for x, y in zip(got, want))
            except (RuntimeError, AssertionError, OSError) as e:
                failures.append(f"{name} seg {seg} mem {mem} clamp {clamp} "
                                f"same {same}: {e}")
                print(failures[-1])
                continue
            worst_txl, worst_ref = max(worst_txl, dtxl), max(worst_ref, dref)
            flag = "" if dtxl <= a.tol else "   <-- FAIL"
            print(f"{name:<16} seg {seg:>2} mem {mem:>2} clamp {clamp:>2} "
                  f"same {int(same)}  txlgen {dtxl:.2e}  txl_ref "
                  f"{dref:.2e}{flag}")
            if dtxl > a.tol:
                failures.append(f"{name}: {cmd}: max diff {dtxl:.3g}")
    print(f"max |txlgen - original| {worst_txl:.3g}; max |txl_ref - "
          f"original| {worst_ref:.3g}; tolerance {a.tol}")
    if not a.keep:
        import shutil
        shutil.rmtree(work, ignore_errors=True)
    if failures:
        print(f"{len(failures)} failure(s)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
