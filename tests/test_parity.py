#!/usr/bin/python3
"""Parity of txlgen with the PyTorch reference (models/txlgen/txl_ref.py).

Random-weight models (tests/make_random_model.py: every parameter random,
attention far from uniform) are converted with models/convert.py and
scored with

  txlgen --model m.bin --score IDS --ids --json [--seg-len T --mem-len M
         --same-length|--no-same-length --clamp-len C]

Every per-token log-prob must be within TOL = 1e-4 of the reference's
(txl_ref.score_ids, the original eval.py protocol), over many segments with
the memory carried, token by token, with a memory longer than training,
same_length on and off, clamp_len, pre_lnorm, per-layer biases, d_embed !=
d_model (projections, tied or not), tied and untied output weights, and
F16/BF16/Q8_0 storage (and the memory in F16 or BF16, TestKvType, with
a tolerance it argues).  For those the builder rounds the weights to their
stored values before saving, so the reference computes with exactly the
stored weights and the tolerance stays 1e-4 (TestFormats argues it),
except for Q8_0 one token at a time, where txlgen quantizes the
activations as well (TestQ8Activations argues that tolerance).  The summary line (mean NLL, perplexity, bits
per byte) is checked against values computed here.  Generation
(`txlgen --text P -n N --json`, greedy and sampled) is checked by letting
the reference follow txlgen's tokens: same log-probs, greedy = argmax.

Every other model the original code builds (the variants of
make_random_model.VARIANTS: adaptive input and softmax with div_val 1, 2
and 4 and tie_projs mixed, attn_type 1 with memory, attn_type 2 and 3
without) is held to the same 1e-4: with memory over many segments and
token by token; without memory in eval.py's segments and in windows
recomputed for every token (--score-stride 1) or every few
(txl_ref.score_windows, the window protocol of txl_session_params.stride);
and in generation, where an adaptive softmax is sampled cluster by
cluster.

The txlgen binary: $TXLGEN (set by meson test), else build/cmd/txlgen.
Run:  TXLGEN=build/cmd/txlgen /usr/bin/python3 \\
      tests/test_parity.py -v
Set TXL_PARITY_REPORT=1 to print the max difference of every case.
"""

import codecs
import json
import math
import os
import shutil
import subprocess
import tempfile
import unittest
from concurrent.futures import ThreadPoolExecutor

import srctree  # noqa: F401 (models/ on sys.path)
import clitest
from txlgen import random_model as mrm, txlfile
from txlgen.conventions import (LAYER_NORM_EPS, MEMORY_KINDS, REL_LEARNED,
                                REL_PARTIAL)

TOL = 1e-4
N_TOKENS = 150          # tokens scored per case (149 predictions)


TXLGEN = mrm.find_program("TXLGEN", "cmd", "txlgen")

# name -> make_config() arguments.  Small: d_model 32-64, 2-3 layers,
# vocabulary 320 (tests/data/spm.model).
CONFIGS = {
    "base": dict(),                                  # post-LN, tied, shared
    "pre_untie": dict(pre_lnorm=True, untie_r=True, n_layer=3),
    "proj_untied": dict(d_embed=24, tie_weight=False, tie_projs=False),
    "proj_tied": dict(d_embed=48, tie_weight=True, tie_projs=True,
                      pre_lnorm=True, untie_r=True),
    "wide": dict(d_model=64, n_head=4, d_head=12, d_inner=96, tgt_len=6,
                 mem_len=12, clamp_len=5, same_length=True, seed=3),
    "f16": dict(dtype="F16", seed=1),
    "bf16": dict(dtype="BF16", pre_lnorm=True, untie_r=True, d_embed=40,
                 tie_weight=False, seed=2),
    # compact formats (TestFormats below); d_embed 40 is not a multiple
    # of 32: that embedding is stored F16, the projections F32
    "q8_0": dict(dtype="Q8_0", seed=4),
    "q8_0_proj": dict(dtype="Q8_0", d_model=64, n_head=2, d_head=32,
                      d_inner=64, d_embed=40, tie_weight=False,
                      pre_lnorm=True, seed=5),
    "q4_0": dict(dtype="Q4_0", seed=7),
    "q4_0_proj": dict(dtype="Q4_0", d_model=64, n_head=2, d_head=32,
                      d_inner=64, d_embed=40, tie_weight=False,
                      pre_lnorm=True, seed=8),
    # the adaptive input and softmax in Q4_0: clusters 64, 32 and 16
    # wide (the last stored F16)
    "q4_0_adaptive": dict(dtype="Q4_0", cutoffs=[40, 120], div_val=2,
                          d_embed=64, tie_projs=[False, True, True],
                          seed=9),
    # how the TensorFlow code computes (TestTFCompute): its same_length
    # mask (one key more) and LayerNorm epsilon, on a full and an
    # adaptive softmax; a large epsilon (pre- and post-LayerNorm) to show
    # that the model's own is used
    "tf_mask": dict(same_length=True, same_length_mask="tf",
                    layer_norm_eps=LAYER_NORM_EPS["tensorflow"], tgt_len=6,
                    mem_len=12,
                    clamp_len=5, seed=10),
    "tf_mask_adaptive": dict(cutoffs=[20, 60, 200], div_val=2, d_embed=32,
                             tie_projs=[False, True, True, True],
                             same_length=True, same_length_mask="tf",
                             layer_norm_eps=LAYER_NORM_EPS["tensorflow"],
                             untie_r=True, tgt_len=5,
                             mem_len=10, seed=11),
    "tf_eps": dict(layer_norm_eps=0.25, seed=12),
    "tf_eps_pre": dict(layer_norm_eps=0.25, pre_lnorm=True, untie_r=True,
                       seed=13),
    # d_head 32, F32 weights: a memory in Q8_0 blocks (TestKvType)
    "head32": dict(d_model=64, n_head=2, d_head=32, d_inner=96, tgt_len=6,
                   mem_len=12, clamp_len=5, same_length=True, seed=6),
}
# Every other model the original code builds: the adaptive
# input and softmax (div_val 1 with and without projection, 2 and 4 with
# tie_projs mixed, with same_length and clamp_len), attn_type 1 with
# memory, attn_type 2 and 3 without: make_random_model.VARIANTS.
VARIANTS = getattr(mrm, "VARIANTS", {})
CONFIGS.update(VARIANTS)
MEMORY_VARIANTS = [k for k, v in VARIANTS.items()
                   if v.get("attn_type", REL_PARTIAL) in MEMORY_KINDS]
VANILLA_VARIANTS = [k for k, v in VARIANTS.items()
                    if v.get("attn_type", REL_PARTIAL) not in MEMORY_KINDS]

_tmp = None
_models = {}
_report = []


def setUpModule():
    global _tmp
    if TXLGEN is None:
        raise unittest.SkipTest("no txlgen binary (set TXLGEN)")
    if not os.access(TXLGEN, os.X_OK):
        raise RuntimeError(f"TXLGEN={TXLGEN} is not an executable")
    _tmp = tempfile.mkdtemp(prefix="txl-parity-")
    unittest.addModuleCleanup(shutil.rmtree, _tmp, ignore_errors=True)
    for name, kw in CONFIGS.items():
        kw = dict(kw)
        _models[name] = mrm.build(os.path.join(_tmp, name),
                                  do_convert=False, **kw)
    # The converter runs as a subprocess (the user's path); two at a time.
    with ThreadPoolExecutor(2) as ex:
        for f in [ex.submit(mrm.convert, m.config, m.state, m.tokenizer,
                            m.path, m.dtype) for m in _models.values()]:
            f.result()


