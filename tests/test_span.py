#!/usr/bin/python3
"""The adaptive attention span (attn_type 4) against the PyTorch reference
(models/txlgen/span_ref.py; tools/check_adaptive_span.py holds that to
the original code).

Random-weight models (txlgen.span_model: every parameter random, the
attention peaked, each head its own span) are saved as the adaptive-span
trainer saves its checkpoints (the DataParallel state_dict in a dict with
an Adagrad state), with a corpus prepared as its prep scripts prepare
enwik8 and text8, and converted with

  models/convert.py --weights ckpt.pt --vocab-corpus train.txt \\
      --dataset text8|enwik8 --span-ramp R -o m.bin

The spans are chosen so that the original trims some layers (a window
shorter than attn_span) and not others, and so that heads end inside
their soft mask's ramp, at the window, or at no key but the ramp's; one
model's short heads score the keys past their spans far above their own
(TestPastTheSpan), where the original's softmax over the window and its
division by the masked sum + 1e-8 leave their weights short of 1.
txlgen scores the test text's ids from the zero-filled memory, in blocks
and token by token, and every log-prob is within TOL = 1e-4 of the
reference's, which is the original's evaluation (trainer.full_eval: a
cache of zeros, blocks, the cache carried).  Generation follows the
reference too; so do the compact weights (the reference given the stored
values), while the compact memories and quantized activations are held
to the tolerances test_parity.py argues.  State files continue a text
exactly; the tokenizer gives the ids of the original's data.Dictionary;
--info gives the spans, which are recomputed here from the model's
current_val in float32 as the original masks and trims.

Run:  TXLGEN=build/cmd/txlgen /usr/bin/python3 \\
      tests/test_span.py -v
"""

import json
import math
import os
import re
import shutil
import struct
import subprocess
import tempfile
import unittest

import numpy as np
import torch

import srctree  # noqa: F401 (models/ on sys.path)
from txlgen.conventions import ADAPTIVE_SPAN
import clitest
from txlgen import random_model as mrm, span_model, span_ref

TOL = 1e-4
N = 700                 # ids scored per case: past the longest span (256)
TXLGEN = mrm.find_program("TXLGEN", "cmd", "txlgen")

# name -> span_model.build() arguments.  "text8": 3 layers of 4 heads,
# layer 0 trimmed to a window of 64, heads from the ramp alone (current_val
# 0) to the whole span (1.0); "enwik8": 2 layers of 2 heads, ramp 32.
MODELS = {
    "text8": dict(dataset="text8", spans=[[0.02, 0.1, 0.0, 0.05],
                                          [0.3, 0.6, 0.15, 0.9],
                                          [1.0, 0.01, 0.45, 0.2]],
                  attn_span=256, span_ramp=16, d_model=128, d_inner=256),
    "enwik8": dict(dataset="enwik8", spans=[[0.0, 0.25], [0.05, 0.7]],
                   attn_span=192, span_ramp=32, d_model=64, d_inner=128,
                   seed=1),
}
# "past": heads whose scores favour the keys beyond their spans
# (span_model.favour_past): head 0 of layer 0 (window 256) and of layer 1
# (trimmed to 192), each reading 37 positions; enwik8 layout, ramp 32.
MODELS["past"] = dict(dataset="enwik8", spans=[[0.02, 0.3, 0.6, 1.0],
                                               [0.02, 0.1, 0.25, 0.4],
                                               [0.05, 0.15, 0.5, 0.9]],
                      attn_span=256, span_ramp=32, d_model=128, d_inner=256,
                      seed=3, past=[(0, 0), (1, 0)])
# compact weights: the text8 model's shape, the weights rounded to them
for _dt in ("F16", "BF16", "Q8_0", "Q4_0"):
    MODELS[_dt.lower()] = dict(MODELS["text8"], dtype=_dt, seed=2)

_tmp = None
_models = {}
_report = []


def setUpModule():
    global _tmp
    if TXLGEN is None:
        raise unittest.SkipTest("no txlgen binary (set TXLGEN)")
    torch.set_num_threads(1)
    _tmp = tempfile.mkdtemp(prefix="txl-span-")
    unittest.addModuleCleanup(shutil.rmtree, _tmp, ignore_errors=True)
    for name, kw in MODELS.items():
        _models[name] = span_model.build(os.path.join(_tmp, name), **kw)


