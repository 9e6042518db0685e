#!/usr/bin/python3
"""models/train.py on a tiny corpus: training lowers the loss, --resume
continues the same run, and txlgen --score of the exported model gives the
bits per byte of the PyTorch evaluation of the same checkpoint; the same
for the other models it trains (adaptive softmax, attn_type 1 and 3),
whose exports must hold the checkpoint's model, and the adaptive span,
whose export txlgen must score as the PyTorch reference does.

Run: TXLGEN=build/cmd/txlgen OMP_WAIT_POLICY=PASSIVE \\
     /usr/bin/python3 tests/test_train.py
(without TXLGEN the txlgen comparison is skipped).
"""

import contextlib
import io
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import torch

import srctree  # noqa: F401 (models/ on sys.path)
from txlgen import train, txlfile
from txlgen.conventions import NO_MEMORY_KINDS

HERE = os.path.dirname(os.path.abspath(__file__))

TMP = None
TRAIN = VALID = TOK = None

# A small model that trains in a few seconds; dropout on, so that resuming
# must restore the random number generator too.
SHAPE = ["--layers", "2", "--d-model", "32", "--heads", "2", "--d-head",
         "16", "--d-inner", "64", "--seg-len", "16", "--mem-len", "16",
         "--batch", "4", "--dropout", "0.1", "--lr", "3e-3", "--warmup",
         "5", "--seed", "7", "--log-every", "10", "--threads", "1"]


def make_text(rng, n):
    """Sentences in the style of the corpus, from a small grammar."""
    subj = ["The Congress", "Our nation", "The people", "This government",
            "The Treasury", "Every citizen", "The army"]
    verb = ["has provided", "will secure", "must protect", "shall consider",
            "has increased", "will reduce", "must examine"]
    obj = ["the public revenue", "the common defense", "our commerce",
           "the national debt", "the rights of labor", "peace abroad",
           "the welfare of all"]
    paras = []
    for _ in range(n):
        paras.append(" ".join(f"{rng.choice(subj)} {rng.choice(verb)} "
                              f"{rng.choice(obj)}." for _ in range(4)))
    return "\n\n".join(paras) + "\n"