def tearDownModule():
    clitest.parity_report(_report)


def txlgen_score(model_path, input_path, ids=True, seg_len=None,
                 mem_len=None, clamp_len=None, same_length=None,
                 adapt=None, stride=None, mem_init=None, extra=()):
    """Run txlgen --score --json; return (records, summary, argv)."""
    argv = [TXLGEN, "--model", model_path, "--score", input_path, "--json"]
    if ids:
        argv.append("--ids")
    if stride is not None:
        argv += ["--score-stride", str(stride)]
    if seg_len is not None:
        argv += ["--seg-len", str(seg_len)]
    if mem_len is not None:
        argv += ["--mem-len", str(mem_len)]
    if clamp_len is not None:
        argv += ["--clamp-len", str(clamp_len)]
    if same_length is not None:
        argv.append("--same-length" if same_length else "--no-same-length")
    if adapt is not None:
        argv += ["--adapt", repr(adapt)]
    if mem_init is not None:
        argv += ["--mem-init", mem_init]
    argv += list(extra)
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, OMP_WAIT_POLICY="PASSIVE"))
    if r.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} exited {r.returncode}: "
                             f"{r.stderr.strip()[-2000:]}")
    records, summary = [], None
    for n, line in enumerate(r.stdout.splitlines()):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            raise AssertionError(f"{' '.join(argv)}: stdout line {n + 1} is "
                                 f"not JSON: {line[:200]!r}")
        if summary is not None:
            raise AssertionError(f"{' '.join(argv)}: output after the "
                                 f"summary object: {line[:200]!r}")
        if "pos" in obj:
            records.append(obj)
        else:
            summary = obj
    if summary is None:
        raise AssertionError(f"{' '.join(argv)}: no summary object")
    return records, summary, argv


def summary_value(summary, *names):
    for n in names:
        if n in summary:
            return float(summary[n])
    raise AssertionError(f"summary {summary} has none of {names}")


class ParityCase(unittest.TestCase):
    def write_ids(self, ids):
        fd, path = tempfile.mkstemp(suffix=".ids", dir=_tmp)
        with os.fdopen(fd, "w") as f:
            # several lines and odd spacing: whitespace-separated is the spec
            for k in range(0, len(ids), 20):
                f.write("  ".join(map(str, ids[k:k + 20])) + "\n")
        return path

    def compare(self, name, n=N_TOKENS, seed=0, label=None, extra=(),
                **settings):
        """Score n random ids with txlgen (extra: more of its flags) and
        the reference; assert parity and return txlgen's log-probs."""
        m = _models[name]
        ids = mrm.random_ids(n, m.cfg.n_token, seed)
        path = self.write_ids(ids)
        records, summary, argv = txlgen_score(m.path, path, extra=extra,
                                              **settings)
        ref = m.score(ids, **settings)
        cmd = " ".join(argv[1:])
        self.assertEqual(len(records), len(ids) - 1,
                         f"{cmd}: {len(records)} records for {len(ids)} ids")
        got = []
        for k, rec in enumerate(records):
            self.assertEqual(rec["pos"], k + 1, f"{cmd}: record {k}: {rec}")
            self.assertEqual(rec["id"], ids[k + 1], f"{cmd}: record {k}")
            got.append(float(rec["logprob"]))
        diffs = [abs(a - b) for a, b in zip(got, ref)]
        worst = max(range(len(diffs)), key=diffs.__getitem__)
        _report.append(f"{label or self.id().split('.')[-1]:<34} "
                       f"{name:<12} {diffs[worst]:.2e}  ({cmd})")
        self.assertLessEqual(
            diffs[worst], TOL,
            f"\nconfig {name}: {m.cfg}\ncommand: {cmd}\nmax |diff| "
            f"{diffs[worst]:.3g} at pos {worst + 1} (txlgen {got[worst]:.6f}"
            f", reference {ref[worst]:.6f}); "
            f"{sum(d > TOL for d in diffs)} of {len(diffs)} above {TOL}")
        self.check_summary(summary, got, ids, cmd)
        return got

    def check_summary(self, summary, got, ids, cmd):
        """The summary object: counts, mean NLL, perplexity, and bits per
        byte consistent with the byte count it reports."""
        nll = -sum(got) / len(got)
        mean_nll = summary_value(summary, "nll", "mean_nll")
        self.assertAlmostEqual(mean_nll, nll, delta=1e-6 * max(1, nll),
                               msg=f"{cmd}: summary {summary}")
        ppl = summary_value(summary, "ppl", "perplexity")
        self.assertLess(abs(ppl - math.exp(nll)), 1e-5 * math.exp(nll),
                        f"{cmd}: summary {summary}")
        self.assertEqual(summary_value(summary, "predicted"), len(ids) - 1,
                         f"{cmd}: summary {summary}")
        self.assertEqual(summary_value(summary, "tokens"), len(ids),
                         f"{cmd}: summary {summary}")
        nbytes = summary_value(summary, "bytes")
        bpb = summary_value(summary, "bpb", "bits_per_byte")
        self.assertGreater(nbytes, 0, f"{cmd}: summary {summary}")
        want = nll * len(got) / math.log(2) / nbytes
        self.assertAlmostEqual(bpb, want, delta=1e-6 * want,
                               msg=f"{cmd}: summary {summary}")
        return nbytes, bpb


class TestModelFile(unittest.TestCase):
    """The models are what they claim: every parameter random, attention
    far from uniform (so a wrong mask or position cannot hide)."""

    def test_parameters_random(self):
        for name, m in _models.items():
            self.assertEqual(mrm.check_params(m.model), [], name)

    def test_attention_peaked(self):
        m = _models["base"]
        ids = mrm.random_ids(64, m.cfg.n_token)
        mx, uniform = m.attention_stats(ids, seg_len=8, mem_len=16)
        self.assertGreater(mx, 4 * uniform)
        self.assertGreater(mx, 0.4)

    def test_settings_matter(self):
        """The reference itself distinguishes the settings tested below,
        so that agreeing on each of them means something."""
        m = _models["base"]
        ids = mrm.random_ids(N_TOKENS, m.cfg.n_token)
        base = m.score(ids, seg_len=8, mem_len=16)
        for kw in (dict(seg_len=8, mem_len=16, same_length=True),
                   dict(seg_len=8, mem_len=16, clamp_len=3),
                   dict(seg_len=8, mem_len=40),
                   dict(seg_len=1, mem_len=16),
                   dict(seg_len=8, mem_len=0)):
            other = m.score(ids, **kw)
            self.assertGreater(max(abs(a - b) for a, b in
                                   zip(base, other)), 0.1, kw)


