"""Random-weight Transformer-XL models for txlgen's tests.

Builds a txl_ref MemTransformerLM of any variant (attn_type 0-3,
adaptive input and softmax) in which EVERY parameter is random (matrices,
biases, LayerNorm gains and biases, relative biases, position tables,
cluster weights), with weights large enough that attention is far from
uniform and the cluster logits matter, saves torch.save(state_dict) and a
CFG.json with the original hyperparameter names, converts them with
models/convert.py run as a subprocess (the user's path) into m.bin, and
computes reference log-probs with txl_ref.score_ids.

As a module:

    rm = build(outdir, n_layer=2, d_model=32, pre_lnorm=True, dtype="F16")
    lp = rm.score(ids, seg_len=8, mem_len=16, clamp_len=0, same_length=False)

Helpers for the tests of the variants:

    VARIANTS                   small named configurations of every variant
                               (adaptive softmax with div_val 1 / 2 / 4,
                               tie_projs mixed, same_length + clamp_len,
                               attn_type 1, 2, 3): build(dir, **VARIANTS[n])
    make_config(attn_type=, div_val=, cutoffs=, tie_projs=[...], max_klen=)
    rm.score(ids, seg_len=W, stride=S)
                               the sliding-window protocol of the vanilla
                               Transformer (txl_ref.score_windows: no
                               memory, the ids in groups of S from the
                               first, each group computed after the up to
                               W - S ids before it)
    rm.log_probs(hidden)       the full distribution after
                               rm.model.forward() for any output layer
                               (rm.model.logits() is the full softmax only)
    cluster_stats(model, ids, seg_len)
                               how much the adaptive softmax's tail
                               clusters weigh
    txl_ref.from_tensors(*txlfile.read(m.bin))
                               a converted file back as a txl_ref model

rm.settings() and rm.score() default to the model file's run-time values
(mem_len 0 for attn_type 2 and 3).  txl_ref.score_ids(adapt_lr=) refuses
an adaptive softmax (dynamic evaluation is defined for the full softmax).

As a program (tests/make_random_model.py):

    tests/make_random_model.py -o DIR [--n-layer 2 --d-model 32 ...] [--dtype F16]
        writes DIR/m.bin, DIR/state.pt, DIR/cfg.json, DIR/tokenizer.model
        (--attn-type, --cutoffs 40,120, --div-val, --d-embed,
        --tie-projs false,true,true, --max-klen; or --variant NAME)
    tests/make_random_model.py -o DIR ... --score IDS_FILE [--seg-len T ...]
        also prints the reference log-probs as txlgen --json does
        ({"pos": i, "id": t, "logprob": x} per predicted token);
        --stride S for the sliding-window protocol
    tests/make_random_model.py -o DIR ... --check
        prints the attention statistics (mean max probability per row
        against the uniform 1/keys), the parameter check and, with an
        adaptive softmax, the weight of the tail clusters

For F16/BF16 storage the weights are rounded to that type before saving,
so the reference sees exactly the weights txlgen reads from the file.
Run with /usr/bin/python3 (Debian's python3-torch); OMP_WAIT_POLICY=PASSIVE
is set for the converter subprocess.
"""

import argparse
import json
import math
import os
import subprocess
import sys

import torch

from . import txl_ref, txlfile
from .conventions import (ABS_LEARNED, ABS_SINUSOID, DEFAULT_LAYER_NORM_EPS,
                          DEFAULT_MEM_INIT, DEFAULT_SAME_LENGTH_MASK,
                          REL_LEARNED, REL_PARTIAL)

# the source tree: this package is ROOT/models/txlgen
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "tests", "data")
TOKENIZER = os.path.join(DATA, "spm.model")
CONVERT = os.path.join(ROOT, "models", "convert.py")
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") \
    else sys.executable

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

torch.set_num_threads(1)


def find_program(env_var, *build_path):
    """A program under test: $env_var (meson sets it), else
    build/<build_path> of the source tree if it exists, else None."""
    path = os.environ.get(env_var)
    if path:
        return path
    path = os.path.join(ROOT, "build", *build_path)
    return path if os.path.exists(path) else None


def vocab_size(tokenizer=TOKENIZER):
    import sentencepiece as spm
    return spm.SentencePieceProcessor(model_file=tokenizer).get_piece_size()