def tearDownModule():
    clitest.parity_report(_report)


def run(*argv, check=True, **kw):
    r = subprocess.run([TXLGEN, *argv], capture_output=True, text=True,
                       timeout=120, **kw)
    if check and r.returncode != 0:
        raise AssertionError(f"txlgen {' '.join(argv)} exited "
                             f"{r.returncode}: {r.stderr.strip()[-2000:]}")
    return r


def write_ids(ids):
    fd, path = tempfile.mkstemp(suffix=".ids", dir=_tmp)
    with os.fdopen(fd, "w") as f:
        f.write(" ".join(map(str, ids)) + "\n")
    return path


def score(path, ids, *extra):
    """txlgen --score IDS --ids --json: the log-probs of ids[1:]."""
    r = run("--model", path, "--score", write_ids(ids), "--ids", "--json",
            *extra)
    recs = [json.loads(line) for line in r.stdout.splitlines()
            if '"pos"' in line]
    assert [rec["id"] for rec in recs] == list(ids[1:]), r.stdout[:300]
    return [float(rec["logprob"]) for rec in recs]


def max_diff(a, b):
    assert len(a) == len(b), (len(a), len(b))
    return max(abs(x - y) for x, y in zip(a, b))


def expected_spans(cv, attn_span, ramp):
    """The distances a head reads, from its current_val: those whose soft
    mask is not 0 (computed in float32 as the original), within the
    layer's window (the original's trimming, from the layer's largest
    current_val in double, rounded down to a multiple of 64)."""
    cv = np.asarray(cv, np.float32)
    size = min(attn_span, max(0, math.ceil(float(cv.max()) * attn_span) +
                              ramp))
    window = attn_span - min(attn_span - 1, attn_span - size) // 64 * 64
    out = []
    for z in (cv * np.float32(attn_span)).astype(np.float32):
        x = np.arange(1, window + 1)
        m = np.clip(((1 - x).astype(np.float32) + z) / np.float32(ramp) +
                    np.float32(1), 0, 1)
        out.append(int(x[m > 0].max()) if (m > 0).any() else 0)
    return window, out


class TestSpans(unittest.TestCase):
    def test_info_lists_the_spans(self):
        for name in ("text8", "enwik8"):
            m = _models[name]
            info = json.loads(run("--model", m.path, "--info",
                                  "--json").stdout)
            att = info["attention"]
            self.assertEqual(att["attn_type"], 4)
            self.assertEqual(att["attn_span"], m.cfg.attn_span)
            self.assertEqual(att["span_ramp"], m.cfg.span_ramp)
            want = [expected_spans(cv, m.cfg.attn_span, m.cfg.span_ramp)[1]
                    for cv in MODELS[name]["spans"]]
            self.assertEqual(att["spans"], want, name)
            # a session keeps the longest window of a head that reads
            # a key (its keys past the span count in its softmax)
            windows = [expected_spans(cv, m.cfg.attn_span,
                                      m.cfg.span_ramp)
                       for cv in MODELS[name]["spans"]]
            self.assertEqual(info["session"]["mem_len"],
                             max(w for w, s in windows if max(s) > 0))
            self.assertEqual(att["windows"], [w if max(s) > 0 else 0
                                              for w, s in windows])
            # the windows of every layer, and the token itself
            self.assertEqual(info["session"]["receptive_field"],
                             sum(att["windows"]) + 1)
            text = run("--model", m.path, "--info").stdout
            self.assertIn("    0: " + json.dumps(want[0]).replace(" ", ""),
                          text)

    def test_the_spans_trim_and_mask(self):
        """The test models are what the tests say: a layer trimmed, one
        not, heads cut inside their ramp and heads at the window."""
        m = _models["text8"]
        windows = m.model.windows()
        self.assertLess(min(windows), m.cfg.attn_span)
        self.assertEqual(max(windows), m.cfg.attn_span)
        spans = [expected_spans(cv, m.cfg.attn_span, m.cfg.span_ramp)
                 for cv in MODELS["text8"]["spans"]]
        self.assertEqual([w for w, _ in spans], windows)
        ends = [n for w, s in spans for n in s if n < w]
        self.assertGreater(len(ends), 6)        # ended by their masks
        self.assertTrue(any(n == w for w, s in spans for n in s))

    def test_memory_is_sized_to_the_windows(self):
        """A session's bytes follow the layers' windows (a head keeps its
        layer's window: the keys past its span count in its softmax's
        partition function): the text8 model's shape with short spans
        only (every layer trimmed to 64 positions) takes several times
        less than with every head spanning the whole attn_span."""
        got = {}
        for k, spans in (("short", [[0.02, 0.1, 0.0, 0.05]] * 3),
                         ("full", [[1.0] * 4] * 3)):
            sm = span_model.build(os.path.join(_tmp, k),
                                  **dict(MODELS["text8"], spans=spans))
            info = json.loads(run("--model", sm.path, "--info", "--json",
                                  "--seg-len", "1").stdout)
            got[k] = info["session"]["bytes"]
            self.assertEqual(info["session"]["mem_len"],
                             64 if k == "short" else 256)
        # K and V rows: 768 of the windows, 3072 (+ slack) in full
        self.assertGreater(got["full"], 2.2 * got["short"], got)