class TestParity(ParityCase):
    def test_segments_with_memory(self):
        # 149 predictions in segments of 8: 19 segments, memory carried
        self.compare("base", seg_len=8, mem_len=8, same_length=False,
                     clamp_len=0)

    def test_model_defaults(self):
        # no run-time flags: tgt_len 8, mem_len 8, no clamp, no same_length
        self.compare("base")

    def test_uneven_last_segment(self):
        self.compare("base", n=100, seed=7, seg_len=7,
                     mem_len=5)

    def test_no_memory(self):
        self.compare("base", seg_len=8, mem_len=0, same_length=False)

    def test_token_by_token(self):
        self.compare("base", seg_len=1, mem_len=8)

    def test_token_by_token_long_memory(self):
        self.compare("base", seg_len=1, mem_len=40)

    def test_memory_longer_than_training(self):
        self.compare("base", seg_len=8, mem_len=40)

    # Segments of up to 8 queries attend in blocks of whole 256 keys, two
    # per thread, merged (txl-attn-few.c): with 4 threads and 2
    # heads, memories of 3 blocks, same_length masking the first keys,
    # clamp_len reached inside a block.
    def test_token_by_token_memory_of_blocks(self):
        self.compare("base", n=700, seg_len=1, mem_len=600, clamp_len=300,
                     same_length=True, extra=["--threads", "4"])

    def test_few_queries_memory_of_blocks(self):
        self.compare("base", n=700, seg_len=5, mem_len=520,
                     extra=["--threads", "4"])

    # Segments of more than 8 queries: one pool task a layer, units of one
    # head and 32 queries (txl-attn-seg.c); 80 queries make
    # blocks of 32, 32 and 16, which 3 threads take in any order.
    def test_long_segments_over_threads(self):
        self.compare("base", n=300, seg_len=80, mem_len=50, clamp_len=30,
                     same_length=True, extra=["--threads", "3"])

    def test_segment_longer_than_training(self):
        self.compare("base", seg_len=32, mem_len=24)

    def test_same_length(self):
        self.compare("base", seg_len=8, mem_len=16, same_length=True)

    def test_same_length_memory_shorter_than_segment(self):
        self.compare("base", seg_len=8, mem_len=5, same_length=True)

    def test_same_length_token_by_token(self):
        self.compare("base", seg_len=1, mem_len=16, same_length=True)

    def test_same_length_segmentation_invariant(self):
        """With same_length every position sees the same window, so
        segment-wise scoring equals token-by-token generation."""
        a = self.compare("base", seg_len=8, mem_len=16, same_length=True)
        b = self.compare("base", seg_len=3, mem_len=16, same_length=True)
        self.assertLessEqual(max(abs(x - y) for x, y in zip(a, b)), TOL)

    def test_clamp_len(self):
        self.compare("base", seg_len=8, mem_len=16, clamp_len=3)

    def test_clamp_len_token_by_token(self):
        self.compare("base", seg_len=1, mem_len=20, clamp_len=6,
                     same_length=True)

    def test_pre_lnorm_untie_r(self):
        self.compare("pre_untie", seg_len=8, mem_len=8)

    def test_pre_lnorm_untie_r_token_by_token(self):
        self.compare("pre_untie", seg_len=1, mem_len=24, same_length=True)

    def test_pre_lnorm_untie_r_clamp(self):
        self.compare("pre_untie", seg_len=5, mem_len=30, clamp_len=4)

    def test_projection_untied(self):
        self.compare("proj_untied", seg_len=8, mem_len=8)

    def test_projection_untied_token_by_token(self):
        self.compare("proj_untied", seg_len=1, mem_len=12)

    def test_projection_tied(self):
        self.compare("proj_tied", seg_len=8, mem_len=16, same_length=True)

    def test_projection_tied_token_by_token(self):
        self.compare("proj_tied", seg_len=1, mem_len=10)

    def test_wide_model_defaults(self):
        # model defaults: tgt_len 6, mem_len 12, clamp_len 5, same_length
        self.compare("wide")

    def test_wide_overrides(self):
        self.compare("wide", seg_len=9, mem_len=20, clamp_len=0,
                     same_length=False)

    def test_f16(self):
        self.compare("f16", seg_len=8, mem_len=16)

    def test_f16_token_by_token(self):
        self.compare("f16", seg_len=1, mem_len=16, same_length=True)

    def test_bf16(self):
        self.compare("bf16", seg_len=8, mem_len=16, clamp_len=5)

    def test_bf16_token_by_token(self):
        self.compare("bf16", seg_len=1, mem_len=16)


class TestTFCompute(ParityCase):
    """The TensorFlow code's conventions a model file can ask for
    (txlgen-model(5)): same_length_mask "tf", a query seeing the last
    mem_len + 1 positions, on the segment path (threads too), token by
    token (the few-query path), with a memory shorter than a segment;
    and layer_norm_eps, the LayerNorms' epsilon.  Each against txl_ref
    with the same switch; each switch moves the reference's log-probs by
    far more than TOL, so that txlgen ignoring it would fail."""

    def moved(self, name, switch, off, **settings):
        """The reference with the model's switch set back to the PyTorch
        code's differs from it by more than 100 TOL."""
        m = _models[name]
        ids = mrm.random_ids(N_TOKENS, m.cfg.n_token, 0)
        on = m.score(ids, **settings)
        old = switch(m.model, off)
        try:
            plain = m.score(ids, **settings)
        finally:
            switch(m.model, old)
        self.assertGreater(max(abs(a - b) for a, b in zip(on, plain)),
                           100 * TOL, f"{name}: the switch changes nothing")

    @staticmethod
    def mask(model, v):
        old, model.cfg.same_length_mask = model.cfg.same_length_mask, v
        return old

    @staticmethod
    def eps(model, v):
        import torch
        norms = [x for x in model.modules()
                 if isinstance(x, torch.nn.LayerNorm)]
        old = norms[0].eps
        for x in norms:
            x.eps = v
        return old

    def test_mask_matters(self):
        self.moved("tf_mask", self.mask, "pytorch", seg_len=6, mem_len=12)
        self.moved("tf_mask_adaptive", self.mask, "pytorch", seg_len=5,
                   mem_len=10)

    def test_eps_matters(self):
        self.moved("tf_eps", self.eps, LAYER_NORM_EPS["pytorch"])
        self.moved("tf_eps_pre", self.eps, LAYER_NORM_EPS["pytorch"])

    def test_mask_model_defaults(self):
        self.compare("tf_mask")

    def test_mask_segments(self):
        self.compare("tf_mask", seg_len=8, mem_len=16, same_length=True)

    def test_mask_segments_threads(self):
        self.compare("tf_mask", seg_len=16, mem_len=24, same_length=True,
                     extra=["--threads", "3"])

    def test_mask_token_by_token(self):
        self.compare("tf_mask", seg_len=1, mem_len=16, same_length=True)

    def test_mask_few_queries(self):
        self.compare("tf_mask", seg_len=3, mem_len=16, same_length=True)

    def test_mask_memory_shorter_than_segment(self):
        self.compare("tf_mask", seg_len=8, mem_len=5, same_length=True)

    def test_mask_adaptive(self):
        self.compare("tf_mask_adaptive")
        self.compare("tf_mask_adaptive", seg_len=1, mem_len=10)

    def test_mask_off(self):
        # without same_length the mask is the causal one either way
        self.compare("tf_mask", seg_len=6, mem_len=12, same_length=False)

    def test_eps(self):
        self.compare("tf_eps", seg_len=8, mem_len=8)
        self.compare("tf_eps", seg_len=1, mem_len=8)

    # the memory started as mem_len zero states (--mem-init zeros), as
    # the TF evaluation and Hugging Face's init_mems start it
    def test_zeros(self):
        self.compare("base", seg_len=8, mem_len=16, mem_init="zeros")
        self.moved_zeros("base", seg_len=8, mem_len=16)

    def test_zeros_token_by_token(self):
        self.compare("base", seg_len=1, mem_len=16, same_length=True,
                     mem_init="zeros")

    def test_zeros_few_queries_threads(self):
        self.compare("wide", seg_len=3, mem_len=40, mem_init="zeros",
                     extra=["--threads", "3"])

    def test_zeros_tf_mask(self):
        # the TF evaluation: its mask over a memory of zeros
        self.compare("tf_mask", mem_init="zeros")
        self.compare("tf_mask_adaptive", seg_len=1, mem_len=10,
                     mem_init="zeros")

    def test_zeros_memory_shorter_than_segment(self):
        self.compare("tf_mask", seg_len=8, mem_len=5, same_length=True,
                     mem_init="zeros")

    def test_zeros_learnable_positions(self):
        self.compare("attn1", seg_len=4, mem_len=8, mem_init="zeros")

    def test_batch_generation(self):
        """--n-samples: the samples stepped together in one batch (the
        few-query path of several streams), each sample's every token
        the reference's log-prob given its history, with the TF mask and
        the memory started as zeros."""
        import sentencepiece as spm
        import torch
        from txlgen import txl_ref
        m = _models["tf_mask_adaptive"]
        sp = spm.SentencePieceProcessor(model_file=m.tokenizer)
        prompt = "The lighthouse keeper wrote in his log every evening"
        pids = sp.encode(prompt)
        argv = [TXLGEN, "--model", m.path, "--text", prompt, "-n", "25",
                "--temp", "2", "--top-k", "0", "--top-p", "1", "--min-p",
                "0", "--json", "--seed", "1", "--seg-len", "4",
                "--mem-len", "10", "--same-length", "--mem-init", "zeros",
                "--ignore-eos", "--n-samples", "3", "--threads", "2"]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, OMP_WAIT_POLICY="PASSIVE"))
        self.assertEqual(r.returncode, 0, r.stderr)
        gen = {}
        for line in r.stdout.splitlines():
            obj = json.loads(line)
            if "logprob" in obj and "id" in obj:
                gen.setdefault(obj["sample"], []).append(
                    (int(obj["id"]), float(obj["logprob"])))
        self.assertEqual(sorted(gen), [0, 1, 2])
        model = m.model
        model.mem_len, model.same_length = 10, True
        model.clamp_len = m.cfg.clamp_len
        with torch.no_grad():
            for s, toks in gen.items():
                self.assertEqual(len(toks), 25)
                mems = txl_ref.init_mems(model)
                for s0 in range(0, len(pids), 4):
                    h, mems = model.forward(
                        torch.tensor(pids[s0:s0 + 4])[:, None], mems)
                for k, (tok, lp) in enumerate(toks):
                    ref = float(m.log_probs(h[-1:])[0, 0, tok])
                    self.assertLessEqual(abs(ref - lp), TOL,
                                         f"sample {s} token {k}")
                    h, mems = model.forward(torch.tensor([[tok]]), mems)

    def moved_zeros(self, name, **settings):
        m = _models[name]
        ids = mrm.random_ids(N_TOKENS, m.cfg.n_token, 0)
        a = m.score(ids, mem_init="zeros", **settings)
        b = m.score(ids, **settings)
        self.assertGreater(abs(a[0] - b[0]), 100 * TOL)

    def test_eps_pre_lnorm(self):
        self.compare("tf_eps_pre", seg_len=8, mem_len=16, same_length=True)
        self.compare("tf_eps_pre", seg_len=1, mem_len=16)


