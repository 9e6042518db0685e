#!/usr/bin/python3
"""Checkpoints in the original code's and Hugging Face's forms, without
the original code: stand-ins of its classes build the same pickles.

- A whole-model pickle: torch.save(model) of an object graph whose classes
  are named as the original's (mem_transformer.MemTransformerLM,
  proj_adaptive_softmax.ProjectedAdaptiveLogSoftmax, torch.nn modules) and
  hold its attributes (n_token, cutoffs, pre_lnorm, d_inner...), with tied
  weights shared as the original shares them; a corpus cache: a pickled
  data_utils.Corpus holding a utils.vocabulary.Vocab.  Both torch.save
  containers (zip and legacy).
- Hugging Face directories: config.json with HF's keys, HF's names
  (transformer.*, per-layer biases with untie_r), pytorch_model.bin or
  model.safetensors, vocab.pkl / vocab.bin as HF pickles its tokenizer.
- A bare state_dict with --config.
Each is converted by models/convert.py, and txlgen --score on text must
give the log-probs of models/txlgen/txl_ref.py on the same weights (1e-4, as
tests/test_parity.py), the hyperparameters must come from the checkpoint,
and the ids of hand-written texts must be the ones worked out by hand
from the vocabulary, for word level (wt103, ptb with lower_case, lm1b's
<S>) and character level (text8, enwik8), as must the text decoded back
(tests/test-spm prints txl_tokenize and txl_detokenize).  Pickles that
would run a command are refused without running it.

Programs: $TXLGEN and $TEST_SPM (set by meson test), else build/.
"""

import collections
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import types
import unittest

import torch

import srctree  # noqa: F401 (models/ on sys.path)
from txlgen import (checkpoint, hf_ref, random_model as mrm, txl_ref,
                    txlfile)
from txlgen.conventions import LAYER_NORM_EPS, REL_PARTIAL

TXLGEN = mrm.find_program("TXLGEN", "cmd", "txlgen")
TEST_SPM = mrm.find_program("TEST_SPM", "tests", "test-spm")
TOL = 1e-4


# ---------------------------------------------------------------------------
# Stand-ins of the original classes, under the original module names

def _module(name, classes, base=object):
    mod = types.ModuleType(name)
    for c in classes:
        setattr(mod, c, type(c, (base,), {"__module__": name}))
    sys.modules[name] = mod
    return mod


MT = _module("mem_transformer", (
    "MemTransformerLM AdaptiveEmbedding PositionalEmbedding PositionwiseFF "
    "RelPartialLearnableMultiHeadAttn RelPartialLearnableDecoderLayer")
    .split(), torch.nn.Module)
PAS = _module("proj_adaptive_softmax", ["ProjectedAdaptiveLogSoftmax"],
              torch.nn.Module)
DU = _module("data_utils", ["Corpus"])
_module("utils", [])
VOC = _module("utils.vocabulary", ["Vocab"])


def original_pickle(cfg, seed):
    """(txl_ref model, the same weights as an original-looking object
    graph for torch.save(model))."""
    ref = txl_ref.MemTransformerLM(cfg)
    mrm.randomize(ref, seed=seed)
    ref.eval()
    orig = txl_ref.MemTransformerLM(cfg)
    orig.load_state_dict(ref.state_dict())
    del orig.cfg                       # a txl_ref object: not original
    orig.__class__ = MT.MemTransformerLM
    orig.word_emb.__class__ = MT.AdaptiveEmbedding
    orig.pos_emb.__class__ = MT.PositionalEmbedding
    orig.crit.__class__ = PAS.ProjectedAdaptiveLogSoftmax
    for layer in orig.layers:
        layer.__class__ = MT.RelPartialLearnableDecoderLayer
        layer.dec_attn.__class__ = MT.RelPartialLearnableMultiHeadAttn
        layer.pos_ff.__class__ = MT.PositionwiseFF
        layer.pos_ff.d_inner = cfg.d_inner
    for k in ("n_token n_layer n_head d_model d_head d_embed tgt_len "
              "mem_len ext_len attn_type same_length clamp_len").split():
        setattr(orig, k, getattr(cfg, k))
    orig.sample_softmax = -1
    orig.max_klen = cfg.tgt_len + cfg.ext_len + cfg.mem_len
    orig.word_emb.cutoffs = cfg.cutoffs + [cfg.n_token]
    orig.word_emb.div_val = cfg.div_val
    orig.crit.cutoffs = cfg.cutoffs + [cfg.n_token]
    return ref, orig


def make_vocab(symbols, lower_case, special=("<eos>",)):
    v = VOC.Vocab()
    v.__dict__.update(
        counter=collections.Counter(symbols), special=list(special),
        min_freq=0, max_size=None, lower_case=lower_case, delimiter=None,
        vocab_file=None, idx2sym=list(symbols),
        sym2idx=collections.OrderedDict((s, i) for i, s in
                                        enumerate(symbols)))
    for s in special:
        if s in symbols:
            setattr(v, f"{s.strip('<>')}_idx", symbols.index(s))
    return v


def save_corpus(path, dataset, vocab, zip_format=True):
    c = DU.Corpus()
    c.dataset, c.vocab = dataset, vocab
    c.train = torch.arange(10)
    torch.save(c, path, _use_new_zipfile_serialization=zip_format)


def hf_state(model, tied_once=False):
    """HF's names and layout (the tail clusters' rows of the head in the TF
    order: cluster i at row i - 1, where the original keeps it at row
    C - i); tied_once: a tensor shared by two names only under the first,
    as save_pretrained writes model.safetensors."""
    items, seen = [], set()
    for k, v in model.state_dict().items():
        if tied_once:
            if v.data_ptr() in seen:
                continue
            seen.add(v.data_ptr())
        items.append((k, v))
    return hf_ref.from_original(items, model.n_layer)