class TestParity(unittest.TestCase):
    def compare(self, name, seg_len, n=N, tol=TOL, extra=()):
        m = _models[name]
        ids = m.ids[:n]
        got = score(m.path, ids, "--seg-len", str(seg_len), *extra)
        ref = span_ref.score_ids(m.model, ids, seg_len).tolist()
        d = max_diff(got, ref)
        _report.append(f"{self._testMethodName:<28} {name:<7} seg "
                       f"{seg_len:<3} {d:.2e}")
        self.assertLessEqual(d, tol, f"{name} --seg-len {seg_len} "
                             f"{' '.join(extra)}: max |diff| {d:.3g}")
        return got, ref

    def test_blocks_text8(self):
        self.compare("text8", 64)

    def test_blocks_enwik8(self):
        self.compare("enwik8", 64)

    def test_token_by_token_text8(self):
        self.compare("text8", 1)

    def test_token_by_token_enwik8(self):
        self.compare("enwik8", 1)

    def test_few_queries_and_odd_blocks(self):
        # blocks of up to 8 queries take the few-query path, longer
        # ones the segment path
        for seg in (3, 8, 9, 100):
            self.compare("text8", seg, n=400)

    def test_model_block_size(self):
        # the converter's default segment, the original's --block-sz 512
        m = _models["enwik8"]
        got = score(m.path, m.ids[:N])
        ref = span_ref.score_ids(m.model, m.ids[:N], 512).tolist()
        self.assertLessEqual(max_diff(got, ref), TOL)

    def test_zero_memory_matters(self):
        """The memory starts as zero states, as the original's cache, not
        empty: their keys and values are 0 but their position terms take
        a share of every softmax, which moves the first predictions by
        far more than TOL."""
        m = _models["text8"]
        ids = m.ids[:200]
        got = score(m.path, ids, "--seg-len", "64")
        ref = span_ref.score_ids(m.model, ids, 64).tolist()
        empty = span_ref.score_ids(m.model, ids, 64, zeros=False).tolist()
        self.assertLessEqual(max_diff(got, ref), TOL)
        self.assertGreater(max_diff(got[:20], empty[:20]), 1000 * TOL)