class TestAdapt(ParityCase):
    """--adapt: dynamic evaluation of the output layer, against
    txl_ref.score_ids(adapt_lr=...)."""

    def adapted(self, name, lr, **settings):
        got = self.compare(name, n=300, adapt=lr, **settings)
        plain = _models[name].score(
            mrm.random_ids(300, _models[name].cfg.n_token, 0), **settings)
        # the adaptation changed the predictions well beyond TOL
        self.assertGreater(max(abs(a - b) for a, b in zip(got, plain)),
                           100 * TOL)
        return got

    def test_tied(self):
        # the output layer shares its weight with the input embedding:
        # only the output's copy may change
        self.adapted("base", 0.5, seg_len=8, mem_len=8)

    def test_projection(self):
        self.adapted("proj_untied", 0.5, seg_len=8, mem_len=16)

    def test_projection_tied(self):
        self.adapted("proj_tied", 0.5, seg_len=5, mem_len=10,
                     same_length=True)

    def test_token_by_token(self):
        self.adapted("base", 0.2, seg_len=1, mem_len=16)

    def test_zero_is_off(self):
        self.assertEqual(self.compare("base", seg_len=8, mem_len=8,
                                      adapt=0.0),
                         self.compare("base", seg_len=8, mem_len=8))


class TestVariants(ParityCase):
    """Every variant the original code builds against txl_ref (which
    tools/check_original.py holds against the original code): with memory
    over many segments, token by token, with settings other than the
    model's; without memory (attn_type 2, 3) segment by segment as eval.py
    does with mem_len 0, and in windows of seg_len tokens recomputed for
    every token (--score-stride 1, the vanilla Transformer's evaluation in
    the Transformer-XL paper) or every few."""

    def setUp(self):
        if not VARIANTS:
            self.skipTest("tests/make_random_model.py builds no variants")

    def each(self, names, **settings):
        for name in names:
            with self.subTest(name):
                self.compare(name, **settings)

    def test_memory_model_defaults(self):
        self.each(MEMORY_VARIANTS)

    def test_memory_segments(self):
        self.each(MEMORY_VARIANTS, seg_len=5, mem_len=7, same_length=False)

    def test_memory_token_by_token(self):
        self.each(MEMORY_VARIANTS, seg_len=1, mem_len=12)

    def test_memory_same_length_clamp(self):
        self.each(MEMORY_VARIANTS, seg_len=6, mem_len=10, same_length=True,
                  clamp_len=4)

    def test_learnable_past_the_table(self):
        # keys beyond max_klen positions: the table's first row
        attn1 = [k for k in MEMORY_VARIANTS if
                 VARIANTS[k].get("attn_type") == REL_LEARNED]
        self.assertTrue(attn1)
        for name in attn1:
            mem = 3 * _models[name].cfg.max_klen
            with self.subTest(name):
                self.compare(name, seg_len=8, mem_len=mem, clamp_len=0)

    def test_learnable_memory_of_blocks(self):
        # the few-query path's blocks with the learned tables, cut by clamp_len
        attn1 = [k for k in MEMORY_VARIANTS if
                 VARIANTS[k].get("attn_type") == REL_LEARNED]
        for name in attn1:
            with self.subTest(name):
                self.compare(name, n=600, seg_len=1, mem_len=530,
                             clamp_len=270, same_length=True,
                             extra=["--threads", "4"])

    def test_tails_matter(self):
        """The targets fall into tail clusters and the clusters' head
        entries differ, so that a wrong cluster order cannot hide."""
        for name in MEMORY_VARIANTS + VANILLA_VARIANTS:
            m = _models[name]
            if not m.cfg.cutoffs:
                continue
            ids = mrm.random_ids(64, m.cfg.n_token)
            tails = sum(t >= m.cfg.cutoffs[0] for t in ids)
            self.assertGreater(tails, len(ids) // 3, name)
            _, spread = mrm.cluster_stats(m.model, ids, 8)
            self.assertGreater(spread, 1000 * TOL, name)

    def test_vanilla_segments(self):
        # no flags: eval.py's segments, no memory
        self.each(VANILLA_VARIANTS)
        self.each(VANILLA_VARIANTS, seg_len=6)

    def test_vanilla_windows(self):
        self.each(VANILLA_VARIANTS, stride=1)
        self.each(VANILLA_VARIANTS, seg_len=6, stride=4)

    def test_vanilla_windows_clamp(self):
        self.each(VANILLA_VARIANTS, stride=2, clamp_len=3)

    def txlgen(self, name, *argv):
        """txlgen --score of 20 random ids with model `name`: rc, out, err."""
        m = _models[name]
        path = self.write_ids(mrm.random_ids(20, m.cfg.n_token))
        r = subprocess.run([TXLGEN, "--model", m.path, "--score", path,
                            "--ids", *argv], capture_output=True,
                           text=True, timeout=60,
                           env=dict(os.environ, OMP_WAIT_POLICY="PASSIVE"))
        return r.returncode, r.stdout, r.stderr

    def refused(self, name, argv, *words):
        """Refused before anything is scored: usage error (2), nothing on
        stdout, one line on stderr with these words."""
        rc, out, err = self.txlgen(name, *argv)
        self.assertEqual((rc, out), (2, ""), f"{name} {argv}: {err}")
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        for w in words:
            self.assertIn(w, err, f"{name} {argv}")

    def test_refusals(self):
        for name in VANILLA_VARIANTS:
            with self.subTest(name):
                self.refused(name, ["--mem-len", "4"], "mem_len 4",
                             "no memory")
                seg = _models[name].cfg.tgt_len
                self.refused(name, ["--score-stride", str(seg + 1)],
                             f"--score-stride {seg + 1}", "seg_len")
                # the boundary is accepted
                rc, _, err = self.txlgen(name, "--score-stride", str(seg))
                self.assertEqual(rc, 0, err)
        for name in MEMORY_VARIANTS:
            with self.subTest(name):
                self.refused(name, ["--score-stride", "1"],
                             "--score-stride", "has a memory")
            if _models[name].cfg.cutoffs:
                self.refused(name, ["--adapt", "0.1"], "--adapt",
                             "adaptive softmax")

    def test_stats_say_the_window(self):
        name = VANILLA_VARIANTS[0]
        seg = _models[name].cfg.tgt_len
        for argv, want in (([], f"every {seg} tokens predicted"),
                           (["--score-stride", "1"], "every token"),
                           (["--score-stride", "2"],
                            "every 2 tokens predicted")):
            rc, _, err = self.txlgen(name, "--stats", *argv)
            self.assertEqual(rc, 0, err)
            self.assertIn("no memory", err, argv)
            self.assertIn(want, err, argv)
            self.assertIn("window of", err, argv)
        rc, _, err = self.txlgen(MEMORY_VARIANTS[0], "--stats")
        self.assertEqual(rc, 0, err)
        self.assertIn("memory: ", err)
        self.assertNotIn("window", err)


def txlgen_generate(model_path, prompt, n, seg_len, mem_len, clamp_len,
                    same_length, temp, eos=True):
    """Generation with --json; return ([(id, logprob)], argv)."""
    argv = [TXLGEN, "--model", model_path, "--text", prompt, "-n", str(n),
            "--temp", str(temp), "--top-k", "0", "--top-p", "1",
            "--min-p", "0", "--json", "--seed", "1",
            "--seg-len", str(seg_len), "--clamp-len", str(clamp_len)]
    if mem_len is not None:     # models without memory refuse one
        argv += ["--mem-len", str(mem_len),
                 "--same-length" if same_length else "--no-same-length"]
    if eos:
        argv.append("--ignore-eos")
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, OMP_WAIT_POLICY="PASSIVE"))
    if r.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} exited {r.returncode}: "
                             f"{r.stderr.strip()[-2000:]}")
    out = []
    for line in r.stdout.splitlines():
        obj = json.loads(line)
        if "logprob" in obj and "id" in obj:
            out.append((int(obj["id"]), float(obj["logprob"])))
    return out, argv


