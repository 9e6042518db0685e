#!/usr/bin/python3
"""Random-weight Transformer-XL models for txlgen's tests.

Builds a models/txl_ref.py MemTransformerLM in which EVERY parameter is
random (matrices, biases, LayerNorm gains and biases, r_w_bias/r_r_bias),
with weights large enough that attention is far from uniform, saves
torch.save(state_dict) and a CFG.json with the original hyperparameter
names, converts them with models/convert.py run as a subprocess (the user's
path) into m.bin, and computes reference log-probs with txl_ref.score_ids.

As a module:

    rm = build(outdir, n_layer=2, d_model=32, pre_lnorm=True, dtype="F16")
    lp = rm.score(ids, seg_len=8, mem_len=16, clamp_len=0, same_length=False)

As a program:

    make_random_model.py -o DIR [--n-layer 2 --d-model 32 ...] [--dtype F16]
        writes DIR/m.bin, DIR/state.pt, DIR/cfg.json, DIR/tokenizer.model
    make_random_model.py -o DIR ... --score IDS_FILE [--seg-len T ...]
        also prints the reference log-probs as txlgen --json does
        ({"pos": i, "id": t, "logprob": x} per predicted token)
    make_random_model.py -o DIR ... --check
        prints the attention statistics (mean max probability per row
        against the uniform 1/keys) and the parameter check

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

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODELS = os.path.join(ROOT, "models")
DATA = os.path.join(HERE, "data")
TOKENIZER = os.path.join(DATA, "spm.model")
CONVERT = os.path.join(MODELS, "convert.py")
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") \
    else sys.executable

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
sys.path.insert(0, MODELS)

import torch                                   # noqa: E402
import txl_ref                                 # noqa: E402
import txlfile                                 # noqa: E402

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
                tokenizer=TOKENIZER):
    if n_token is None:
        n_token = vocab_size(tokenizer)
    return txl_ref.TxlConfig(
        n_token=n_token, n_layer=n_layer, n_head=n_head, d_model=d_model,
        d_head=d_head, d_inner=d_inner, d_embed=d_embed,
        tie_weight=tie_weight, tie_projs=[bool(tie_projs)],
        pre_lnorm=pre_lnorm, untie_r=untie_r, tgt_len=tgt_len,
        mem_len=mem_len, clamp_len=clamp_len, same_length=same_length)


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
    Parameter names are the original MemTransformerLM's, so this works on
    the original code's model too (pass its TxlConfig as cfg).
    """
    cfg = cfg or model.cfg
    g = torch.Generator().manual_seed(seed)
    M, E = cfg.d_model, cfg.d_embed
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
            elif name == "word_emb.emb_layers.0.weight":
                # scaled by sqrt(d_model) at the input: entries of std ~2
                # (~1 with pre_lnorm)
                normal(p, 0.0, emb_gain * scale / math.sqrt(M))
            elif name == "word_emb.emb_projs.0":
                normal(p, 0.0, 1.0 / math.sqrt(E))
            elif name == "crit.out_projs.0":
                normal(p, 0.0, 1.0 / math.sqrt(M))
            elif name == "crit.out_layers.0.weight":
                normal(p, 0.0, 2.0 * scale / math.sqrt(E))
            elif name == "crit.out_layers.0.bias":
                normal(p, 0.0, 1.0 * scale)
            elif name.endswith("qkv_net.weight") or \
                    name.endswith("r_net.weight"):
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
        """Run-time settings with the model's values as defaults."""
        c = self.cfg
        return (c.tgt_len if seg_len is None else seg_len,
                c.mem_len if mem_len is None else mem_len,
                c.clamp_len if clamp_len is None else clamp_len,
                c.same_length if same_length is None else same_length)

    def score(self, ids, seg_len=None, mem_len=None, clamp_len=None,
              same_length=None, adapt=0.0):
        """Reference log-probs (float64 list, len(ids)-1) of ids[1:] under
        the eval.py protocol with these settings (and dynamic evaluation
        of the output layer with learning rate adapt)."""
        s = self.settings(seg_len, mem_len, clamp_len, same_length)
        return txl_ref.score_ids(self.model, ids, *s,
                                 adapt_lr=adapt).tolist()

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


def _bool(s):
    if s.lower() in ("1", "true", "yes", "on"):
        return True
    if s.lower() in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"not a boolean: {s!r}")


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Build a random-weight Transformer-XL model file.")
    ap.add_argument("-o", "--outdir", required=True)
    for name, default in (("n-layer", 2), ("n-head", 2), ("d-model", 32),
                          ("d-head", 16), ("d-inner", 64), ("tgt-len", 8),
                          ("mem-len", 8), ("clamp-len", -1)):
        ap.add_argument("--" + name, type=int, default=default)
    ap.add_argument("--d-embed", type=int, default=None)
    for name, default in (("tie-weight", True), ("tie-projs", False),
                          ("pre-lnorm", False), ("untie-r", False),
                          ("same-length", False)):
        ap.add_argument("--" + name, type=_bool, default=default,
                        metavar="BOOL")
    ap.add_argument("--dtype", default="F32", choices=txlfile.DTYPES)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--tokenizer", default=TOKENIZER)
    ap.add_argument("--check", action="store_true",
                    help="print attention and parameter statistics")
    ap.add_argument("--score", metavar="IDS_FILE",
                    help="print reference log-probs of these ids")
    ap.add_argument("--seg-len", type=int)
    ap.add_argument("--run-mem-len", type=int, help="run-time mem_len")
    ap.add_argument("--run-clamp-len", type=int, help="run-time clamp_len")
    ap.add_argument("--run-same-length", type=_bool, metavar="BOOL")
    a = ap.parse_args(argv)

    rm = build(a.outdir, seed=a.seed, dtype=a.dtype, scale=a.scale,
               tokenizer=a.tokenizer, n_layer=a.n_layer, n_head=a.n_head,
               d_model=a.d_model, d_head=a.d_head, d_inner=a.d_inner,
               d_embed=a.d_embed, tie_weight=a.tie_weight,
               tie_projs=a.tie_projs, pre_lnorm=a.pre_lnorm,
               untie_r=a.untie_r, tgt_len=a.tgt_len, mem_len=a.mem_len,
               clamp_len=a.clamp_len, same_length=a.same_length)
    print(f"wrote {rm.path}", file=sys.stderr)
    run = dict(seg_len=a.seg_len, mem_len=a.run_mem_len,
               clamp_len=a.run_clamp_len, same_length=a.run_same_length)
    if a.check:
        for problem in check_params(rm.model):
            print("check:", problem, file=sys.stderr)
        ids = random_ids(64, rm.cfg.n_token, a.seed)
        mx, un = rm.attention_stats(ids, **run)
        print(f"attention: mean max prob {mx:.3f}, uniform would be "
              f"{un:.3f}", file=sys.stderr)
    if a.score:
        with open(a.score) as f:
            ids = [int(t) for t in f.read().split()]
        for i, lp in enumerate(rm.score(ids, **run)):
            print(json.dumps({"pos": i + 1, "id": ids[i + 1],
                              "logprob": lp}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