class TestPastTheSpan(unittest.TestCase):
    """Heads whose softmax over their layer's window puts almost all its
    mass beyond their spans, where their masks are 0: the original
    divides the masked weights by their sum + 1e-8, which leaves them
    well short of 1 there (its softmax is the window's, not the span's),
    and txlgen computes the same (the scores of the rest of the window
    counted in the partition function)."""

    def test_the_case_occurs(self):
        """The reference's masked sums of the two heads are far below
        1e-8 at some positions and near it at many: their weights sum to
        mass / (mass + 1e-8), from almost 0 to almost 1; and leaving the
        1e-8 out moves the log-probs by far more than TOL."""
        m = _models["past"]
        ids = m.ids[:N]
        atts = [layer.attn for layer in m.model.layers]
        for a in atts:
            a.masses = []
        try:
            ref = span_ref.score_ids(m.model, ids, 64).tolist()
            masses = [torch.cat([x.reshape(x.shape[0], -1)
                                 for x in a.masses], 1) for a in atts]
        finally:
            for a in atts:
                a.masses = None
        for layer, h in MODELS["past"]["past"]:
            f = masses[layer][h] / (masses[layer][h] + 1e-8)
            self.assertLess(float(f.min()), 0.01, (layer, h))
            self.assertGreater(float((f < 0.9).float().mean()), 0.3,
                               (layer, h))
            self.assertGreater(float((f > 0.99).float().mean()), 0.01,
                               (layer, h))
        # the other heads of the first layer: weights summing to 1
        for h in range(1, 4):
            self.assertGreater(float(masses[0][h].min()), 1e-3, h)
        cls = span_ref.SpanAttention
        cls.renorm_eps = 0.0
        try:
            bare = span_ref.score_ids(m.model, ids, 64).tolist()
        finally:
            cls.renorm_eps = 1e-8
        self.assertGreater(max_diff(ref, bare), 1000 * TOL)

    def compare(self, seg_len, n=N):
        m = _models["past"]
        ids = m.ids[:n]
        got = score(m.path, ids, "--seg-len", str(seg_len))
        ref = span_ref.score_ids(m.model, ids, seg_len).tolist()
        d = max_diff(got, ref)
        _report.append(f"past the span seg {seg_len:<3} {d:.2e}")
        self.assertLessEqual(d, TOL, f"--seg-len {seg_len}: {d:.3g}")

    def test_blocks(self):
        self.compare(64)

    def test_token_by_token(self):
        self.compare(1)

    def test_few_queries_and_odd_blocks(self):
        # up to 8 queries: the few-query path; 100: units of 32 rows
        for seg in (5, 8, 100):
            self.compare(seg, n=400)

    def test_generation_and_batches(self):
        """Greedy generation alone and as 3 streams of a batch (each
        stream's few-query units in one task): each sample's log-probs
        those of the reference following its tokens."""
        TestGeneration.check(self, "past", 0)
        TestGeneration.check(self, "past", 0, extra=("--n-samples", "3"))


class TestGeneration(unittest.TestCase):
    """Generation: the prompt fed, then one token at a time from the zero
    memory; the reference follows txlgen's tokens."""

    def check(self, name, temp, seg_len=16, n=80, extra=()):
        """(extra: --n-samples K: each of the K samples checked)"""
        m = _models[name]
        prompt = m.text[:50].decode("utf-8", "replace")
        r = run("--model", m.path, "--text", prompt, "-n", str(n), "--temp",
                str(temp), "--top-k", "0", "--top-p", "1", "--min-p", "0",
                "--json", "--seed", "3", "--seg-len", str(seg_len),
                "--ignore-eos", *extra)
        events = [json.loads(line) for line in r.stdout.splitlines()]
        samples = sorted({ev.get("sample", 0) for ev in events})
        if extra:
            self.assertEqual(len(samples), int(extra[-1]))
        for i in samples:
            gen = [(int(g["id"]), float(g["logprob"])) for g in events
                   if "id" in g and "logprob" in g and
                   g.get("sample", 0) == i]
            TestGeneration.follow(self, m, name, temp, seg_len, n, prompt,
                                  gen)

    def follow(self, m, name, temp, seg_len, n, prompt, gen):
        self.assertEqual(len(gen), n)
        toks = [int(x) for x in run("--model", m.path, "--tokenize",
                                    "-", input=prompt).stdout.split()]
        model, worst = m.model, 0.0
        with torch.no_grad():
            cache = model.zero_cache()
            lp = None
            for s in range(0, len(toks), seg_len):
                lp, cache = model(torch.tensor(toks[s:s + seg_len]), cache)
            lp = lp[-1].double()
            for tok, got in gen:
                worst = max(worst, abs(float(lp[tok]) - got))
                if temp == 0:
                    self.assertGreaterEqual(float(lp[tok]),
                                            float(lp.max()) - 2 * TOL)
                out, cache = model(torch.tensor([tok]), cache)
                lp = out[-1].double()
        _report.append(f"generate {name} temp {temp}: {worst:.2e}")
        self.assertLessEqual(worst, TOL)
        if temp > 0:
            self.assertGreater(len(set(t for t, _ in gen)), 5)

    def test_greedy_text8(self):
        self.check("text8", 0)

    def test_sampled_enwik8(self):
        self.check("enwik8", 1.5, seg_len=7)