class TestGeneration(unittest.TestCase):
    """Generation: the prompt fed in segments of seg_len, then one token at
    a time through the memory ring, well past mem_len.  Given the same
    history (the reference follows txlgen's tokens), every reported
    log-prob (full distribution) is the reference's within TOL, and with
    --temp 0 every token is the reference's argmax (within TOL of it; eos
    is excluded by --ignore-eos).  Sampling (temp 2) gives varied tokens;
    greedy random models tend to repeat one."""

    def check(self, name, n=60, seg_len=8, mem_len=8, clamp_len=0,
              same_length=False, temp=2.0, ignore_eos=True, tol=TOL):
        import sentencepiece as spm
        import torch
        m = _models[name]
        memory = m.cfg.attn_type in MEMORY_KINDS
        sp = spm.SentencePieceProcessor(model_file=m.tokenizer)
        prompt = "The lighthouse keeper wrote in his log every evening"
        pids = sp.encode(prompt)
        gen, argv = txlgen_generate(m.path, prompt, n, seg_len,
                                    mem_len if memory else None, clamp_len,
                                    same_length, temp, ignore_eos)
        cmd = " ".join(argv[1:])
        eos = sp.eos_id()
        # (up to 3 tokens more complete a character the n-th began)
        if ignore_eos:
            self.assertTrue(n <= len(gen) <= n + 3, cmd)
        else:                       # eos ends it
            self.assertTrue(0 < len(gen) <= n + 3, cmd)
        text = codecs.getincrementaldecoder("utf-8")()
        text.decode(prompt.encode())

        def piece(i):
            if sp.is_byte(i):
                return bytes([int(sp.id_to_piece(i)[3:5], 16)])
            if sp.is_control(i):
                return b""
            return sp.id_to_piece(i).replace("\u2581", " ").encode()

        def breaks_utf8(i):
            """Would token i make the text invalid UTF-8?  (Never drawn,
            however likely: txl_sampler_keep_utf8.)"""
            pending = text.getstate()[0]
            b = piece(i)
            if pending and not b:
                return True
            try:
                codecs.getincrementaldecoder("utf-8")().decode(pending + b)
            except UnicodeDecodeError:
                return True
            return False
        model = m.model
        model.mem_len = mem_len if memory else 0
        model.clamp_len, model.same_length = clamp_len, same_length
        worst = 0.0

        def log_probs(h):
            """the full distribution after the last position of h"""
            return m.log_probs(h[-1:])[0, 0] if m.cfg.cutoffs else \
                torch.nn.functional.log_softmax(
                    model.logits(h[-1, 0]).double(), -1)

        with torch.no_grad():
            hist, mems, h = list(pids), None, None
            if memory:
                for s0 in range(0, len(pids), seg_len):
                    x = torch.tensor(pids[s0:s0 + seg_len])[:, None]
                    h, mems = model.forward(x, mems)
            for k, (tok, lp) in enumerate(gen):
                if not memory:      # the window of the last seg_len tokens
                    h, _ = model.forward(torch.tensor(hist[-seg_len:])
                                         [:, None])
                ref = log_probs(h)
                best = ref.clone()
                if ignore_eos:
                    best[eos] = -math.inf
                for i in range(len(best)):
                    if breaks_utf8(i):
                        best[i] = -math.inf
                d = abs(float(ref[tok]) - lp)
                worst = max(worst, d)
                self.assertLessEqual(d, tol, f"{cmd}: token {k}: logprob "
                                     f"{lp} vs reference {float(ref[tok])}")
                if temp == 0:
                    self.assertGreaterEqual(
                        float(ref[tok]), float(best.max()) - 2 * TOL,
                        f"{cmd}: token {k} ({tok}) is not the argmax "
                        f"({int(best.argmax())})")
                hist.append(tok)
                text.decode(piece(tok))
                if memory:
                    h, mems = model.forward(torch.tensor([[tok]]), mems)
        if temp > 0 and ignore_eos:
            self.assertGreater(len(set(t for t, _ in gen)), n // 6,
                               f"{cmd}: too few distinct tokens")
        _report.append(f"{'generate ' + self._testMethodName:<34} "
                       f"{name:<12} {worst:.2e}  ({cmd})")

    def test_greedy(self):
        self.check("base", temp=0)

    def test_sampled(self):
        self.check("base")

    def test_sampled_same_length_clamp(self):
        self.check("pre_untie", seg_len=5, mem_len=12, clamp_len=4,
                   same_length=True)

    def test_sampled_projection(self):
        self.check("proj_tied", seg_len=16, mem_len=20)

    def test_sampled_bf16(self):
        self.check("bf16", seg_len=3, mem_len=6)

    def test_sampled_q8_0(self):
        # generation quantizes the activations (TestQ8Activations)
        self.check("q8_0_proj", seg_len=4, mem_len=10,
                   tol=TestQ8Activations.MAX)


    def variants(self, **kw):
        if not VARIANTS:
            self.skipTest("tests/make_random_model.py builds no variants")
        for name in VARIANTS:
            with self.subTest(name):
                self.check(name, n=40, **kw)

    def test_variants_greedy(self):
        # an adaptive softmax goes cluster by cluster, eos allowed
        self.variants(temp=0, ignore_eos=False)

    def test_variants_sampled(self):
        self.variants(temp=1.3, ignore_eos=False)

    def test_variants_sampled_ignore_eos(self):
        self.variants(temp=2.0, seg_len=5, mem_len=9)