def make_config(n_layer=2, n_head=2, d_model=32, d_head=16, d_inner=64,
                d_embed=None, tie_weight=True, tie_projs=False,
                pre_lnorm=False, untie_r=False, tgt_len=8, mem_len=8,
                clamp_len=-1, same_length=False, n_token=None,
                tokenizer=TOKENIZER, attn_type=REL_PARTIAL, div_val=1,
                cutoffs=(),
                max_klen=None, layer_norm_eps=DEFAULT_LAYER_NORM_EPS,
                same_length_mask=DEFAULT_SAME_LENGTH_MASK):
    """A TxlConfig; tie_projs is one bool for every cluster or a list (one
    per cluster, as the original's)."""
    if n_token is None:
        n_token = vocab_size(tokenizer)
    cutoffs = list(cutoffs)
    if isinstance(tie_projs, bool):
        tie_projs = [tie_projs] * (len(cutoffs) + 1)
    return txl_ref.TxlConfig(
        n_token=n_token, n_layer=n_layer, n_head=n_head, d_model=d_model,
        d_head=d_head, d_inner=d_inner, d_embed=d_embed,
        tie_weight=tie_weight, tie_projs=list(tie_projs),
        pre_lnorm=pre_lnorm, untie_r=untie_r, tgt_len=tgt_len,
        mem_len=mem_len, clamp_len=clamp_len, same_length=same_length,
        attn_type=attn_type, div_val=div_val, cutoffs=cutoffs,
        max_klen=max_klen, layer_norm_eps=layer_norm_eps,
        same_length_mask=same_length_mask)


def randomize(model, seed=0, scale=1.0, cfg=None):
    """Give every parameter random values, none zero or one-valued.

    Matrices get N(0, (g/sqrt(fan_in))^2) with gains chosen so that the
    attention scores have a standard deviation of a few units (far from
    uniform attention) and logits spread over several nats; biases,
    LayerNorm biases and r_w_bias/r_r_bias get N(0, s^2) with s of order
    one; LayerNorm gains N(1, 0.3^2).  `scale` multiplies every gain.
    With pre_lnorm the residual stream is never normalised, so the
    embeddings and the residual branches are smaller there, to keep logits
    in the range of trained models (a few units, not tens).
    Position tables: r_emb N(0, 1) (type 1: q.r_emb as large as q.k;
    type 3: as large as the normalised inputs it is added to); r_bias
    N(0, d_head) (order one after the 1/sqrt(d_head) scaling).
    Adaptive softmax: cluster_weight like the output weights and
    cluster_bias N(2, 1), so that the tail clusters hold a large share of
    the probability and each cluster's logit differs from the others'
    (the order of the cluster logits changes every tail token's log-prob).
    Parameter names are the original MemTransformerLM's, so this works on
    the original code's model too (pass its TxlConfig as cfg).
    """
    cfg = cfg or model.cfg
    g = torch.Generator().manual_seed(seed)
    M = cfg.d_model
    emb_gain, res_gain = (1.0, 0.5) if cfg.pre_lnorm else (2.0, 1.2)

    def normal(p, mean, std):
        p.copy_(torch.randn(p.shape, generator=g) * std + mean)

    with torch.no_grad():
        for name, p in model.named_parameters():
            fan_in = p.shape[-1] if p.dim() >= 2 else 1
            if "layer_norm.weight" in name:
                normal(p, 1.0, 0.3)
            elif "layer_norm.bias" in name:
                normal(p, 0.0, 0.3)
            elif name in ("r_w_bias", "r_r_bias"):
                normal(p, 0.0, 1.0 * scale)
            elif name == "r_emb":
                normal(p, 0.0, 1.0 * scale)
            elif name == "r_bias":
                normal(p, 0.0, 1.0 * scale * math.sqrt(cfg.d_head))
            elif name.startswith("word_emb.emb_layers."):
                # scaled by sqrt(d_model) at the input: entries of std ~2
                # (~1 with pre_lnorm), projected or not
                normal(p, 0.0, emb_gain * scale / math.sqrt(M))
            elif name.startswith("word_emb.emb_projs."):
                normal(p, 0.0, 1.0 / math.sqrt(fan_in))
            elif name.startswith("crit.out_projs."):
                normal(p, 0.0, 1.0 / math.sqrt(M))
            elif name == "crit.cluster_weight" or (
                    name.startswith("crit.out_layers.") and
                    name.endswith(".weight")):
                normal(p, 0.0, 2.0 * scale / math.sqrt(fan_in))
            elif name == "crit.cluster_bias":
                normal(p, 2.0, 1.0 * scale)
            elif name.startswith("crit.out_layers."):       # output biases
                normal(p, 0.0, 1.0 * scale)
            elif name.endswith(("qkv_net.weight", "r_net.weight",
                                "q_net.weight", "kv_net.weight")):
                normal(p, 0.0, 1.5 * scale / math.sqrt(fan_in))
            elif name.endswith(".bias"):            # FF biases
                normal(p, 0.0, 0.5 * scale)
            elif name.endswith("CoreNet.0.weight"):
                normal(p, 0.0, 1.2 * scale / math.sqrt(fan_in))
            else:                                   # o_net, CoreNet.3
                normal(p, 0.0, res_gain * scale / math.sqrt(fan_in))