class TestFormats(unittest.TestCase):
    """Compact weights, computed as stored: the reference has the stored
    values, so blocks stay within TOL; one token at a time, Q8_0 and Q4_0
    products quantize the activations (test_parity.TestQ8Activations
    argues 128 / 254 at most, 16 / 254 on average)."""

    def test_blocks(self):
        for name in ("f16", "bf16", "q8_0", "q4_0"):
            with self.subTest(name):
                m = _models[name]
                got = score(m.path, m.ids[:N], "--seg-len", "64")
                ref = span_ref.score_ids(m.model, m.ids[:N], 64).tolist()
                self.assertLessEqual(max_diff(got, ref), TOL, name)

    def test_f16_token_by_token(self):
        m = _models["f16"]
        got = score(m.path, m.ids[:300], "--seg-len", "1")
        ref = span_ref.score_ids(m.model, m.ids[:300], 1).tolist()
        self.assertLessEqual(max_diff(got, ref), TOL)

    def test_quantized_token_by_token(self):
        for name in ("q8_0", "q4_0"):
            with self.subTest(name):
                m = _models[name]
                got = score(m.path, m.ids[:300], "--seg-len", "1")
                ref = span_ref.score_ids(m.model, m.ids[:300], 1).tolist()
                devs = [abs(a - b) for a, b in zip(got, ref)]
                self.assertLessEqual(max(devs), 128 / 254, name)
                self.assertLessEqual(sum(devs) / len(devs), 16 / 254, name)
                self.assertGreater(max(devs), TOL, name)   # quantized


class TestKvType(unittest.TestCase):
    """The memory in F16, BF16, Q8_0, Q4_0 (d_head 32): a relative error
    of u per stored key, value and position term (test_parity.TestKvType:
    the tolerance 64 u), more than F32's, and in the order of the types'
    steps."""

    U = {"F16": 2.0 ** -11, "BF16": 2.0 ** -8, "Q8_0": 1 / 254,
         "Q4_0": 1 / 16}

    def test_compact_memories(self):
        for seg in ("64", "1"):
            m = _models["text8"]
            ids = m.ids[:300]
            ref = span_ref.score_ids(m.model, ids, int(seg)).tolist()
            dev = {}
            for kv in self.U:
                got = score(m.path, ids, "--seg-len", seg, "--kv-type", kv)
                dev[kv] = max_diff(got, ref)
                self.assertLessEqual(dev[kv], 64 * self.U[kv], (seg, dev))
            _report.append(f"kv types seg {seg}: {dev}")
            self.assertGreater(dev["F16"], 2 * TOL, dev)
            self.assertLess(dev["F16"], dev["BF16"], dev)
            self.assertLess(dev["BF16"], dev["Q4_0"], dev)