class TestFormats(ParityCase):
    """Compact weight formats (F16, BF16, Q8_0, Q4_0), computed as stored.

    Tolerance: the builder gives the reference exactly the values the file
    stores (txlfile.stored_values: F16 and BF16 values and Q8_0's q * d and
    Q4_0's (q - 8) * d are all floats), and txlgen widens each stored value to
    float exactly and accumulates in float as it does for F32.  So the two
    compute the same function of the same numbers, and differ only by the order
    of float32 additions: the same TOL as F32 (1e-4 on log-probs) holds, with
    no allowance for the format.  The formats' own error (against the unrounded
    F32 weights) is what bits per byte on held-out text measures
    (bench/README.md);
    test_rounding_matters shows that it is far above TOL here, so that agreeing
    within TOL means txlgen computed with the stored values.  Segments run the
    matrix-matrix path (blocks of rows widened for sgemm), one token at a time
    the matrix-vector kernels, which for Q8_0 and Q4_0 quantize the activations
    too: TestQ8Activations.  Segments of 32 tokens or more take the weights
    packed once for the products of segments, widened to float exactly as
    well: the same TOL.  A segment's products that take a single row (an
    adaptive softmax's tail cluster with one target in the segment:
    test_q4_0_adaptive) stay in float; they were quantized before ba5101b,
    1.5e-2 off here."""

    def test_q8_0(self):
        self.compare("q8_0", seg_len=8, mem_len=16)

    def test_q8_0_projection(self):
        self.compare("q8_0_proj", seg_len=6, mem_len=12, clamp_len=5)

    def test_q4_0(self):
        self.compare("q4_0", seg_len=8, mem_len=16)

    def test_q4_0_projection(self):
        self.compare("q4_0_proj", seg_len=6, mem_len=12, clamp_len=5)

    def test_q4_0_adaptive(self):
        self.compare("q4_0_adaptive", seg_len=8, mem_len=16)

    def test_segments_on_packed_weights(self):
        """Segments of 40 tokens (at least TXL_PACK_MIN_ROWS, 32): the
        products run on the packed copy of each matrix (lib/kernels/txl-gemm.h),
        its F16, BF16 and Q8 panels widened a block at a time."""
        for name in ("f16", "bf16", "q8_0", "q4_0", "q4_0_adaptive"):
            with self.subTest(name):
                self.compare(name, n=200, seg_len=40, mem_len=24)

    def test_storage(self):
        """Which tensors are compact: the 2-D *.weight matrices, in the
        file's type (F16 where Q8_0 and Q4_0 rows are not a multiple of 32
        long); everything else F32."""
        import struct
        for name in ("f16", "bf16", "q8_0", "q8_0_proj", "q4_0",
                     "q4_0_adaptive", "q4_0_proj"):
            m = _models[name]
            with open(m.path, "rb") as f:
                (n,) = struct.unpack("<Q", f.read(8))
                header = json.loads(f.read(n))
            compact = 0
            for t, info in header.items():
                if t == "__metadata__" or t.startswith("__pad__.") or \
                        t == "tokenizer.model":
                    continue
                shape = info["shape"]
                want = "F32"
                if len(shape) == 2 and t.endswith(".weight"):
                    want = "F16" if m.dtype in ("Q8_0", "Q4_0") and \
                        shape[1] % 32 else m.dtype
                    compact += 1
                self.assertEqual(info["dtype"], want, f"{name}: {t}")
            self.assertGreaterEqual(compact, 5, name)
        hdr = header["word_emb.emb_layers.0.weight"]
        self.assertEqual(hdr["dtype"], "F16")           # q4_0_proj, E = 40

    def test_rounding_matters(self):
        """The stored values differ from the model's F32 weights enough to
        move the log-probs well beyond TOL."""
        for name in ("f16", "bf16", "q8_0", "q4_0"):
            m = _models[name]
            kw = dict(CONFIGS[name])
            kw.pop("dtype")
            f32 = mrm.build(os.path.join(_tmp, name + "-f32"),
                            do_convert=False, **kw)
            ids = mrm.random_ids(60, m.cfg.n_token)
            a = m.score(ids, seg_len=8, mem_len=16)
            b = f32.score(ids, seg_len=8, mem_len=16)
            self.assertGreater(max(abs(x - y) for x, y in zip(a, b)),
                               10 * TOL, name)