def run(*args):
    """train.main in this process, its stderr captured."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = train.main(list(args))
    if rc:
        raise AssertionError(f"train.py {args} exited {rc}:\n"
                             f"{err.getvalue()}")
    return err.getvalue()


def losses(run_dir):
    with open(os.path.join(run_dir, "train_log.jsonl")) as f:
        rows = [json.loads(line) for line in f]
    return [(r["step"], r["loss"]) for r in rows if "loss" in r]


def setUpModule():
    global TMP, TRAIN, VALID, TOK
    torch.set_num_threads(1)
    TMP = tempfile.mkdtemp(prefix="txl-train-")
    rng = random.Random(3)
    TRAIN = os.path.join(TMP, "train.txt")
    VALID = os.path.join(TMP, "valid.txt")
    with open(TRAIN, "w") as f:
        f.write(make_text(rng, 150))
    with open(VALID, "w") as f:
        f.write(make_text(rng, 10) + "Fin — déjà vu.\n")   # bytes too
    with contextlib.redirect_stderr(io.StringIO()):
        TOK = train.train_tokenizer(TRAIN, os.path.join(TMP, "spm"), 320,
                                    "unigram")


def tearDownModule():
    shutil.rmtree(TMP, ignore_errors=True)


class TrainTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # One uninterrupted run of 40 steps, shared by the tests.
        cls.full = os.path.join(TMP, "full")
        run("--train", TRAIN, "--valid", VALID, "--tokenizer", TOK,
            "--out", cls.full, "--steps", "40", "--eval-every", "20",
            "--eval-tokens", "0", *SHAPE)

    def test_tokenizer_round_trip(self):
        sp, _ = train.load_tokenizer(TOK)
        with open(VALID, encoding="utf-8") as f:
            text = f.read()
        ids = train.encode(sp, text).tolist()
        self.assertEqual(sp.DecodeIds(ids), text)
        self.assertNotIn(sp.unk_id(), ids)

    def test_loss_goes_down(self):
        ls = [loss for _, loss in losses(self.full)]
        self.assertEqual(len(ls), 40)
        first, last = sum(ls[:5]) / 5, sum(ls[-5:]) / 5
        self.assertLess(last, first - 1.0, f"loss {first:.3f} -> {last:.3f}")

    def test_resume_continues_the_same_run(self):
        part = os.path.join(TMP, "part")
        run("--train", TRAIN, "--valid", VALID, "--tokenizer", TOK,
            "--out", part, "--steps", "40", "--eval-every", "20",
            "--eval-tokens", "0", "--stop-at", "23", *SHAPE)
        self.assertEqual(losses(part)[-1][0], 23)
        run("--out", part, "--resume", "--log-every", "10")
        got, want = losses(part), losses(self.full)
        self.assertEqual([s for s, _ in got], [s for s, _ in want])
        for (step, a), (_, b) in zip(got, want):
            self.assertAlmostEqual(a, b, places=5, msg=f"step {step}")

    def test_checkpoints_hold_the_run_once(self):
        """last.pt: the model, AdamW's two moments and the memory (its
        mem_len rows), nothing twice; best.pt: the model alone."""
        out = os.path.join(TMP, "sizes")
        # a memory as large as the model, so that one copy too many shows
        run("--train", TRAIN, "--tokenizer", TOK, "--out", out, "--steps",
            "2", "--layers", "2", "--d-model", "32", "--heads", "2",
            "--d-head", "16", "--d-inner", "64", "--seg-len", "64",
            "--mem-len", "64", "--batch", "8", "--threads", "1")
        last = train.load_checkpoint(os.path.join(out, "last.pt"))
        model = {t.data_ptr(): t.numel() * t.element_size()
                 for t in last["model"].values()}    # tied ones once
        mems = sum(m.numel() * m.element_size() for m in last["mems"])
        self.assertEqual(mems, 3 * 64 * 8 * 32 * 4)  # n_layer + 1 of them
        for m in last["mems"]:
            self.assertEqual(m.storage().size(), m.numel())
        slack = 64 << 10        # the archive's names, pickle, alignment
        size = os.path.getsize(os.path.join(out, "last.pt"))
        self.assertLessEqual(size, 3 * sum(model.values()) + mems + slack)
        self.assertGreater(size, 3 * sum(model.values()) + mems)
        best = os.path.join(out, "best.pt")
        self.assertLessEqual(os.path.getsize(best),
                             sum(model.values()) + slack)
        self.assertEqual(set(train.load_checkpoint(best)),
                         {"model", "config", "tokenizer", "args", "step",
                          "best_bpb"})

    def test_convert_takes_the_checkpoint(self):
        """convert.py given a checkpoint of train.py writes what
        --export-only does (and the converter's provenance); it takes
        no tokenizer or configuration besides."""
        want = os.path.join(TMP, "exported.bin")
        err = run("--out", self.full, "--export-only", "--export", want,
                  "--dtype", "F32")
        self.assertIn(f"to {want} (", err)
        got = os.path.join(TMP, "converted.bin")
        conv = [sys.executable, os.path.join(HERE, "..", "models",
                                             "convert.py")]
        p = subprocess.run(conv + ["--weights", os.path.join(
            self.full, "best.pt"), "-o", got], capture_output=True,
            text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stderr, f"convert.py: wrote {got} ("
                         f"{txlfile.human_size(os.path.getsize(got))}, "
                         "F32)\n")
        (m1, t1), (m2, t2) = txlfile.read(got), txlfile.read(want)
        self.assertEqual({k: v for k, v in m1.items() if k not in (
            "origin", "converter_version")}, m2)
        self.assertEqual(m1["origin"], "pytorch")
        self.assertEqual(sorted(t1), sorted(t2))
        for k in t1:
            self.assertTrue(np.array_equal(np.asarray(t1[k]),
                                           np.asarray(t2[k])), k)
        # last.pt too (its optimizer and memory let be)
        p = subprocess.run(conv + ["--weights", os.path.join(
            self.full, "last.pt"), "-o", got], capture_output=True,
            text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        p = subprocess.run(conv + ["--weights", os.path.join(
            self.full, "last.pt"), "--tokenizer", TOK, "-o", got],
            capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertEqual(len(p.stderr.splitlines()), 1, p.stderr)
        self.assertIn("a checkpoint of txlgen's train.py holds its "
                      "configuration and tokenizer", p.stderr)

    def test_txlgen_score_matches_pytorch(self):
        txlgen = os.environ.get("TXLGEN")
        if not txlgen:
            self.skipTest("TXLGEN is not set (path of the txlgen binary); "
                          "txlgen --score comparison skipped")
        out = os.path.join(TMP, "m.bin")
        run("--out", self.full, "--export-only", "--export", out,
            "--dtype", "F32")
        ckpt = torch.load(os.path.join(self.full, "best.pt"),
                          map_location="cpu")
        with contextlib.redirect_stderr(io.StringIO()):
            want = train.final_eval(ckpt, VALID, ckpt["config"]["tgt_len"])
        env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
        env.pop("TXLGEN_MODEL", None)
        p = subprocess.run([txlgen, "--model", out, "--score", VALID,
                            "--json"], capture_output=True, text=True,
                           env=env, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        summary = json.loads(p.stdout.strip().splitlines()[-1])
        self.assertAlmostEqual(summary["bpb"], want, delta=1e-3,
                               msg=f"txlgen {summary} vs PyTorch {want}")

    def test_init_from_a_model_file(self):
        """--init takes a txlgen model file: the model starts from exactly
        the weights the file holds (F32: the checkpoint's), tied output
        weight included, the shape's buffers rebuilt."""
        out = os.path.join(TMP, "init.bin")
        run("--out", self.full, "--export-only", "--export", out,
            "--dtype", "F32")
        init = train.load_init(out)["model"]
        ckpt = torch.load(os.path.join(self.full, "best.pt"),
                          map_location="cpu")["model"]
        for name, t in ckpt.items():
            if name == "pos_emb.inv_freq":
                self.assertNotIn(name, init)
                continue
            self.assertTrue(torch.equal(init[name], t), name)
        # and a run starts from them: a short fine-tune continues training
        run("--train", TRAIN, "--valid", VALID, "--tokenizer", TOK,
            "--out", os.path.join(TMP, "ft"), "--init", out, "--steps", "2",
            "--eval-every", "2", "--eval-tokens", "0", *SHAPE)

    def test_txlfile_sets_metadata(self):
        """txlfile.py --set writes a copy with a metadata key set, the
        weights unchanged; KEY= removes it."""
        from txlgen import txlfile
        src = os.path.join(TMP, "meta-src.bin")
        run("--out", self.full, "--export-only", "--export", src,
            "--dtype", "BF16")
        dst = os.path.join(TMP, "meta-dst.bin")
        rec = '{"temp": 0.9, "repeat_penalty": 1.1}'
        p = subprocess.run([sys.executable, os.path.join(
            os.path.dirname(HERE), "models", "txlfile.py"), "--dtype", "BF16",
            "--set", "recommended=" + rec, src, dst], capture_output=True,
            text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        m0, t0 = txlfile.read(src)
        m1, t1 = txlfile.read(dst)
        self.assertEqual(json.loads(m1.pop("recommended")), json.loads(rec))
        self.assertEqual(m0, m1)
        self.assertEqual(sorted(t0), sorted(t1))
        for k in t0:
            if k == "tokenizer.model":
                self.assertEqual(t0[k], t1[k])
            else:
                self.assertTrue((t0[k] == t1[k]).all(), k)
        txlfile.restore(dst, dst, "BF16", {"recommended": None})
        self.assertNotIn("recommended", txlfile.read(dst)[0])


class SamplingTest(unittest.TestCase):
    def test_repetition_rates(self):
        from txlgen import sampling
        # "the cat the cat the dog": 6 words: unigrams 3 distinct of 6;
        # bigrams (the cat)(cat the)(the cat)(cat the)(the dog): 3 of 5;
        # trigrams: (the cat the)(cat the cat)(the cat the)(cat the dog):
        # 3 of 4; 4-grams: 3 distinct of 3
        ws = sampling.words("The cat, the cat the dog")
        self.assertEqual(ws, ["the", "cat", ",", "the", "cat", "the", "dog"])
        r = sampling.rep_rates([w for w in ws if w != ","])
        for got, want in zip(r, [1 - 3 / 6, 1 - 3 / 5, 1 - 3 / 4, 0.0]):
            self.assertAlmostEqual(got, want)
        self.assertEqual(sampling.rep_rates([]), [0.0] * 4)

    def test_prompts_are_followed_by_their_text(self):
        from txlgen import sampling
        rng = random.Random(5)
        path = os.path.join(TMP, "heldout.txt")
        with open(path, "w") as f:
            f.write(make_text(rng, 60))
        with open(path) as f:
            text = f.read()
        pairs = sampling.prompts(path, 5, 20)
        self.assertEqual(len(pairs), 5)
        for prompt, ref in pairs:
            self.assertEqual(len(prompt.split()), sampling.PROMPT_WORDS)
            self.assertIn(prompt + ref, text)
            self.assertGreaterEqual(len(sampling.words(ref)), 20)


class VariantTest(unittest.TestCase):
    """Other models train.py trains (adaptive input and softmax, attn_type
    1 and 3): a few steps lower the loss, and the export converts into a
    file that holds the checkpoint's model (read back into txl_ref, the
    same log-probs) and that txlgen scores as PyTorch does."""

    VARIANTS = {
        "adaptive": ["--cutoffs", "40,120", "--div-val", "2",
                     "--tie-projs", "false,true,false"],
        "attn1": ["--attn-type", "1", "--d-embed", "24"],
        "attn3_adaptive": ["--attn-type", "3", "--mem-len", "0",
                           "--cutoffs", "60"],
    }

    @classmethod
    def setUpClass(cls):
        cls.runs = {}
        for name, extra in cls.VARIANTS.items():
            out = os.path.join(TMP, name)
            run("--train", TRAIN, "--valid", VALID, "--tokenizer", TOK,
                "--out", out, "--steps", "12", "--eval-every", "12",
                "--eval-tokens", "0",
                *_override(SHAPE, ["--dropout", "0", "--lr", "1e-2",
                                  "--warmup", "2"] + extra),
                "--export", os.path.join(out, "m.bin"))
            cls.runs[name] = out

    def test_loss_goes_down(self):
        for name, out in self.runs.items():
            ls = [loss for _, loss in losses(out)]
            self.assertEqual(len(ls), 12, name)
            first, last = sum(ls[:3]) / 3, sum(ls[-3:]) / 3
            self.assertLess(last, first - 0.5,
                            f"{name}: loss {first:.3f} -> {last:.3f}")

    def test_export_holds_the_checkpoint(self):
        from txlgen import txl_ref, txlfile
        want_tensors = {"adaptive": ["crit.cluster_weight",
                                     "word_emb.emb_projs.2",
                                     "crit.out_projs.0", "crit.out_projs.2"],
                        "attn1": ["r_emb", "r_bias", "r_w_bias",
                                  "crit.out_projs.0"],
                        "attn3_adaptive": ["r_emb", "crit.cluster_weight",
                                           "layers.1.dec_attn.kv_net.weight"]}
        sp, _ = train.load_tokenizer(TOK)
        with open(VALID, encoding="utf-8") as f:
            ids = train.encode(sp, f.read()).tolist()[:120]
        for name, out in self.runs.items():
            meta, tensors = txlfile.read(os.path.join(out, "m.bin"))
            for t in want_tensors[name]:
                self.assertIn(t, tensors, name)
            self.assertNotIn("crit.out_projs.1", tensors, name)  # tied
            ckpt = train.load_checkpoint(os.path.join(out, "best.pt"))
            cfg = train.TxlConfig.from_dict(ckpt["config"])
            cfg.dropout = 0.0
            model = train.MemTransformerLM(cfg)
            model.load_state_dict(ckpt["model"])
            self.assertEqual(json.loads(meta["attn_type"]), cfg.attn_type)
            self.assertEqual(json.loads(meta["cutoffs"]), cfg.cutoffs)
            self.assertEqual(json.loads(meta["mem_len"]),
                             0 if cfg.attn_type in NO_MEMORY_KINDS else 16)
            back = txl_ref.from_tensors(
                *txlfile.read(os.path.join(out, "m.bin")))
            seg, mem = cfg.tgt_len, back.mem_len
            want = train.score_ids(model, ids, seg, mem)
            got = txl_ref.score_ids(back, ids, seg, mem)
            self.assertLess(float((got - want).abs().max()), 1e-6, name)

    def test_vanilla_transformer_refuses_memory(self):
        err = io.StringIO()
        with contextlib.redirect_stderr(err), \
                self.assertRaises(SystemExit) as cm:
            train.parse_args(["--out", TMP, "--attn-type", "2",
                              "--mem-len", "8"])
        self.assertEqual(cm.exception.code, 2)
        self.assertIn("without memory", err.getvalue())
        a = train.parse_args(["--out", TMP, "--attn-type", "3"])
        self.assertEqual(a.mem_len, 0)

    def test_txlgen_score_matches_pytorch(self):
        txlgen = os.environ.get("TXLGEN")
        if not txlgen:
            self.skipTest("TXLGEN is not set")
        env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
        env.pop("TXLGEN_MODEL", None)
        for name, out in self.runs.items():
            p = subprocess.run([txlgen, "--model", os.path.join(out, "m.bin"),
                                "--score", VALID, "--json"],
                               capture_output=True, text=True, env=env,
                               timeout=120)
            self.assertEqual(p.returncode, 0, f"{name}: {p.stderr}")
            ckpt = train.load_checkpoint(os.path.join(out, "best.pt"))
            with contextlib.redirect_stderr(io.StringIO()):
                want = train.final_eval(ckpt, VALID,
                                        ckpt["config"]["tgt_len"])
            summary = json.loads(p.stdout.strip().splitlines()[-1])
            self.assertAlmostEqual(summary["bpb"], want, delta=1e-3,
                                   msg=f"{name}: txlgen {summary} vs "
                                   f"PyTorch {want}")


class SpanTrainTest(unittest.TestCase):
    """--attn-type 4: an adaptive-span model trains (the loss goes down,
    the spans move and stay in [0, 1]), its batched training pass
    computes what span_ref's key-by-key evaluation does, and txlgen
    --score of its export gives span_ref's log-probs of the checkpoint."""

    # spans of 0.1 x 160 = 16 tokens and a ramp of 8 at the start: every
    # layer's window trimmed to 32 of the 160 positions
    # (span_ref.layer_window), its heads' masks cutting inside it
    SPAN = ["--attn-type", "4", "--attn-span", "160", "--span-ramp", "8",
            "--span-init", "0.1", "--span-loss", "1e-3", "--mem-len", "0"]

    @classmethod
    def setUpClass(cls):
        cls.out = os.path.join(TMP, "span")
        run("--train", TRAIN, "--valid", VALID, "--tokenizer", TOK,
            "--out", cls.out, "--steps", "12", "--eval-every", "12",
            "--eval-tokens", "0",
            *_override(SHAPE, ["--lr", "1e-2", "--warmup", "2"] + cls.SPAN),
            "--export", os.path.join(cls.out, "m.bin"), "--dtype", "F32")
        ckpt = train.load_checkpoint(os.path.join(cls.out, "best.pt"))
        cls.model = train.new_model(train.config_of(ckpt))
        cls.model.load_state_dict(ckpt["model"])
        cls.model.eval()
        sp, _ = train.load_tokenizer(TOK)
        with open(VALID, encoding="utf-8") as f:
            cls.ids = train.encode(sp, f.read()).tolist()

    def test_loss_goes_down_and_spans_move(self):
        ls = [loss for _, loss in losses(self.out)]
        self.assertEqual(len(ls), 12)
        first, last = sum(ls[:3]) / 3, sum(ls[-3:]) / 3
        self.assertLess(last, first - 0.5, f"loss {first:.3f} -> {last:.3f}")
        cv = torch.cat([c.flatten() for c in self.model.spans()])
        self.assertEqual(cv.numel(), 4)                 # 2 layers x 2 heads
        self.assertGreater(float((cv - 0.1).abs().max()), 1e-3, cv)
        self.assertTrue(bool(((cv >= 0) & (cv <= 1)).all()), cv)

    def test_training_pass_is_the_reference_evaluation(self):
        """nll() on two streams in segments of 16, from the zero cache,
        against span_ref.score_ids of each stream alone (float32: sums of
        at most 64 products of values near 1, errors about 1e-6)."""
        from txlgen import span_ref
        windows = self.model.windows()
        self.assertTrue(all(w < 160 for w in windows), windows)
        n = 16 * 6
        ids = torch.tensor([self.ids[:n + 1], self.ids[n:2 * n + 1]])
        got, mems = [], None
        with torch.no_grad():
            for p in range(0, n, 16):
                nll, mems = self.model.nll(ids[:, p:p + 16].t(),
                                           ids[:, p + 1:p + 17].t(), mems)
                got.append(nll)
        got = torch.cat(got).double()
        for b in range(2):
            want = -span_ref.score_ids(self.model, ids[b], 16)
            self.assertLess(float((got[:, b] - want).abs().max()), 1e-5)

    def test_txlgen_score_matches_pytorch(self):
        """Every token's log-prob, txlgen on the F32 export against
        span_ref on the checkpoint: within 1e-4 (float32 in both, a
        different order of the sums)."""
        from txlgen import span_ref, txlfile
        txlgen = os.environ.get("TXLGEN")
        if not txlgen:
            self.skipTest("TXLGEN is not set")
        path = os.path.join(self.out, "m.bin")
        meta, _ = txlfile.read(path)
        self.assertEqual((meta["attn_type"], meta["attn_span"],
                          meta["span_ramp"]), ("4", "160", "8"))
        ids_path = os.path.join(self.out, "valid.ids")
        with open(ids_path, "w") as f:
            f.write(" ".join(map(str, self.ids)) + "\n")
        env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
        env.pop("TXLGEN_MODEL", None)
        p = subprocess.run([txlgen, "--model", path, "--score", ids_path,
                            "--ids", "--json"], capture_output=True,
                           text=True, env=env, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        recs = [json.loads(line) for line in p.stdout.splitlines()
                if '"pos"' in line]
        self.assertEqual([r["id"] for r in recs], self.ids[1:])
        got = torch.tensor([float(r["logprob"]) for r in recs],
                           dtype=torch.float64)
        want = span_ref.score_ids(self.model, self.ids, 16)
        self.assertLess(float((got - want).abs().max()), 1e-4)


def _override(args, extra):
    """args with the options in extra replacing theirs."""
    out, i = [], 0
    given = {x for x in extra if x.startswith("--")}
    while i < len(args):
        if args[i] in given:
            i += 2
            continue
        out.append(args[i])
        i += 1
    return out + extra


class DataTest(unittest.TestCase):
    """--typographic and --train-tail, against hand-written results."""

    def test_typographic_quotes_apostrophes_dashes(self):
        cases = {
            'He said "it\'s fine" -- and left.':
                "He said \u201cit\u2019s fine\u201d\u2014and left.",
            "\"Yes,\" (he wrote) 'no' in the '90s--twice":
                "\u201cYes,\u201d (he wrote) \u2018no\u2019 in the "
                "\u201890s\u2014twice",
            'one\n"two" three\'\n\'four':
                "one\n\u201ctwo\u201d three\u2019\n\u2018four",
            "nothing to change": "nothing to change",
        }
        for src, want in cases.items():
            self.assertEqual(train.typographic(src), want, repr(src))

    def test_augment_rewrites_a_seeded_fraction_of_addresses(self):
        docs = [f"Address {i}: the people's \"house\"." for i in range(200)]
        text = "\n\n".join(docs) + "\n"
        self.assertEqual(train.augment_typographic(text, 0.0, 1), text)
        out = train.augment_typographic(text, 0.5, 1)
        self.assertEqual(out, train.augment_typographic(text, 0.5, 1))
        got = train.documents(out)
        self.assertEqual(len(got), len(docs))
        curly = sum(d == train.typographic(s) != s
                    for d, s in zip(got, train.documents(text)))
        plain = sum(d == s for d, s in zip(got, train.documents(text)))
        self.assertEqual(curly + plain, len(docs))
        self.assertTrue(70 <= curly <= 130, curly)
        self.assertEqual(train.typographic(out), train.typographic(text))

    def test_train_tail_cuts_at_an_address(self):
        text = "\n\n".join(["a" * 10, "b" * 10, "c" * 10, "d" * 10])
        self.assertEqual(train.train_tail(text, 1.0), text)
        # 46 characters, the addresses start at 0, 12, 24 and 36.  The last
        # half starts at 23: the tail is "c" and "d"; the last 30% starts
        # at 32.2: "d" alone; the last 75% at 11.5: "b" to "d".
        self.assertEqual(train.train_tail(text, 0.5), "c" * 10 + "\n\n" +
                         "d" * 10)
        self.assertEqual(train.train_tail(text, 0.3), "d" * 10)
        self.assertEqual(train.train_tail(text, 0.75), text[12:])
        self.assertEqual(train.train_tail(text, 0.01), "d" * 10)


if __name__ == "__main__":
    unittest.main()