def round_weights(model, dtype):
    """Give every parameter the value it will have in a file written with
    dtype (in place), so that the reference computes with exactly the
    stored weights."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.from_numpy(txlfile.stored_values(name, p, dtype)))


def check_params(model):
    """Problems with the randomisation: parameters that are constant (e.g.
    all zero) or LayerNorm gains that are all one.  Empty list = fine."""
    bad = []
    for name, p in model.named_parameters():
        v = p.detach().flatten()
        if v.numel() > 1 and float(v.std()) < 0.05:
            bad.append(f"{name} is nearly constant (std {float(v.std()):.3g})")
        if float(v.abs().max()) == 0:
            bad.append(f"{name} is zero")
    return bad


@torch.no_grad()
def attention_stats(model, ids, seg_len, mem_len=None, clamp_len=None,
                    same_length=None):
    """Run the reference on ids and return (mean over rows of the max
    attention probability, mean over rows of 1/visible keys): every head,
    layer and query counted once."""
    F = txl_ref.F
    orig = F.softmax
    maxes, uniform = [], []

    def spy(score, dim=None, **kw):
        prob = orig(score, dim=dim, **kw)
        vis = torch.isfinite(score).sum(dim=1)            # [qlen, bsz, n]
        maxes.append(prob.amax(dim=1).flatten())
        uniform.append((1.0 / vis.float()).flatten())
        return prob

    F.softmax = spy
    try:
        txl_ref.score_ids(model, ids, seg_len, mem_len, clamp_len,
                          same_length)
    finally:
        F.softmax = orig
    return float(torch.cat(maxes).mean()), float(torch.cat(uniform).mean())


@torch.no_grad()
def cluster_stats(model, ids, seg_len, **run):
    """Adaptive softmax: (mean probability of the tail clusters, mean
    absolute difference of the log-probs of two neighbouring clusters)
    over the positions of ids (the second is what a wrong order of the
    cluster logits would change a tail token's log-prob by).  None without
    cutoffs."""
    if not model.cfg.cutoffs:
        return None
    txl_ref._set_run(model, run.get("mem_len"), run.get("clamp_len"),
                     run.get("same_length"))
    hidden, _ = model.forward(torch.as_tensor(ids)[:seg_len, None])
    head = model.crit.head_log_probs(hidden[:, 0], torch.float64)
    tails = head[:, model.cfg.cutoffs[0]:]
    spread = (tails[:, 1:] - tails[:, :-1]).abs().mean() if \
        tails.size(1) > 1 else (tails[:, 0] - head[:, 0]).abs().mean()
    return float(tails.exp().sum(1).mean()), float(spread)


class RandomModel:
    """A built model: cfg, the reference module (with the stored weights),
    and the paths of its files."""

    def __init__(self, outdir, cfg, model, dtype):
        self.dir = outdir
        self.cfg = cfg
        self.model = model
        self.dtype = dtype
        self.path = os.path.join(outdir, "m.bin")
        self.state = os.path.join(outdir, "state.pt")
        self.config = os.path.join(outdir, "cfg.json")
        self.tokenizer = os.path.join(outdir, "tokenizer.model")

    def settings(self, seg_len=None, mem_len=None, clamp_len=None,
                 same_length=None):
        """Run-time settings with the model file's values as defaults
        (mem_len 0 for attn_type 2 and 3)."""
        c = self.cfg.hparams()
        return (c["tgt_len"] if seg_len is None else seg_len,
                c["mem_len"] if mem_len is None else mem_len,
                c["clamp_len"] if clamp_len is None else clamp_len,
                c["same_length"] if same_length is None else same_length)

    def score(self, ids, seg_len=None, mem_len=None, clamp_len=None,
              same_length=None, adapt=0.0, stride=None,
              mem_init=DEFAULT_MEM_INIT):
        """Reference log-probs (float64 list, len(ids)-1) of ids[1:] under
        the eval.py protocol with these settings (and dynamic evaluation
        of the output layer with learning rate adapt).  stride: the
        sliding-window protocol instead (txl_ref.score_windows: no memory,
        groups of stride ids, each after the up to seg_len - stride ids
        before it)."""
        s = self.settings(seg_len, mem_len, clamp_len, same_length)
        if stride is not None:
            return txl_ref.score_windows(self.model, ids, s[0], stride,
                                         s[2]).tolist()
        return txl_ref.score_ids(self.model, ids, *s, adapt_lr=adapt,
                                 mem_init=mem_init).tolist()

    def log_probs(self, hidden):
        """The full distribution [..., n_token] (float64) after hidden
        states of self.model.forward(): what sampling draws from, for
        every output layer (adaptive softmax included)."""
        return self.model.log_probs(hidden, torch.float64)

    def attention_stats(self, ids, **kw):
        return attention_stats(self.model, ids,
                               *self.settings(**kw))


def convert(cfg_path, state_path, tok_path, out_path, dtype="F32"):
    """Run models/convert.py as a user would; raise with its stderr."""
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
    r = subprocess.run([PYTHON, CONVERT, "--config", cfg_path, "--weights",
                        state_path, "--tokenizer", tok_path, "-o", out_path,
                        "--dtype", dtype], env=env, capture_output=True,
                       text=True)
    if r.returncode != 0:
        raise RuntimeError(f"convert.py failed ({r.returncode}): "
                           f"{r.stderr.strip()}")


def build(outdir, seed=0, dtype="F32", scale=1.0, tokenizer=TOKENIZER,
          do_convert=True, **config):
    """Build, save and convert a random model in outdir; return a
    RandomModel.  config: the make_config() arguments."""
    os.makedirs(outdir, exist_ok=True)
    cfg = make_config(tokenizer=tokenizer, **config)
    torch.manual_seed(seed)
    model = txl_ref.MemTransformerLM(cfg)
    randomize(model, seed=seed, scale=scale)
    round_weights(model, dtype)
    model.eval()
    rm = RandomModel(outdir, cfg, model, dtype)
    torch.save(model.state_dict(), rm.state)
    with open(rm.config, "w") as f:
        json.dump(cfg.hparams(), f, indent=1)
    with open(tokenizer, "rb") as src, open(rm.tokenizer, "wb") as dst:
        dst.write(src.read())
    if do_convert:
        convert(rm.config, rm.state, rm.tokenizer, rm.path, dtype)
    return rm


def random_ids(n, n_token, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, n_token, (n,), generator=g).tolist()


# Small models of every variant the original code builds besides attn_type 0
# with a full softmax (build(dir, **VARIANTS[name])), with the tests'
# tokenizer (320 pieces): uniform random ids then fall mostly into the tail
# clusters.
VARIANTS = {
    # adaptive softmax and input, div_val 1: one table, sliced per cluster
    "adaptive": dict(cutoffs=[40, 120]),
    "adaptive_proj": dict(cutoffs=[40, 120], d_embed=24,
                          tie_projs=[False, True, False], seed=1),
    # div_val > 1: a table and projection per cluster, tie_projs mixed
    "div2": dict(cutoffs=[40, 120], div_val=2, d_embed=48,
                 tie_projs=[False, True, True], seed=2),
    "div4_untied": dict(cutoffs=[20, 60, 200], div_val=4, d_embed=64,
                        tie_weight=False, tie_projs=[True, False, True,
                                                     False],
                        pre_lnorm=True, seed=3),
    "adaptive_same_clamp": dict(cutoffs=[100], div_val=2, tgt_len=6,
                                mem_len=12, clamp_len=5, same_length=True,
                                seed=4),
    # learned relative positions, memory and clamp_len cutting the tables
    "attn1": dict(attn_type=REL_LEARNED, seed=5),
    "attn1_pre_clamp": dict(attn_type=REL_LEARNED, pre_lnorm=True,
                            tgt_len=6, mem_len=10, clamp_len=7, seed=6),
    # the absolute kinds: no memory
    "attn2": dict(attn_type=ABS_SINUSOID, mem_len=0, clamp_len=6, seed=7),
    "attn3": dict(attn_type=ABS_LEARNED, mem_len=0, tgt_len=10,
                  pre_lnorm=True, cutoffs=[60], div_val=2, seed=8),
}


def _bool(s):
    if s.lower() in ("1", "true", "yes", "on"):
        return True
    if s.lower() in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"not a boolean: {s!r}")


def _ints(s):
    return [int(x) for x in s.split(",") if x.strip()]


def _bools(s):
    """One boolean or a comma-separated list of them."""
    v = [_bool(x) for x in s.split(",")]
    return v[0] if len(v) == 1 else v


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Build a random-weight Transformer-XL model file.")
    ap.add_argument("-o", "--outdir", required=True)
    ap.add_argument("--variant", choices=sorted(VARIANTS),
                    help="one of the VARIANTS (the options below are "
                    "ignored, but --seed, --dtype and --scale)")
    for name, default in (("n-layer", 2), ("n-head", 2), ("d-model", 32),
                          ("d-head", 16), ("d-inner", 64), ("tgt-len", 8),
                          ("mem-len", 8), ("clamp-len", -1),
                          ("attn-type", 0), ("div-val", 1)):
        ap.add_argument("--" + name, type=int, default=default)
    ap.add_argument("--d-embed", type=int, default=None)
    ap.add_argument("--max-klen", type=int, default=None)
    ap.add_argument("--cutoffs", type=_ints, default=[],
                    help="comma-separated, without n_token")
    ap.add_argument("--tie-projs", type=_bools, default=False,
                    metavar="BOOL[,BOOL...]",
                    help="one for every cluster, or one per cluster")
    for name, default in (("tie-weight", True), ("pre-lnorm", False),
                          ("untie-r", False), ("same-length", False)):
        ap.add_argument("--" + name, type=_bool, default=default,
                        metavar="BOOL")
    ap.add_argument("--dtype", default="F32", choices=txlfile.DTYPES,
                    type=txlfile.dtype_arg)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--tokenizer", default=TOKENIZER)
    ap.add_argument("--check", action="store_true",
                    help="print attention and parameter statistics")
    ap.add_argument("--score", metavar="IDS_FILE",
                    help="print reference log-probs of these ids")
    ap.add_argument("--seg-len", type=int)
    ap.add_argument("--stride", type=int,
                    help="score with sliding windows (score_windows)")
    ap.add_argument("--run-mem-len", type=int, help="run-time mem_len")
    ap.add_argument("--run-clamp-len", type=int, help="run-time clamp_len")
    ap.add_argument("--run-same-length", type=_bool, metavar="BOOL")
    a = ap.parse_args(argv)

    if a.variant:
        config = dict(VARIANTS[a.variant])
        seed = config.pop("seed", 0)
    else:
        config = dict(n_layer=a.n_layer, n_head=a.n_head, d_model=a.d_model,
                      d_head=a.d_head, d_inner=a.d_inner, d_embed=a.d_embed,
                      tie_weight=a.tie_weight, tie_projs=a.tie_projs,
                      pre_lnorm=a.pre_lnorm, untie_r=a.untie_r,
                      tgt_len=a.tgt_len, mem_len=a.mem_len,
                      clamp_len=a.clamp_len, same_length=a.same_length,
                      attn_type=a.attn_type, div_val=a.div_val,
                      cutoffs=a.cutoffs, max_klen=a.max_klen)
        seed = 0
    if a.seed is not None:
        seed = a.seed
    try:
        rm = build(a.outdir, seed=seed, dtype=a.dtype, scale=a.scale,
                   tokenizer=a.tokenizer, **config)
    except (ValueError, RuntimeError) as e:
        print(f"make_random_model.py: {e}", file=sys.stderr)
        return 1
    print(f"wrote {rm.path}", file=sys.stderr)
    run = dict(seg_len=a.seg_len, mem_len=a.run_mem_len,
               clamp_len=a.run_clamp_len, same_length=a.run_same_length)
    if a.check:
        for problem in check_params(rm.model):
            print("check:", problem, file=sys.stderr)
        ids = random_ids(64, rm.cfg.n_token, seed)
        mx, un = rm.attention_stats(ids, **run)
        print(f"attention: mean max prob {mx:.3f}, uniform would be "
              f"{un:.3f}", file=sys.stderr)
        s = rm.settings(**run)
        cs = cluster_stats(rm.model, ids, s[0], mem_len=s[1],
                           clamp_len=s[2], same_length=s[3])
        if cs:
            print(f"adaptive softmax: tail clusters hold {cs[0]:.3f} of the "
                  f"probability; neighbouring cluster log-probs differ by "
                  f"{cs[1]:.2f} on average", file=sys.stderr)
    if a.score:
        with open(a.score) as f:
            ids = [int(t) for t in f.read().split()]
        for i, lp in enumerate(rm.score(ids, stride=a.stride, **run)):
            print(json.dumps({"pos": i + 1, "id": ids[i + 1],
                              "logprob": lp}))
    return 0