class TestQ8Activations(ParityCase):
    """Q8_0 and Q4_0 weights one token at a time (matrix-vector products).

    There txlgen computes another function than the reference: every
    activation vector entering a Q8_0 or Q4_0 product is quantized as Q8_0
    weights are, per block of 32 values (scale max |x| / 127, round to
    nearest), for integer dot products (lib/kernels/txl-kernels.h, quantize_q8).  Each
    value moves by at most u = 1/254 (about 2^-8) of its block's largest,
    so to first order a log-prob moves by S * u, S the model's sensitivity
    to relative errors of its activations.  On the random models of this
    suite (peaked attention, logits of size ~10, d_model 32 and 64: one or
    two blocks per vector) S measured 17 to 50 on the largest deviation of
    149 predictions and 4.5 to 9 on their mean (2 models, 4 settings of
    seg_len 1 and 4 id streams each; with Q4_0 weights 30 to 60 and 5.7 to
    12.4, 3 models), so the tolerance is 128 u (0.50) on
    the largest deviation and 16 u (0.063) on the mean.  An error of the
    products (a block's scale or values taken from another block, a row
    skipped) moves the activations by O(1) of themselves, log-probs by
    O(S), far beyond it.  That txlgen does round the activations is
    checked too: the mean deviation exceeds 10 TOL (measured: at least
    0.018).  The default model stored as Q8_0 scores its test split one
    token at a time 5.2e-5 bits per byte above F32, against 3.8e-5 in
    segments (the stored weights alone; bench/README.md)."""

    U = 1 / 254
    MAX = 128 * U
    MEAN = 16 * U

    def check(self, name, **settings):
        m = _models[name]
        ids = mrm.random_ids(N_TOKENS, m.cfg.n_token, 0)
        records, summary, argv = txlgen_score(m.path, self.write_ids(ids),
                                              **settings)
        ref = m.score(ids, **settings)
        got = [float(r["logprob"]) for r in records]
        self.assertEqual(len(got), len(ids) - 1)
        devs = [abs(a - b) for a, b in zip(got, ref)]
        dev, mean = max(devs), sum(devs) / len(devs)
        cmd = " ".join(argv[1:])
        _report.append(f"{self._testMethodName:<34} {name:<12} {dev:.2e}  "
                       f"mean {mean:.2e} ({cmd})")
        self.assertLessEqual(dev, self.MAX, f"{cmd}: max |diff| {dev:.3g}")
        self.assertLessEqual(mean, self.MEAN, f"{cmd}: mean |diff| "
                             f"{mean:.3g}")
        self.assertGreater(mean, 10 * TOL, cmd)
        self.check_summary(summary, got, ids, cmd)

    def test_token_by_token(self):
        self.check("q8_0", seg_len=1, mem_len=16, same_length=True)

    def test_projection_token_by_token(self):
        self.check("q8_0_proj", seg_len=1, mem_len=9)

    def test_clamp_len(self):
        self.check("q8_0_proj", seg_len=1, mem_len=24, clamp_len=5)

    def test_no_memory(self):
        self.check("q8_0", seg_len=1, mem_len=0)

    def test_q4_0_token_by_token(self):
        """Q4_0 weights meet the same quantized activations (the weights'
        values are exact, as in TestFormats): the same bounds."""
        self.check("q4_0", seg_len=1, mem_len=16, same_length=True)

    def test_q4_0_projection_token_by_token(self):
        self.check("q4_0_proj", seg_len=1, mem_len=9)

    def test_q4_0_adaptive_token_by_token(self):
        self.check("q4_0_adaptive", seg_len=1, mem_len=16)