class TestState(unittest.TestCase):
    def test_a_state_continues_the_text(self):
        """Prime a text and save the memory; load it in another run and
        score the rest: the log-probs of scoring the whole text at once
        (blocks restart at the load: within TOL).  A Q8_0 memory saved is
        loaded into an F32 session, as rounded as it was."""
        m = _models["enwik8"]
        cut = m.text.index(b"\n", 400) + 1
        end = m.text.index(b"\n", 900) + 1
        paths = {}
        for k, text in (("a", m.text[:cut]), ("b", m.text[cut:end]),
                        ("ab", m.text[:end])):
            paths[k] = os.path.join(_tmp, k + ".txt")
            with open(paths[k], "wb") as f:
                f.write(text)
        n_a = len(run("--model", m.path, "--tokenize",
                      paths["a"]).stdout.split())
        state = os.path.join(_tmp, "s.state")

        def lps(r):
            return [float(json.loads(line)["logprob"])
                    for line in r.stdout.splitlines() if '"pos"' in line]
        whole = lps(run("--model", m.path, "--score", paths["ab"], "--json",
                        "--seg-len", "50"))
        for kv in ("F32", "Q8_0"):
            run("--model", m.path, "--prime", paths["a"], "--text", "",
                "-n", "0", "--seg-len", "50", "--kv-type", kv,
                "--state-out", state)
            got = lps(run("--model", m.path, "--score", paths["b"],
                          "--json", "--seg-len", "50", "--state-in", state))
            # (--score predicts the file's tokens after its first)
            self.assertEqual(len(got), len(whole) - n_a)
            tol = TOL if kv == "F32" else 64 / 254
            self.assertLessEqual(max_diff(got, whole[n_a:]), tol, kv)
        # a state holds each head's window (none for a head of span
        # 0), not mem_len rows per head
        run("--model", m.path, "--prime", paths["a"], "--text", "", "-n",
            "0", "--state-out", state)
        # (and the last --repeat-last-n ids of the text, their number in
        # the header; of each window, the rows the memory fills)
        with open(state, "rb") as f:
            head = f.read(72)
        fill = struct.unpack_from("<I", head, 40)[0]
        n_recent = struct.unpack_from("<I", head, 60)[0]
        self.assertTrue(0 < n_recent <= 64, n_recent)
        rows = 0
        for cv in MODELS["enwik8"]["spans"]:
            w, spans = expected_spans(cv, m.cfg.attn_span, m.cfg.span_ramp)
            rows += sum(min(w, fill) for n in spans if n > 0)
        self.assertEqual(os.path.getsize(state),
                         72 + 2 * rows * m.cfg.d_head * 4 +
                         4 * m.cfg.d_model + 4 * n_recent + 8)

    def test_a_long_text_reads_its_field(self):
        """Of a long prompt only the segments of its receptive field at
        its end are computed (each layer's longest span before a segment):
        the state file and the text generated are those of --read-all,
        byte for byte, with segments shorter and longer than the spans."""
        m = _models["enwik8"]
        path = os.path.join(_tmp, "long.txt")
        with open(path, "wb") as f:
            f.write(m.text * 6)
        # (a prompt file's final newline is not part of the prompt)
        total = len(run("--model", m.path, "--tokenize",
                        path).stdout.split()) - 1
        info = json.loads(run("--model", m.path, "--info", "--json").stdout)
        # what each layer's memory keeps: its window (the keys past a
        # head's span count in its softmax)
        keeps = [min(w, info["session"]["mem_len"])
                 for w in info["attention"]["windows"]]
        state = os.path.join(_tmp, "long.state")
        for seg in (50, 512):
            field = sum(keep + seg - 1 for keep in keeps) + 1
            self.assertGreater(total, field + seg)
            got = []
            for extra in ([], ["--read-all"]):
                r = run("--model", m.path, "-f", path, "-n", "30",
                        "--temp", "0", "--seg-len", str(seg), "--stats",
                        "--state-out", state, *extra)
                with open(state, "rb") as f:
                    got.append((r.stdout, f.read()))
                self.assertIn(f"prompt: {total} tokens", r.stderr)
                computed = re.search(r"the last (\d+) computed", r.stderr)
                if extra:
                    self.assertIsNone(computed)
                else:
                    # from the start of the segment that the last
                    # token reaches back to, through each layer's span
                    # and the segments
                    read = int(computed.group(1))
                    x = total - 1
                    for keep in reversed(keeps):
                        x = x // seg * seg - keep
                    self.assertEqual(total - read, max(x, 0) // seg * seg)
                    self.assertLess(read, field + seg, seg)
            self.assertEqual(got[0], got[1], seg)
            self.assertTrue(got[0][0])

    def test_a_shorter_memory_refuses_the_state(self):
        m = _models["enwik8"]
        state = os.path.join(_tmp, "t.state")
        run("--model", m.path, "--text", "abc", "-n", "0",
            "--state-out", state)
        r = run("--model", m.path, "--mem-len", "10", "--state-in", state,
                "--text", "a", "-n", "1", check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("holds more positions than mem_len 10 keeps",
                      r.stderr)


class TestStreams(unittest.TestCase):
    def test_samples_in_one_batch_are_the_runs_of_their_seeds(self):
        """--n-samples steps its samples' sessions in one forward pass
        (per-head windows of each stream): sample i is the text of a run
        alone with the seed it reports."""
        m = _models["enwik8"]
        r = run("--model", m.path, "--text", "the ", "-n", "30", "--seed",
                "3", "--n-samples", "3", "--json")
        texts, seeds = {}, {}
        for line in r.stdout.splitlines():
            ev = json.loads(line)
            i = ev.get("sample")
            if "id" in ev:
                texts[i] = texts.get(i, "") + ev["text"]
            elif "end" in ev:
                seeds[i] = ev["seed"]
        self.assertEqual(sorted(seeds), [0, 1, 2])
        for i in range(3):
            alone = run("--model", m.path, "--text", "the ", "-n", "30",
                        "--seed", str(seeds[i]),
                        "--no-final-newline").stdout
            self.assertEqual(texts[i], alone, i)


class TestVocabulary(unittest.TestCase):
    def test_raw_text_gives_the_dictionary_ids(self):
        """The raw test text tokenizes to the ids data.Dictionary gives
        the prepared text (span_model computes them from the corpus'
        symbols): text8's '_' for a space, enwik8's newline as <eos>."""
        for name in ("text8", "enwik8"):
            m = _models[name]
            r = run("--model", m.path, "--tokenize", m.raw)
            self.assertEqual([int(x) for x in r.stdout.split()], m.ids,
                             name)

    def test_text8_reads_upper_case_as_lower(self):
        m = _models["text8"]
        a = run("--model", m.path, "--tokenize", "-", input="The Cat\n")
        b = run("--model", m.path, "--tokenize", "-", input="the cat\n")
        self.assertEqual(a.stdout, b.stdout)
        # a newline is <eos>, the last symbol of each line of the corpus
        ids = [int(x) for x in b.stdout.split()]
        syms = span_model.vocab.corpus_symbols(m.corpus)
        self.assertEqual(syms[ids[-1]], "<eos>")
        self.assertEqual([syms[i] for i in ids[:-1]],
                         list("the_cat"))


class TestConvert(unittest.TestCase):
    """convert.py on the trainer's checkpoints: its forms, what it reads of
    them, and what it refuses (one line naming the file and the problem,
    exit 1; a usage error exit 2)."""

    @classmethod
    def setUpClass(cls):
        cls.m = _models["enwik8"]
        cls.ck = torch.load(cls.m.checkpoint)

    def convert(self, ckpt, *extra, corpus=None, out=None):
        out = out or os.path.join(_tmp, "c.bin")
        return subprocess.run(
            [mrm.PYTHON, mrm.CONVERT, "--weights", ckpt, "--vocab-corpus",
             corpus or self.m.corpus, *extra, "-o", out],
            capture_output=True, text=True, timeout=300)

    def save(self, obj, name, **kw):
        path = os.path.join(_tmp, name)
        torch.save(obj, path, **kw)
        return path

    def refused(self, r, pattern, code=3):
        self.assertEqual(r.returncode, code, r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertRegex(r.stderr, pattern)

    def test_forms_give_the_same_file(self):
        """The zip format, torch's format before 1.6 and the bare
        state_dict (with or without "module.") give one file, byte for
        byte; the hyperparameters are the tensors' shapes."""
        state = self.ck["model"]
        bare = {k[len("module."):]: v for k, v in state.items()}
        files = []
        for i, (obj, kw) in enumerate((
                (self.ck, {}),
                (self.ck, {"_use_new_zipfile_serialization": False}),
                (state, {}), (bare, {}))):
            out = os.path.join(_tmp, f"form{i}.bin")
            r = self.convert(self.save(obj, f"form{i}.pt", **kw),
                             "--span-ramp", "32", out=out)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(out, "rb") as f:
                files.append(f.read())
        self.assertTrue(all(f == files[0] for f in files))
        with open(self.m.path, "rb") as f:       # built with ramp 32
            self.assertEqual(f.read(), files[0])
        from txlgen import txlfile
        meta, _ = txlfile.read(self.m.path)
        c = self.m.cfg
        self.assertEqual({k: meta[k] for k in (
            "n_token", "n_layer", "n_head", "d_model", "d_head", "d_inner",
            "attn_type", "attn_span", "span_ramp")},
            {k: str(v) for k, v in (
                ("n_token", c.n_token), ("n_layer", c.n_layer),
                ("n_head", c.n_head), ("d_model", c.d_model),
                ("d_head", c.d_head), ("d_inner", c.d_inner),
                ("attn_type", ADAPTIVE_SPAN), ("attn_span", c.attn_span),
                ("span_ramp", c.span_ramp))})

    def test_the_optimizer_state_is_not_read(self):
        """The Adagrad state (as large as the model here, most of the
        published files) is never read: the bytes read from the file are
        the model's and the pickle's."""
        from txlgen import checkpoint, convert
        read = [0]
        real = checkpoint._reader

        def counting(f):
            inner = real(f)

            def r(at, n):
                out = inner(at, n)
                read[0] += len(out)
                return out
            return r
        checkpoint._reader = counting
        try:
            path = self.save(self.ck, "count.pt")
            rc = convert.main(["--weights", path, "--vocab-corpus",
                               self.m.corpus, "-o",
                               os.path.join(_tmp, "count.bin")])
        finally:
            checkpoint._reader = real
        self.assertEqual(rc, 0)
        model = sum(v.numel() * 4 for v in self.ck["model"].values())
        optim = sum(t.numel() * 4 for st in self.ck["optimizer"]["state"]
                    .values() for t in st.values() if torch.is_tensor(t))
        self.assertGreater(optim, 0.9 * model)
        self.assertLessEqual(read[0], model)
        self.assertGreater(os.path.getsize(path), model + optim)

    def test_no_adaptive_span_is_every_head_whole(self):
        """A model trained without --adapt-span (no current_val): every
        head attends to its whole span."""
        state = {k: v for k, v in self.ck["model"].items()
                 if "_mask." not in k}
        out = os.path.join(_tmp, "whole.bin")
        r = self.convert(self.save(dict(self.ck, model=state), "whole.pt"),
                         out=out)
        self.assertEqual(r.returncode, 0, r.stderr)
        info = json.loads(run("--model", out, "--info", "--json").stdout)
        S = self.m.cfg.attn_span
        self.assertEqual(info["attention"]["spans"],
                         [[S] * self.m.cfg.n_head] * self.m.cfg.n_layer)

    def test_refusals(self):
        state = self.ck["model"]
        other = os.path.join(_tmp, "other.txt")
        with open(other, "w") as f:
            f.write("1 2 3\n")
        cases = {
            "corpus": (self.ck, dict(corpus=other),
                       r"other\.txt: 4 symbols, the checkpoint's "
                       r"vocabulary \d+: not the corpus"),
            "persistent": (dict(self.ck, model=dict(state, **{
                "module.layers.0.attn.attn.persistent_memory.key":
                torch.zeros(2)})), {}, r"persistent memory"),
            "template": (dict(self.ck, model={
                k: (v + 1 if k.endswith("mask_template") else v)
                for k, v in state.items()}), {}, r"mask_template is not"),
            "missing": (dict(self.ck, model={
                k: v for k, v in state.items()
                if k != "module.layers.1.ff.fc2.bias"}), {},
                r"missing tensor 'layers\.1\.ff\.fc2\.bias'"),
            "shape": (dict(self.ck, model=dict(state, **{
                "module.layers.1.norm2.bias": torch.zeros(3)})), {},
                r"'layers\.1\.norm2\.bias' has shape \[3\]"),
            "nan": (dict(self.ck, model={
                k: (v * math.nan if k.endswith("current_val") else v)
                for k, v in state.items()}), {}, r"NaN"),
            "stray": (dict(self.ck, model=dict(state, **{
                "module.extra.weight": torch.zeros(2)})), {},
                r"'extra\.weight' has no place"),
        }
        for name, (obj, kw, pattern) in cases.items():
            with self.subTest(name):
                self.refused(self.convert(self.save(obj, name + ".pt"),
                                          **kw), pattern)
        self.refused(self.convert(self.m.checkpoint, "--span-ramp", "0"),
                     r"--span-ramp 0", code=2)
        r = self.convert(self.m.checkpoint, "--config",
                         os.path.join(_tmp, "none.json"))
        self.refused(r, r"takes neither --config nor --vocab")
        # a Transformer-XL checkpoint with --vocab-corpus
        rm = mrm.build(os.path.join(_tmp, "xl"), do_convert=False)
        self.refused(self.convert(rm.state, "--config", rm.config),
                     r"--vocab-corpus is for adaptive-span checkpoints")


if __name__ == "__main__":
    unittest.main()