def convert(*args, env=None):
    return subprocess.run([mrm.PYTHON, mrm.CONVERT] + list(args),
                          capture_output=True, text=True, env=env)


# A sitecustomize.py that makes `import torch` fail, as on a system
# without python3-torch.
NO_TORCH = """
import sys


class NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, NoTorch())
"""


def score(path, text_path, seg=None, mem=None):
    argv = [TXLGEN, "--model", path, "--score", text_path, "--json",
            "--threads", "1"]
    if seg:
        argv += ["--seg-len", str(seg), "--mem-len", str(mem)]
    r = subprocess.run(argv, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    recs = [json.loads(x) for x in r.stdout.splitlines()]
    return [x["id"] for x in recs if "pos" in x], \
        [x["logprob"] for x in recs if "pos" in x]


def tokenize(path, texts):
    """[(ids or None if refused, decoded bytes or the error)] from
    tests/test-spm."""
    r = subprocess.run([TEST_SPM, path], capture_output=True, timeout=60,
                       input=b"".join(t.hex().encode() + b"\n"
                                      for t in texts))
    assert r.returncode == 0, r.stderr.decode()
    out = r.stdout.decode().split("\n")
    n = int(out[0].split()[3])
    res = []
    for line in out[1 + n:1 + n + len(texts)]:
        ids, _, rest = line.partition("\t")
        if ids == "error":
            res.append((None, rest))
        else:
            res.append(([int(x) for x in ids.split()], bytes.fromhex(rest)))
    return [int(x) for x in out[0].split()], res


WT_SYMS = ["<eos>", "the", ",", "@-@", "cat", "<unk>", "The", "sat", "on",
           "mat", "=", "."]


@unittest.skipIf(TXLGEN is None or TEST_SPM is None,
                 "txlgen / test-spm not built")
class TestCheckpoints(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="txl-ckpt-")
        cls.text = os.path.join(cls.tmp, "text.txt")
        with open(cls.text, "w") as f:
            f.write(" = the cat = \n\n the cat sat on the mat , the "
                    "cat @-@ mat . \n The dog sat .\n" * 3)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.tmp, name)

    def want_ids(self, lines_of_words):
        s = WT_SYMS
        ids = []
        for words in lines_of_words:
            ids += [s.index(w) if w in s else s.index("<unk>")
                    for w in words] + [0]
        return ids

    def check_scores(self, ref, mbin, settings=((None, None), (3, 5)),
                     mem_init="empty"):
        """txlgen's scores of the text with the model's settings and
        others, against txl_ref's; mem_init: how the model's memory
        starts (a Hugging Face directory's recommends zeros, as Hugging
        Face's code starts it)."""
        with open(self.text) as f:
            lines = f.read().split("\n")[:-1]
        want_ids = self.want_ids([x.split() for x in lines])
        for seg, mem in settings:
            ids, lps = score(mbin, self.text, seg, mem)
            self.assertEqual(ids, want_ids[1:])
            want = txl_ref.score_ids(ref, want_ids, seg or ref.cfg.tgt_len,
                                     mem if seg else ref.cfg.mem_len,
                                     mem_init=mem_init)
            diff = max(abs(a - b) for a, b in zip(lps, want.tolist()))
            self.assertLess(diff, TOL, f"{mbin} seg {seg}")

    def meta(self, mbin):
        return txlfile.read(mbin)[0]

    def check_generation(self, ref, mbin, prompt, want_ctx):
        """Sampled generation (no filter): the prompt's ids, and each
        token's log-prob under txl_ref over the prompt and the tokens
        before it."""
        r = subprocess.run([TXLGEN, "--model", mbin, "--text", prompt, "-n",
                            "20", "--seed", "5", "--temp", "1.5", "--top-k",
                            "0", "--top-p", "1", "--min-p", "0", "--json",
                            "--mem-len", "64"], capture_output=True,
                           text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        gen = [json.loads(x) for x in r.stdout.splitlines()]
        gen = [x for x in gen if "id" in x]
        self.assertEqual(len(gen), 20)
        ids = want_ctx + [x["id"] for x in gen]
        want = txl_ref.score_ids(ref, ids, len(ids), 0).tolist()
        got = [x["logprob"] for x in gen]
        diff = max(abs(a - b) for a, b in zip(got, want[len(want_ctx) - 1:]))
        self.assertLess(diff, TOL, mbin)
        return "".join(x["text"] for x in gen)

    # -- the three forms -------------------------------------------------

    def test_whole_model_and_cache(self):
        for k, (zip_format, extra) in enumerate((
                (True, dict(d_embed=24, tie_projs=True)),
                (False, dict(pre_lnorm=True, tie_weight=False)),
                (True, dict(d_embed=40, tie_weight=False,
                            same_length=True, clamp_len=4)))):
            cfg = mrm.make_config(n_token=len(WT_SYMS), tgt_len=4,
                                  mem_len=6, **extra)
            ref, orig = original_pickle(cfg, seed=k)
            mpt, cpt = self.path(f"model{k}.pt"), self.path(f"cache{k}.pt")
            torch.save(orig, mpt, _use_new_zipfile_serialization=zip_format)
            save_corpus(cpt, "wt103", make_vocab(WT_SYMS, False), zip_format)
            mbin = self.path(f"whole{k}.bin")
            r = convert("--weights", mpt, "--vocab", cpt, "-o", mbin)
            self.assertEqual(r.returncode, 0, r.stderr)
            meta = self.meta(mbin)
            for key, v in cfg.hparams().items():
                self.assertEqual(meta[key], txlfile.meta_value(v), key)
            self.assertEqual((meta["vocab_kind"], meta["vocab_newline"],
                              meta["vocab_unk"]), ("word", "eos", "piece"))
            self.check_scores(ref, mbin)

    def test_hf_directories(self):
        cfg = mrm.make_config(n_token=len(WT_SYMS), tgt_len=4, mem_len=6,
                              d_embed=16, untie_r=False)
        ref, orig = original_pickle(cfg, seed=7)
        vocab = make_vocab(WT_SYMS, False)
        for form in ("bin-zip", "bin-legacy", "safetensors"):
            d = self.path("hf-" + form)
            os.makedirs(d)
            with open(os.path.join(d, "config.json"), "w") as f:
                json.dump({"vocab_size": cfg.n_token, "cutoffs": [],
                           "d_model": cfg.d_model, "d_embed": cfg.d_embed,
                           "n_head": cfg.n_head, "d_head": cfg.d_head,
                           "d_inner": cfg.d_inner, "div_val": 1,
                           "pre_lnorm": False, "n_layer": cfg.n_layer,
                           "mem_len": 6, "clamp_len": -1,
                           "same_length": False,
                           "proj_share_all_but_first": True,
                           "attn_type": REL_PARTIAL, "sample_softmax": -1,
                           "adaptive": True, "dropout": 0.1,
                           "untie_r": True, "tgt_len": 4,
                           "model_type": "transfo-xl"}, f)
            st = hf_state(orig)
            if form == "safetensors":
                checkpoint.write_safetensors(
                    os.path.join(d, "model.safetensors"), st)
            else:
                torch.save(st, os.path.join(d, "pytorch_model.bin"),
                           _use_new_zipfile_serialization=form == "bin-zip")
            vd = {k: v for k, v in vocab.__dict__.items()}
            if form == "bin-zip":
                torch.save(vd, os.path.join(d, "vocab.bin"))
            else:
                with open(os.path.join(d, "vocab.pkl"), "wb") as f:
                    pickle.dump(vd, f)
            mbin = self.path(f"hf-{form}.bin")
            r = convert("--weights", d, "-o", mbin)
            self.assertEqual(r.returncode, 0, r.stderr)
            meta = self.meta(mbin)
            self.assertEqual((meta["untie_r"], meta["d_embed"]),
                             ("true", "16"))
            # per-layer biases: the shared ones, once per layer
            self.check_scores(ref, mbin, mem_init="zeros")

    def test_state_dict_with_config(self):
        cfg = mrm.make_config(n_token=len(WT_SYMS), tgt_len=4, mem_len=6)
        ref, _ = original_pickle(cfg, seed=3)
        sd, cj = self.path("sd.pt"), self.path("sd.json")
        torch.save(ref.state_dict(), sd)
        with open(cj, "w") as f:
            json.dump({k: v for k, v in cfg.hparams().items()
                       if k != "untie_r"}, f)
        cpt = self.path("sd-cache.pt")
        save_corpus(cpt, "wt103", make_vocab(WT_SYMS, False))
        mbin = self.path("sd.bin")
        r = convert("--weights", sd, "--config", cj, "--vocab", cpt,
                    "-o", mbin)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.check_scores(ref, mbin)
        # without --config: no hyperparameters
        r = convert("--weights", sd, "--vocab", cpt, "-o", mbin + "2")
        self.assertEqual(r.returncode, 3)
        self.assertIn("--config", r.stderr)
        # --config overrides what a whole model says
        _, orig = original_pickle(cfg, seed=3)
        mpt = self.path("ov.pt")
        torch.save(orig, mpt)
        with open(cj, "w") as f:
            json.dump({"mem_len": 33, "same_length": True}, f)
        r = convert("--weights", mpt, "--config", cj, "--vocab", cpt,
                    "-o", mbin)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual((self.meta(mbin)["mem_len"],
                          self.meta(mbin)["same_length"]), ("33", "true"))

    def test_adaptive_wt103_lm1b_shapes(self):
        """The published shapes: adaptive input and softmax, div_val 4,
        tie_projs as wt103's train.py sets them ([F, T, T, T]) and as
        lm1b's (all F), a whole-model pickle and HF directories
        (safetensors with tied tensors once, as save_pretrained writes
        them, and pytorch_model.bin); scored, and generated from a prompt
        in words."""
        S = WT_SYMS.index
        for k, (tie_projs, tie_weight) in enumerate((
                ([False, True, True, True], True),
                ([False] * 4, True), ([False, True, True, True], False))):
            cfg = mrm.make_config(n_token=len(WT_SYMS), d_model=64,
                                  d_head=16, d_inner=64, cutoffs=[3, 6, 9],
                                  div_val=4, tie_projs=tie_projs,
                                  tie_weight=tie_weight, tgt_len=4,
                                  mem_len=6)
            ref, orig = original_pickle(cfg, seed=20 + k)
            mpt, cpt = self.path(f"ad{k}.pt"), self.path(f"ad{k}-cache.pt")
            torch.save(orig, mpt)
            save_corpus(cpt, "wt103", make_vocab(WT_SYMS, False))
            mbin = self.path(f"ad{k}.bin")
            r = convert("--weights", mpt, "--vocab", cpt, "-o", mbin)
            self.assertEqual(r.returncode, 0, r.stderr)
            meta = self.meta(mbin)
            self.assertEqual((meta["cutoffs"], meta["div_val"],
                              meta["tie_projs"], meta["tie_weight"]),
                             ("[3, 6, 9]", "4", txlfile.meta_value(
                                 tie_projs), txlfile.meta_value(tie_weight)))
            self.check_scores(ref, mbin)
            text = self.check_generation(ref, mbin, "the cat sat",
                                         [S("the"), S("cat"), S("sat")])
            self.assertTrue(all(w in WT_SYMS for w in text.split()), text)
            for form in ("safetensors", "bin") if k == 0 else ():
                d = self.path(f"ad{k}-hf-{form}")
                os.makedirs(d)
                with open(os.path.join(d, "config.json"), "w") as f:
                    json.dump({"vocab_size": cfg.n_token,
                               "cutoffs": cfg.cutoffs, "d_model": 64,
                               "d_embed": 64, "n_head": 2, "d_head": 16,
                               "d_inner": 64, "div_val": 4,
                               "pre_lnorm": False, "n_layer": cfg.n_layer,
                               "mem_len": 6, "clamp_len": -1,
                               "same_length": False,
                               "proj_share_all_but_first": tie_projs[1],
                               "tie_word_embeddings": tie_weight,
                               "untie_r": True, "tgt_len": 4,
                               "model_type": "transfo-xl"}, f)
                if form == "safetensors":
                    checkpoint.write_safetensors(
                        os.path.join(d, "model.safetensors"),
                        hf_state(orig, tied_once=True))
                else:
                    torch.save(hf_state(orig),
                               os.path.join(d, "pytorch_model.bin"))
                with open(os.path.join(d, "vocab.pkl"), "wb") as f:
                    pickle.dump(dict(make_vocab(WT_SYMS, False).__dict__),
                                f)
                hbin = self.path(f"ad{k}-hf-{form}.bin")
                r = convert("--weights", d, "-o", hbin)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual(self.meta(hbin)["tie_projs"],
                                 txlfile.meta_value(tie_projs))
                self.check_scores(ref, hbin, settings=((None, None),),
                                  mem_init="zeros")

    # -- Hugging Face's wt103 layout, against Hugging Face's computation --

    def hf_wt103_dir(self, name, config, seed):
        """A directory laid out as Hugging Face's wt103 (config.json,
        pytorch_model.bin, vocab.bin), random weights; returns (dir, the
        config, the symbols)."""
        syms = ["<eos>"] + [f"w{i}" for i in range(1, 40)]
        syms[5] = "<unk>"
        c = dict(hf_ref.HF_DEFAULTS, **config)
        cfg = mrm.make_config(
            n_token=len(syms), n_layer=c["n_layer"], n_head=c["n_head"],
            d_model=c["d_model"], d_head=c["d_head"], d_inner=c["d_inner"],
            d_embed=c["d_embed"], cutoffs=c["cutoffs"], div_val=c["div_val"],
            tie_projs=[False] + [True] * len(c["cutoffs"]),
            tie_weight=c["tie_word_embeddings"], untie_r=True,
            pre_lnorm=c["pre_lnorm"])
        ref = txl_ref.MemTransformerLM(cfg)
        mrm.randomize(ref, seed=seed)
        d = self.path(name)
        os.makedirs(d)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(dict(config, vocab_size=len(syms)), f, indent=2)
        # HF's names; per-layer relative biases (untie_r)
        st = collections.OrderedDict()
        for key, v in ref.state_dict().items():
            if key in ("r_w_bias", "r_r_bias"):
                for i in range(cfg.n_layer):
                    st[f"transformer.layers.{i}.dec_attn.{key}"] = v[i]
            else:
                st[("" if key.startswith("crit.") else "transformer.") +
                   key] = v
        torch.save(st, os.path.join(d, "pytorch_model.bin"))
        torch.save(dict(make_vocab(syms, False).__dict__),
                   os.path.join(d, "vocab.bin"))
        return d, c, syms

    def test_hf_wt103_layout(self):
        """Three tail clusters, as Hugging Face lays out wt103: converted
        and scored by txlgen with the model's own settings (mem_init zeros
        recommended, the memory Hugging Face's init_mems() starts with),
        every log-prob within 1e-4 of Hugging Face's computation
        (txlgen/hf_ref.py, which reads tail cluster i from head column
        cutoffs[0] + i - 1), tokens of all four clusters among them; in
        segments, token by token, and with --mem-init empty against HF's
        forward from no memory.  The second config lacks same_length,
        clamp_len and mem_len (HF: true, 1000, 1600) and says tie_weight
        true but tie_word_embeddings false (HF unties), with another
        LayerNorm epsilon."""
        wt103 = dict(
            adaptive=True, architectures=["TransfoXLLMHeadModel"],
            attn_type=REL_PARTIAL, clamp_len=7, cutoffs=[8, 16, 28],
            d_embed=32, d_head=8, d_inner=48, d_model=32, div_val=2, dropatt=0.0,
            dropout=0.1, eos_token_id=0, ext_len=0, init="normal",
            init_range=0.01, init_std=0.02,
            layer_norm_epsilon=LAYER_NORM_EPS["huggingface"],
            mem_len=9, model_type="transfo-xl", n_head=4, n_layer=2,
            pre_lnorm=False, proj_init_std=0.01, same_length=True,
            sample_softmax=-1, tgt_len=5, tie_projs=[False, True, True,
                                                     True],
            tie_weight=True, untie_r=True)
        sparse = {k: v for k, v in wt103.items()
                  if k not in ("same_length", "clamp_len", "mem_len",
                               "tie_projs")}
        sparse.update(tie_word_embeddings=False, layer_norm_epsilon=0.01)
        g = torch.Generator().manual_seed(3)
        for k, config in enumerate((wt103, sparse)):
            d, c, syms = self.hf_wt103_dir(f"hfwt{k}", config, seed=40 + k)
            mbin = self.path(f"hfwt{k}.bin")
            r = convert("--weights", d, "-o", mbin)
            self.assertEqual(r.returncode, 0, r.stderr)
            meta = self.meta(mbin)
            self.assertEqual(
                (meta["origin"], meta["converter_version"],
                 json.loads(meta["recommended"])["mem_init"],
                 meta["same_length"], meta["clamp_len"], meta["mem_len"],
                 meta["tie_weight"], float(meta.get(
                     "layer_norm_eps", LAYER_NORM_EPS["pytorch"]))),
                ("huggingface", "2", "zeros", "true",
                 str(c["clamp_len"]), str(c["mem_len"]),
                 txlfile.meta_value(c["tie_word_embeddings"]),
                 c["layer_norm_epsilon"]))
            words = [syms[i] for i in torch.randint(1, len(syms), (70,),
                                                    generator=g).tolist()
                     if syms[i] != "<unk>"]
            text = self.path(f"hfwt{k}.txt")
            with open(text, "w") as f:
                f.write(" ".join(words[:30]) + "\n" + " ".join(words[30:])
                        + "\n")
            want_ids = [syms.index(w) for w in words[:30]] + [0] + \
                [syms.index(w) for w in words[30:]] + [0]
            hf = hf_ref.HFTransfoXL.from_dir(d)
            clusters = set()
            for seg, mem_init, mems in ((None, None, "init"),
                                        (1, None, "init"),
                                        (3, "empty", "empty")):
                argv = [TXLGEN, "--model", mbin, "--score", text, "--json",
                        "--threads", "1"]
                if seg:
                    argv += ["--seg-len", str(seg)]
                if mem_init:
                    argv += ["--mem-init", mem_init]
                r = subprocess.run(argv, capture_output=True, text=True)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertNotIn("warning", r.stderr)
                recs = [json.loads(x) for x in r.stdout.splitlines()]
                recs = [x for x in recs if "pos" in x]
                self.assertEqual([x["id"] for x in recs], want_ids[1:])
                want = hf.score(want_ids, seg or c["tgt_len"], mems=mems)
                for rec, w in zip(recs, want):
                    self.assertLess(abs(rec["logprob"] - w), TOL,
                                    f"{d} seg {seg} {mem_init}: {rec}")
                clusters |= {sum(x["id"] >= b for b in c["cutoffs"])
                             for x in recs}
            self.assertEqual(clusters, {0, 1, 2, 3})

    def test_hf_converted_before_the_fix_is_told(self):
        """A model file of Hugging Face's wt103 from a converter before
        version 2 (no converter_version; txlgen-get's description names
        huggingface.co) makes txlgen say, in one warning line, that its
        clusters are swapped and how to convert it again; the same file
        with converter_version, or another model without it, does not."""
        config = dict(cutoffs=[8, 16, 28], d_embed=32, d_head=8,
                      d_inner=48, d_model=32, div_val=2, n_head=4,
                      n_layer=1, mem_len=4, tgt_len=4)
        d, c, syms = self.hf_wt103_dir("hfold", config, seed=60)
        new = self.path("hfold-new.bin")
        r = convert("--weights", d, "-o", new, "--description",
                    "Transformer-XL large, WikiText-103; from "
                    "huggingface.co/transfo-xl/transfo-xl-wt103 @ 40a186d")
        self.assertEqual(r.returncode, 0, r.stderr)
        meta, tensors = txlfile.read(new)
        old = self.path("hfold-old.bin")
        proto = bytes(tensors.pop("tokenizer.model"))
        hp = {k: json.loads(v) for k, v in meta.items()
              if k in txl_ref.HPARAM_NAMES}
        extra = {k: v for k, v in meta.items()
                 if k not in hp and k not in ("format", "format_version",
                                              "converter_version")}
        txlfile.write(old, hp, tensors, proto, extra=extra)
        # another model of three tail clusters from before: not wt103's
        plain = self.path("hfold-plain.bin")
        extra.pop("description")
        txlfile.write(plain, hp, tensors, proto, extra=extra)
        text = self.path("hfold.txt")
        with open(text, "w") as f:
            f.write("w1 w9 w20 w30\n")
        for path, warned in ((old, True), (new, False), (plain, False)):
            r = subprocess.run([TXLGEN, "--model", path, "--score", text,
                                "--threads", "1"], capture_output=True,
                               text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            lines = [x for x in r.stderr.splitlines() if "warning" in x]
            if warned:
                self.assertEqual(len(lines), 1, r.stderr)
                self.assertIn(path, lines[0])
                self.assertIn("tail clusters 1 and 3", lines[0])
                self.assertIn("'txlgen-get --force wt103'", lines[0])
            else:
                self.assertEqual(lines, [], path)

    def test_hf_cluster_order_matters(self):
        """The clusters' order is what the test above checks: reading
        tail cluster i from column -i (the PyTorch code's order) moves
        the log-probs of clusters 1 and 3 by far more than 1e-4, those of
        the shortlist and cluster 2 not at all."""
        config = dict(cutoffs=[8, 16, 28], d_embed=32, d_head=8,
                      d_inner=48, d_model=32, div_val=2, n_head=4,
                      n_layer=1, mem_len=4, tgt_len=4)
        d, c, syms = self.hf_wt103_dir("hforder", config, seed=50)
        hf = hf_ref.HFTransfoXL.from_dir(d)
        ids = list(range(len(syms)))
        want = hf.score(ids, 4)
        rows = hf.st["crit.cluster_weight"], hf.st["crit.cluster_bias"]
        hf.st["crit.cluster_weight"] = rows[0].flip(0)
        hf.st["crit.cluster_bias"] = rows[1].flip(0)
        swapped = hf.score(ids, 4)
        for t, a, b in zip(ids[1:], want, swapped):
            cl = sum(t >= x for x in c["cutoffs"])
            if cl in (1, 3):
                self.assertGreater(abs(a - b), 100 * TOL, t)
            else:
                self.assertLess(abs(a - b), 1e-9, t)

    def test_checkpoint_reader_equals_torch_load(self):
        cfg = mrm.make_config(n_token=len(WT_SYMS), d_embed=24)
        ref, orig = original_pickle(cfg, seed=5)
        for zf in (True, False):
            p = self.path(f"eq{zf}.pt")
            torch.save(orig, p, _use_new_zipfile_serialization=zf)
            ck = checkpoint.read_checkpoint(p)
            want = ref.state_dict()
            for k, t in want.items():
                self.assertTrue((ck.state[k] == t.numpy()).all(), k)
                self.assertEqual(ck.state[k].shape, tuple(t.shape), k)
            self.assertEqual(ck.hparams["tie_weight"], True)
            self.assertEqual(ck.hparams["d_embed"], 24)

    # -- without PyTorch -------------------------------------------------

    def test_converts_without_torch(self):
        """convert.py needs the standard library and numpy only: with
        `import torch` failing, it converts whole-model pickles with their
        corpus cache (both torch.save containers), a bare state_dict of
        BF16 tensors with its config, and Hugging Face directories (a
        legacy pytorch_model.bin of F16 tensors with vocab.pkl,
        model.safetensors with a torch.save vocab.bin) into the same bytes
        as with torch importable; txlgen scores the F32 ones as txl_ref
        does."""
        site = self.path("no-torch")
        os.makedirs(site)
        with open(os.path.join(site, "sitecustomize.py"), "w") as f:
            f.write(NO_TORCH)
        no_torch = dict(os.environ, PYTHONPATH=site)
        r = subprocess.run([mrm.PYTHON, "-c", "import torch"], env=no_torch,
                           capture_output=True, text=True)
        self.assertIn("No module named 'torch'", r.stderr)   # the hook works
        cfg = mrm.make_config(n_token=len(WT_SYMS), tgt_len=4, mem_len=6,
                              d_embed=24, tie_projs=True)
        ref, orig = original_pickle(cfg, seed=30)
        vocab = make_vocab(WT_SYMS, False)
        forms = {}
        for zf in (True, False):
            mpt = self.path(f"nt-model-{zf}.pt")
            cpt = self.path(f"nt-cache-{zf}.pt")
            torch.save(orig, mpt, _use_new_zipfile_serialization=zf)
            save_corpus(cpt, "wt103", vocab, zf)
            forms[f"model.pt zip={zf}"] = (["--weights", mpt, "--vocab",
                                            cpt], True)
        sd, cj = self.path("nt-state.pt"), self.path("nt-state.json")
        torch.save({k: v.bfloat16() for k, v in ref.state_dict().items()},
                   sd, _use_new_zipfile_serialization=False)
        with open(cj, "w") as f:
            json.dump(cfg.hparams(), f)
        forms["state_dict BF16"] = (["--weights", sd, "--config", cj,
                                     "--vocab", cpt], False)
        for form in ("bin", "safetensors"):
            d = self.path("nt-hf-" + form)
            os.makedirs(d)
            with open(os.path.join(d, "config.json"), "w") as f:
                json.dump(dict({k: v for k, v in cfg.hparams().items() if
                                k not in ("n_token", "tie_projs")},
                               vocab_size=cfg.n_token, untie_r=True,
                               proj_share_all_but_first=True), f)
            st = hf_state(orig)
            if form == "bin":
                torch.save({k: v.half() for k, v in st.items()},
                           os.path.join(d, "pytorch_model.bin"),
                           _use_new_zipfile_serialization=False)
                with open(os.path.join(d, "vocab.pkl"), "wb") as f:
                    pickle.dump(dict(vocab.__dict__), f)
            else:
                checkpoint.write_safetensors(
                    os.path.join(d, "model.safetensors"), st)
                torch.save(dict(vocab.__dict__), os.path.join(d,
                                                              "vocab.bin"))
            forms["hf " + form] = (["--weights", d], form == "safetensors")
        for k, (name, (args, f32)) in enumerate(forms.items()):
            out, want = self.path(f"nt{k}.bin"), self.path(f"nt{k}-torch.bin")
            r = convert(*args, "-o", out, env=no_torch)
            self.assertEqual(r.returncode, 0, f"{name}: {r.stderr}")
            r = convert(*args, "-o", want)
            self.assertEqual(r.returncode, 0, f"{name}: {r.stderr}")
            with open(out, "rb") as f, open(want, "rb") as g:
                self.assertTrue(f.read() == g.read(), name)
            if f32:
                self.check_scores(ref, out, mem_init="zeros"
                                  if name.startswith("hf ") else "empty")

    # -- pickles that run code -------------------------------------------

    def test_malicious_pickles_refused(self):
        marker = self.path("pwned")

        class Evil:
            def __reduce__(self):
                return (os.system, ("touch " + marker,))

        cpt = self.path("ok-cache.pt")
        save_corpus(cpt, "wt103", make_vocab(WT_SYMS, False))
        evil_model = self.path("evil-model.pt")
        torch.save({"model": Evil()}, evil_model)
        evil_vocab = self.path("evil-vocab.pkl")
        with open(evil_vocab, "wb") as f:
            pickle.dump({"idx2sym": WT_SYMS, "x": Evil()}, f)
        evil_legacy = self.path("evil-legacy.pt")
        torch.save({"a": torch.zeros(2), "b": Evil()}, evil_legacy,
                   _use_new_zipfile_serialization=False)
        hf = self.path("evil-hf")
        os.makedirs(hf)
        with open(os.path.join(hf, "config.json"), "w") as f:
            json.dump({"vocab_size": 12, "n_layer": 1}, f)
        shutil.copy(evil_legacy, os.path.join(hf, "pytorch_model.bin"))
        for args in (["--weights", evil_model, "--vocab", cpt],
                     ["--weights", evil_legacy, "--vocab", cpt],
                     ["--weights", hf, "--vocab", cpt]):
            out = self.path("evil.bin")
            r = convert(*args, "-o", out)
            self.assertEqual(r.returncode, 3, r.stderr)
            self.assertIn("refused", r.stderr)
            self.assertIn("system", r.stderr)
            self.assertEqual(len(r.stderr.strip().split("\n")), 1)
            self.assertFalse(os.path.exists(marker), "the command ran")
            self.assertFalse(os.path.exists(out))
        with self.assertRaises(checkpoint.CheckpointError):
            checkpoint.load_pickle_file(evil_vocab)
        self.assertFalse(os.path.exists(marker), "the command ran")

    def test_damaged_files(self):
        cfg = mrm.make_config(n_token=len(WT_SYMS))
        _, orig = original_pickle(cfg, seed=4)
        cpt = self.path("dmg-cache.pt")
        save_corpus(cpt, "wt103", make_vocab(WT_SYMS, False))
        good_zip, good_legacy = self.path("dmg.pt"), self.path("dmg-l.pt")
        torch.save(orig, good_zip)
        torch.save(orig, good_legacy, _use_new_zipfile_serialization=False)
        # a storage of the zip archive one float short
        short = self.path("dmg-short.pt")
        import zipfile
        with zipfile.ZipFile(good_zip) as zin, \
                zipfile.ZipFile(short, "w") as zout:
            for info in zin.infolist():
                data = zin.read(info)
                if info.filename.endswith("/data/0"):
                    data = data[:-4]
                zout.writestr(info, data)
        with open(good_legacy, "rb") as f:
            blob = f.read()
        cut = self.path("dmg-cut.pt")
        with open(cut, "wb") as f:
            f.write(blob[:len(blob) - 100])
        garbage = self.path("dmg-garbage.pt")
        with open(garbage, "wb") as f:
            f.write(b"\x80\x02" + bytes(range(256)))
        for path, phrase in ((short, "holds .* bytes, not"),
                             (cut, "truncated"),
                             (garbage, "not a readable pickle|refused")):
            r = convert("--weights", path, "--vocab", cpt, "-o",
                        self.path("dmg.bin"))
            self.assertEqual(r.returncode, 3, path)
            self.assertRegex(r.stderr, phrase)
            self.assertEqual(len(r.stderr.strip().split("\n")), 1,
                             r.stderr)

    def test_does_not_fit(self):
        cfg = mrm.make_config(n_token=len(WT_SYMS))
        _, orig = original_pickle(cfg, seed=1)
        mpt = self.path("nofit.pt")
        torch.save(orig, mpt)
        cpt = self.path("nofit-cache.pt")
        save_corpus(cpt, "wt103", make_vocab(WT_SYMS + ["extra"], False))
        r = convert("--weights", mpt, "--vocab", cpt, "-o",
                    self.path("nofit.bin"))
        self.assertEqual(r.returncode, 3)
        self.assertRegex(r.stderr, r"13 symbols, the model n_token 12")
        cfgfile = self.path("nofit.json")
        with open(cfgfile, "w") as f:
            json.dump({"d_inner": 48}, f)
        save_corpus(cpt, "wt103", make_vocab(WT_SYMS, False))
        r = convert("--weights", mpt, "--config", cfgfile, "--vocab", cpt,
                    "-o", self.path("nofit.bin"))
        self.assertEqual(r.returncode, 3)
        self.assertRegex(r.stderr, r"CoreNet.0.weight.*shape")

    # -- vocabularies, worked out by hand --------------------------------

    def vocab_model(self, name, symbols, dataset, lower=None,
                    vocab_file=False, special=()):
        """A 1-layer model (random weights) with this vocabulary."""
        cfg = mrm.make_config(n_token=len(symbols), n_layer=1, d_model=16,
                              d_head=8, d_inner=16, tgt_len=4, mem_len=4)
        _, orig = original_pickle(cfg, seed=11)
        mpt = self.path(name + ".pt")
        torch.save(orig, mpt)
        if vocab_file:
            vp = self.path(name + ".txt")
            with open(vp, "w") as f:
                f.write("".join(f"{s} 123\n" for s in symbols))
            args = ["--vocab", vp, "--dataset", dataset]
        else:
            vp = self.path(name + "-cache.pt")
            save_corpus(vp, dataset, make_vocab(symbols, lower, special))
            args = ["--vocab", vp]
        mbin = self.path(name + ".bin")
        r = convert("--weights", mpt, *args, "-o", mbin)
        self.assertEqual(r.returncode, 0, r.stderr)
        return mbin

    def test_word_level_wt103(self):
        mbin = self.vocab_model("wt", WT_SYMS, "wt103", False,
                                special=("<eos>",))
        S = WT_SYMS.index
        specials, res = tokenize(mbin, [
            b" = the cat = \n", b"\n", b"the\tcat\xc2\xa0sat  on\n",
            b"The zzz qqq cat", b"unseen mat\n\nthe"])
        # no end-of-text token: <eos> is a newline, and a text starts
        # after one; unknown words are the corpus's own <unk>
        self.assertEqual(specials, [0, -1, S("<unk>"), len(WT_SYMS)])
        self.assertEqual(res[0], ([S("="), S("the"), S("cat"), S("="), 0],
                                  b"= the cat =\n"))
        self.assertEqual(res[1], ([0], b"\n"))
        # tab and no-break space split words as str.split() does
        self.assertEqual(res[2][0], [S("the"), S("cat"), S("sat"), S("on"),
                                     0])
        self.assertEqual(res[3], ([S("The"), S("<unk>"), S("<unk>"),
                                   S("cat")], b"The <unk> <unk> cat"))
        self.assertEqual(res[4], ([S("<unk>"), S("mat"), 0, 0, S("the")],
                                  b"<unk> mat\n\nthe"))
        # generation: <eos> prints a newline, words a space and the word
        r = subprocess.run([TXLGEN, "--model", mbin, "-n", "40", "--seed",
                            "3", "--text", "the cat", "--temp", "2"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        words = r.stdout.split()
        self.assertTrue(words and all(w in WT_SYMS for w in words),
                        r.stdout)

    def test_word_level_ptb_lower_case(self):
        syms = ["<eos>", "the", "cat", "<unk>", "\u00e9t\u00e9", "n't"]
        mbin = self.vocab_model("ptb", syms, "ptb", True)
        _, res = tokenize(mbin, ["THE Cat \u00c9T\u00c9 N'T dog\n"
                                 .encode()])
        self.assertEqual(res[0], ([1, 2, 4, 5, 3, 0],
                                  "the cat \u00e9t\u00e9 n't <unk>\n"
                                  .encode()))

    def test_word_level_lm1b_vocab_file(self):
        syms = ["<S>", "</S>", "<UNK>", "a", "b"]
        mbin = self.vocab_model("lm1b", syms, "lm1b", vocab_file=True)
        specials, res = tokenize(mbin, [b"a b\nb x\n", b"a"])
        # <S> before and after each line; a prompt is an open sentence
        self.assertEqual(specials, [0, 0, 2, 5])
        self.assertEqual(res[0], ([0, 3, 4, 0, 0, 4, 2, 0],
                                  b"a b\nb <UNK>\n"))
        self.assertEqual(res[1], ([0, 3], b"a"))

    def test_char_level_text8(self):
        syms = list("_etaoinshrdlcumwfgypbvkxjqz")
        mbin = self.vocab_model("text8", syms, "text8", True)
        S = syms.index
        specials, res = tokenize(mbin, [b"Hi there", b"a  b\tc\nd",
                                        b"ok_go", b"no digits 1"])
        self.assertEqual(specials, [-1, -1, -1, 27])
        self.assertEqual(res[0], ([S(c) for c in "hi_there"], b"hi there"))
        # spaces are symbols; other whitespace and newlines vanish, as
        # prep_text8.py + str.split() drop them
        self.assertEqual(res[1], ([S(c) for c in "a__bcd"], b"a  bcd"))
        self.assertEqual(res[2][0], [S(c) for c in "ok_go"])
        # no unknown symbol in text8: refused, as the original refuses it
        self.assertIsNone(res[3][0])
        self.assertIn("vocabulary lacks", res[3][1])
        with open(self.path("digits.txt"), "w") as f:
            f.write("abc 1\n")
        r = subprocess.run([TXLGEN, "--model", mbin, "--score",
                            self.path("digits.txt")],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 1)
        self.assertIn("vocabulary lacks", r.stderr)

    def test_char_level_enwik8(self):
        data = "ab \u00e9\n<x>\t".encode()
        syms = [str(b) for b in sorted(set(data) - {10})]
        mbin = self.vocab_model("enwik8", syms, "enwik8", True)
        specials, res = tokenize(mbin, [data, b"a\x01"])
        self.assertEqual(specials, [-1, -1, -1, len(syms)])
        # each byte its own symbol; newlines are dropped (add_eos False)
        self.assertEqual(res[0], ([syms.index(str(b)) for b in data
                                   if b != 10], data.replace(b"\n", b"")))
        self.assertIsNone(res[1][0])

    def test_unexpressible_vocabularies_refused(self):
        cfg = mrm.make_config(n_token=3, n_layer=1, d_model=16, d_head=8,
                              d_inner=16)
        _, orig = original_pickle(cfg, seed=2)
        mpt = self.path("unexp.pt")
        torch.save(orig, mpt)
        for dataset, syms, phrase in (
                ("wt103", ["<eos>", "a\u2581b", "c"], "U\\+2581"),
                ("text8", ["a", "bc", "_"], "not one character"),
                ("enwik8", ["97", "300", "32"], "not a byte value"),
                ("wt103", ["a", "b", "c"], "no <eos>")):
            cpt = self.path("unexp-cache.pt")
            save_corpus(cpt, dataset, make_vocab(syms, False, ()))
            r = convert("--weights", mpt, "--vocab", cpt, "-o",
                        self.path("unexp.bin"))
            self.assertEqual(r.returncode, 3, dataset)
            self.assertRegex(r.stderr, phrase)
            self.assertFalse(os.path.exists(self.path("unexp.bin")))


if __name__ == "__main__":
    unittest.main()