class TestKvType(ParityCase):
    """The memory's K, V and R held in F16, BF16 or Q8_0 (--kv-type).

    Here txlgen computes another function than the reference: each stored
    key, value and position term is rounded to the type, a relative error
    of at most u (2^-11 for F16, 2^-8 for BF16), while the reference keeps
    them in float.  To first order a log-prob moves by S * u, where S, the
    model's sensitivity to relative errors of its memory, is the same for
    both types (the same values rounded, the errors of BF16 about 8 times
    larger).  On the random models of this suite (peaked attention, logits
    of size ~10) S stays below 30 (measured on every configuration with a
    memory, segments and token by token: F16 1.2e-3 .. 1.3e-2, BF16 1.1e-2
    .. 8.5e-2), so the tolerance is 64 u: 0.031 for F16, 0.25 for BF16.
    An error of the memory's layout (a wrong stride, another head's
    columns, rows not converted) moves log-probs by O(1), far beyond it.
    That the deviation is rounding is checked too: it exceeds F32's
    (1e-4 at most: the memory really is compact), and BF16's is 2 to 32
    times F16's (8 expected, the spread of random rounding allowed).  The
    default model changes by ~3e-5 nats per token on tests/data/text.txt.

    Q8_0 (models whose d_head is a multiple of 32) rounds each value to a
    step of its block of 32: an error of at most half a step, max |block|
    / 254, which is the u of Q8_0 here (relative to the block's largest
    value rather than to each value's own: the relative error of a value
    is larger by max |block| / |value|, 2 to 3 for most values).  On
    "head32", the model of this suite with d_head 32, Q8_0 moved the
    log-probs by 0.094 (segments) and 0.133 (token by token), S = 24 and
    34 in these units, 3.2 and 4.5 times BF16's on the same runs (twice
    max / |value| expected), so the tolerance is again 64 u, 0.25, with
    room for twice the largest seen; the deviation must exceed F32's, and
    BF16's by 1.5 to 16 times (a memory that was really 16-bit would
    not).  Segments of 12 take the path of sgemm on widened rows, one token
    the kernels' (lib/compute/txl-attn-few.c), where each query is
    rounded to int16 per block of 32 for integer products with the keys:
    an error of 1/65534 of the block's largest, 258 times below the keys'
    (the deviation stayed 0.133 with it).  The blocks themselves are the
    converter's, bit for bit (test_q8_0_blocks).

    Q4_0 rounds to 16 steps of a block's largest value, half a step being
    max |block| / 16: 254 / 16 = 16 times Q8_0's u, so its deviation must
    be 4 to 64 times Q8_0's on the same run (measured on head32: 14.7
    segments, 9.0 token by token, 1.38 and 1.20 nats at most on these
    random models' peaked attention; a memory that was really 8-bit would
    give 1, one that was not rounded at all less).  Its blocks are
    test_q4_0_blocks' rounding of the F32 memory, bit for bit; token by
    token, each query meets them rounded to int8 per block of 32, 16 times
    finer than the keys."""

    U = {"F16": 2.0 ** -11, "BF16": 2.0 ** -8, "Q8_0": 1 / 254,
         "Q4_0": 1 / 16}

    def deviation(self, name, kv, **settings):
        m = _models[name]
        ids = mrm.random_ids(N_TOKENS, m.cfg.n_token, 0)
        records, summary, argv = txlgen_score(
            m.path, self.write_ids(ids), extra=["--kv-type", kv],
            **settings)
        ref = m.score(ids, **settings)
        got = [float(r["logprob"]) for r in records]
        self.assertEqual(len(got), len(ids) - 1)
        dev = max(abs(a - b) for a, b in zip(got, ref))
        cmd = " ".join(argv[1:])
        _report.append(f"{self._testMethodName + ' ' + kv:<34} "
                       f"{name:<12} {dev:.2e}  ({cmd})")
        self.check_summary(summary, got, ids, cmd)
        return dev, cmd

    def check(self, name, **settings):
        dev = {}
        for kv in ("F16", "BF16"):
            dev[kv], cmd = self.deviation(name, kv, **settings)
            self.assertLessEqual(dev[kv], 64 * self.U[kv],
                                 f"{cmd}: max |diff| {dev[kv]:.3g}")
        self.assertGreater(dev["F16"], 2 * TOL, cmd)
        ratio = dev["BF16"] / dev["F16"]
        self.assertTrue(2 <= ratio <= 32, f"{cmd}: BF16 / F16 deviation "
                        f"{ratio:.1f} ({dev})")

    def test_segments(self):
        self.check("base", seg_len=8, mem_len=16)

    def test_token_by_token(self):
        self.check("pre_untie", seg_len=1, mem_len=24)

    def test_wide_same_length_clamp(self):
        self.check("wide", seg_len=1, mem_len=24)

    def test_learnable_positions(self):
        if "attn1" not in _models:
            self.skipTest("no attn_type 1 variant")
        self.check("attn1", seg_len=1, mem_len=24)

    def check_q8_0(self, name, **settings):
        dev = {}
        for kv in ("BF16", "Q8_0"):
            dev[kv], cmd = self.deviation(name, kv, **settings)
            self.assertLessEqual(dev[kv], 64 * self.U[kv],
                                 f"{cmd}: max |diff| {dev[kv]:.3g}")
        self.assertGreater(dev["Q8_0"], 2 * TOL, cmd)
        ratio = dev["Q8_0"] / dev["BF16"]
        self.assertTrue(1.5 <= ratio <= 16, f"{cmd}: Q8_0 / BF16 deviation "
                        f"{ratio:.1f} ({dev})")

    def test_q8_0_segments(self):
        self.check_q8_0("head32", seg_len=12, mem_len=16)

    def test_q8_0_token_by_token(self):
        self.check_q8_0("head32", seg_len=1, mem_len=24)

    def check_q4_0(self, name, **settings):
        dev = {}
        for kv in ("Q8_0", "Q4_0"):
            dev[kv], cmd = self.deviation(name, kv, **settings)
            self.assertLessEqual(dev[kv], 64 * self.U[kv],
                                 f"{cmd}: max |diff| {dev[kv]:.3g}")
        ratio = dev["Q4_0"] / dev["Q8_0"]
        self.assertTrue(4 <= ratio <= 64, f"{cmd}: Q4_0 / Q8_0 deviation "
                        f"{ratio:.1f} ({dev})")

    def test_q4_0_segments(self):
        self.check_q4_0("head32", seg_len=12, mem_len=16)

    def test_q4_0_token_by_token(self):
        self.check_q4_0("head32", seg_len=1, mem_len=24)

    def memory_rows(self, kv):
        """The rows of layer 0's K and V in a state file saved after one
        segment, per (K or V, head), and their block's bytes."""
        import struct
        m = _models["head32"]
        rows = {}
        for kv in ("F32", kv):
            path = os.path.join(_tmp, f"blocks-{kv}.state")
            r = subprocess.run([TXLGEN, "--model", m.path, "--seg-len", "32",
                                "--mem-len", "32", "--kv-type", kv, "-n", "0",
                                "--text", "the numbers changed: 12 degrees",
                                "--state-out", path],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(path, "rb") as f:
                blob = f.read()
            # struct txl_state_header (lib/api/txl-state.h): 72 bytes
            # since version 6, which stores the rows a head holds
            (_, version, _, _, _, n_head, d_head, mem_len, fill, _, _,
             kv_type, _) = struct.unpack_from("<8sIIQIIIIIIqII", blob)
            self.assertEqual(version, 6)
            self.assertEqual(kv_type, {"F32": 0, "Q8_0": 3, "Q4_0": 4}[kv])
            row = d_head * 4 if kv == "F32" else d_head // 32 * (
                34 if kv == "Q8_0" else 18)
            # layer 0: K, then V, each n_head x fill rows
            rows[kv] = [blob[72 + (w * n_head + h) * fill * row:][
                        :fill * row] for w in (0, 1) for h in range(n_head)]
        self.assertGreater(fill, 4)
        return rows

    def test_q8_0_blocks(self):
        """The memory's Q8_0 blocks are models/txlfile.py's quantize_q8_0
        of the F32 memory, bit for bit: the keys and values of layer 0
        (which depend on the embeddings alone, so the two runs compute the
        same floats) in state files saved after one segment."""
        import numpy as np
        rows = self.memory_rows("Q8_0")
        for f32, q8 in zip(rows["F32"], rows["Q8_0"]):
            want = txlfile.quantize_q8_0(np.frombuffer(f32, np.float32))
            self.assertEqual(want.tobytes(), q8)

    def test_q4_0_blocks(self):
        """The memory's Q4_0 blocks, bit for bit, as models/txlfile.py's
        quantize_q4_0 computes them from the F32 memory (in NumPy, by the
        rule of txl_q4_0_scale() in lib/kernels/txl-kernels.h; model files'
        Q4_0 weights are made by it too)."""
        import numpy as np
        rows = self.memory_rows("Q4_0")
        for f32, q4 in zip(rows["F32"], rows["Q4_0"]):
            want = txlfile.quantize_q4_0(np.frombuffer(f32, np.float32))
            self.assertEqual(want.tobytes(), q4)

    def test_q8_0_refused(self):
        """A model whose d_head (12) is no multiple of 32 refuses a Q8_0
        memory: one line naming both, exit status 2 (settings the library
        refuses, as --same-length with --mem-len 0)."""
        m = _models["wide"]
        r = subprocess.run([TXLGEN, "--model", m.path, "--kv-type", "Q8_0",
                            "-n", "1", "--text", "a"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertIn("Q8_0", r.stderr)
        self.assertIn("d_head is 12", r.stderr)

    def test_bad_kv_type(self):
        """Names other than F32, F16, BF16, Q8_0, Q4_0 (in any case: f16,
        q8_0) are a usage error (exit 2)."""
        m = _models["base"]
        for bad in ("FP16", "Q8", "q4", "U8", ""):
            r = subprocess.run([TXLGEN, "--model", m.path, "--kv-type", bad,
                                "-n", "1", "--text", "a"],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 2, f"--kv-type {bad!r}: "
                             f"{r.stderr}")
            self.assertIn("kv-type", r.stderr)
            self.assertEqual(len(r.stderr.strip().splitlines()), 2,
                             r.stderr)   # the error, then "Try --help"


class TestSummary(ParityCase):
    def score_text(self, path, seg_len, mem_len):
        """Scoring text: the ids are SentencePiece's, the log-probs the
        reference's, bits per byte = sum NLL / ln 2 / bytes of the text."""
        import sentencepiece as spm
        m = _models["base"]
        sp = spm.SentencePieceProcessor(model_file=m.tokenizer)
        with open(path, "rb") as f:
            raw = f.read()
        ids = sp.encode(raw.decode())
        records, summary, argv = txlgen_score(m.path, path, ids=False,
                                              seg_len=seg_len,
                                              mem_len=mem_len)
        cmd = " ".join(argv[1:])
        got_ids = [ids[0]] + [r["id"] for r in records]
        self.assertEqual(got_ids, ids, f"{cmd}: token ids differ from "
                         "SentencePiece's")
        ref = m.score(ids, seg_len=seg_len, mem_len=mem_len)
        got = [float(r["logprob"]) for r in records]
        diff = max(abs(a - b) for a, b in zip(got, ref))
        _report.append(f"{self._testMethodName:<34} {'base':<12} "
                       f"{diff:.2e}  ({cmd})")
        self.assertLessEqual(diff, TOL, cmd)
        nbytes, bpb = self.check_summary(summary, got, ids, cmd)
        self.assertEqual(nbytes, len(raw), f"{cmd}: {summary}")
        want = -sum(got) / math.log(2) / len(raw)
        self.assertAlmostEqual(bpb, want, delta=1e-6 * want,
                               msg=f"{cmd}: summary {summary}")

    def test_text_scoring(self):
        path = os.path.join(_tmp, "one-line.txt")
        with open(path, "w") as f:
            f.write("The keeper asked why the numbers mattered, and she "
                    "said that they changed: 12 degrees, café, naïve!")
        self.score_text(path, 8, 16)

    def test_text_file_scoring(self):
        # 23 lines, 2145 bytes, 1622 tokens
        self.score_text(os.path.join(mrm.DATA, "text.txt"), 16, 32)

if __name__ == "__main__":
    unittest.main()
