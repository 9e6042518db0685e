#!/usr/bin/python3
"""txlgen from Python (models/txlgen/api.py) against txlgen itself: the
binding's text, scores, tokens and state files are the program's.

The default model (models/sotu.bin) through the build tree's libtxl
($TXLGEN's, build/lib/libtxl.so.1), one thread on both sides, so that
the two compute the same floats.

Run: TXLGEN=build/cmd/txlgen /usr/bin/python3 tests/test_pyapi.py
"""

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import srctree  # noqa: F401 (models/ on sys.path)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TXLGEN = os.environ.get("TXLGEN", os.path.join(ROOT, "build", "cmd",
                                               "txlgen"))
LIB = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(
    TXLGEN))), "lib", "libtxl.so.1")
MODEL = os.path.join(ROOT, "models", "sotu.bin")
# the binding of the build tree that built $TXLGEN
os.environ["TXLGEN_LIBTXL"] = LIB

from txlgen import Model, Session, TxlError, ModelNotFoundError  # noqa: E402

PROMPTS = ["Fellow citizens", "We the people of the United States",
           "The state of the Union is"]
TEXT = ("Fellow citizens of the Senate and House of Representatives:\n"
        "Among the vicissitudes incident to life no event could have filled "
        "me with greater anxieties than that of which the notification was "
        "transmitted by your order.\n\nIt is with great satisfaction that I "
        "meet you again; the progress of our affairs, the state of the "
        "revenue and the condition of the army and navy call for your "
        "attention, and the treaties \u00e0 la fa\u00e7on of old are to be "
        "renewed.\n") * 3


def txlgen(*args, check=True):
    env = dict(os.environ)
    env.pop("TXLGEN_MODEL", None)
    p = subprocess.run([TXLGEN, "-t", "1", *args], capture_output=True,
                       timeout=120, env=env, stdin=subprocess.DEVNULL)
    if check and p.returncode:
        raise AssertionError(f"txlgen {args}: {p.returncode}: "
                             f"{p.stderr.decode()}")
    return p


@unittest.skipUnless(os.path.exists(MODEL) and os.path.exists(LIB) and
                     os.access(TXLGEN, os.X_OK),
                     "needs build/ and models/sotu.bin")
@unittest.skipIf(os.environ.get("TXLGEN_SANITIZE", "none") != "none",
                 "a sanitized libtxl does not load into python3")
class PyApi(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.m = Model(MODEL, n_threads=1)
        cls.tmp = tempfile.mkdtemp(prefix="txl-pyapi-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.tmp, name)

    def test_generate_equals_txlgen(self):
        # greedy, and sampled with the model's recommended settings
        # (sotu.bin recommends a repeat penalty of 1.2: not txlgen's 1)
        self.assertEqual(self.m.defaults["repeat_penalty"], 1.2)
        for prompt, opts, kw in (
                (PROMPTS[0], ["--temp", "0"], {"temp": 0}),
                (PROMPTS[1], ["--temp", "0"], {"temp": 0}),
                (PROMPTS[0], ["--seed", "1"], {"seed": 1}),
                (PROMPTS[2], ["--seed", "7", "--top-k", "5"],
                 {"seed": 7, "top_k": 5})):
            with self.subTest(prompt=prompt, opts=opts):
                want = txlgen("-m", "sotu", "-p", prompt, "-n", "40",
                              "--no-final-newline", *opts).stdout
                got = self.m.generate(prompt, n=40, **kw)
                self.assertTrue(got.strip())
                self.assertEqual(got.encode(), want)
        # txlgen ends the text with a newline, which the API does not add
        out = txlgen("-p", PROMPTS[0], "-n", "10", "--seed", "1").stdout
        self.assertEqual(out, self.m.generate(PROMPTS[0], n=10,
                                              seed=1).encode() + b"\n")

    def test_sampling_controls_equal_txlgen(self):
        prompt = PROMPTS[0]
        for opts, kw in (
                (["--temp", "0", "--logit-bias", "260=-100"],
                 {"temp": 0, "logit_bias": {260: -100}}),
                (["--temp", "0", "--logit-bias", " of=-inf",
                  "--logit-bias", "12=3.5"],
                 {"temp": 0, "logit_bias": [(" of", -math.inf), (12, 3.5)]}),
                (["--seed", "5", "--temp", "1", "--frequency-penalty", "1.5",
                  "--presence-penalty", "0.5"],
                 {"seed": 5, "temp": 1, "frequency_penalty": 1.5,
                  "presence_penalty": 0.5}),
                (["--seed", "5", "--temp", "1", "--typical", "0.6"],
                 {"seed": 5, "temp": 1, "typical": 0.6}),
                (["--seed", "5", "--temp", "1", "--mirostat-tau", "3",
                  "--mirostat-eta", "0.2"],
                 {"seed": 5, "temp": 1, "mirostat_tau": 3,
                  "mirostat_eta": 0.2})):
            with self.subTest(opts=opts):
                want = txlgen("-p", prompt, "-n", "30", "--no-final-newline",
                              *opts).stdout
                got = self.m.generate(prompt, n=30, **kw)
                self.assertEqual(got.encode(), want)
                # and the setting matters
                plain = {k: v for k, v in kw.items() if k in ("seed", "temp")}
                self.assertNotEqual(got, self.m.generate(prompt, n=30,
                                                         **plain))
        # a Session's generate takes them too
        with self.m.session() as s:
            s.feed(prompt)
            self.assertEqual(s.generate(n=30, temp=0,
                                        logit_bias={260: -100}).encode(),
                             txlgen("-p", prompt, "-n", "30", "--temp", "0",
                                    "--logit-bias", "260=-100",
                                    "--no-final-newline").stdout)
        for kw, what in (({"logit_bias": {99999: 1}}, "no token 99999"),
                         ({"logit_bias": {12: "x"}}, "logit_bias[12]"),
                         ({"logit_bias": {12: 101}}, "-100 to 100"),
                         ({"logit_bias": {"": 1}}, "has no tokens"),
                         ({"logit_bias": 3}, "logit_bias"),
                         ({"typical": 0}, "typical"),
                         ({"mirostat_eta": 0}, "mirostat_eta"),
                         ({"frequency_penalty": 3}, "frequency_penalty")):
            with self.subTest(kw=kw):
                with self.assertRaises(TxlError) as cm:
                    self.m.generate("x", n=1, **kw)
                self.assertIn(what, str(cm.exception))

    def test_long_prompt_equals_txlgen(self):
        # past the receptive field (8 layers x (mem_len 128 + seg_len 127)
        # + 1 tokens): its start counted, not read, on both sides; lines
        # tokenized one at a time as txlgen reads them
        prompt = TEXT * 8
        self.assertGreater(len(self.m.tokenize(prompt)), 2100)
        want = txlgen("-p", prompt, "-n", "20", "--seed", "4",
                      "--no-final-newline").stdout
        self.assertEqual(self.m.generate(prompt, n=20, seed=4).encode(), want)

    def test_no_prompt_and_stop(self):
        # no prompt: from the token a text starts from
        want = txlgen("-p", "", "-n", "20", "--seed", "3",
                      "--no-final-newline").stdout
        got = self.m.generate("", n=20, seed=3)
        self.assertEqual(got.encode(), want)
        self.assertTrue(got.strip())
        # a stop string ends the text before it
        want = txlgen("-p", PROMPTS[1], "-n", "60", "--temp", "0",
                      "--stop", "the", "--no-final-newline").stdout
        got = self.m.generate(PROMPTS[1], n=60, temp=0, stop=["the"])
        self.assertEqual(got.encode(), want)
        self.assertNotIn("the", got)
        self.assertLess(len(got), len(self.m.generate(PROMPTS[1], n=60,
                                                      temp=0)))

    def test_stream_pieces_join_to_the_text(self):
        whole = self.m.generate(PROMPTS[2], n=30, seed=5)
        pieces = list(self.m.generate(PROMPTS[2], n=30, seed=5, stream=True))
        self.assertGreater(len(pieces), 5)
        self.assertTrue(all(isinstance(p, str) and p for p in pieces))
        self.assertEqual("".join(pieces), whole)

    def test_score_equals_txlgen(self):
        f = self.path("score.txt")
        with open(f, "w", encoding="utf-8") as fh:
            fh.write(TEXT)
        lines = [json.loads(x) for x in
                 txlgen("--score", f, "--json").stdout.splitlines()]
        rows, summary = lines[:-1], lines[-1]
        got = self.m.score(TEXT)
        # more tokens than a segment: the segments' seams too
        self.assertGreater(summary["tokens"], 2 * 128)
        self.assertEqual(len(got["rows"]), len(rows))
        for a, b in zip(got["rows"], rows):
            self.assertEqual((a["pos"], a["id"], a["text"]),
                             (b["pos"], b["id"], b["text"]))
            self.assertAlmostEqual(a["logprob"], b["logprob"], delta=1e-6)
        for k in ("tokens", "predicted", "bytes", "chars", "partial"):
            self.assertEqual(got[k], summary[k], k)
        for k in ("nll", "ppl", "bpb", "bpc", "nll_stderr", "bpb_stderr"):
            self.assertAlmostEqual(got[k], summary[k], delta=1e-6, msg=k)
        self.assertEqual(got["bytes"], len(TEXT.encode()))
        self.assertEqual([r["id"] for r in got["rows"]],
                         self.m.tokenize(TEXT)[1:])

    def test_tokenize_equals_txlgen(self):
        f = self.path("tok.txt")
        with open(f, "w", encoding="utf-8") as fh:
            fh.write(TEXT)
        out = txlgen("--tokenize", f).stdout.decode()
        want = [int(t) for t in out.split()]
        ids = self.m.tokenize(TEXT)
        self.assertEqual(ids, want)
        self.assertEqual(self.m.tokenize(TEXT.encode()), want)
        line = "Fellow citizens of the Senate"
        self.assertEqual(self.m.detokenize(self.m.tokenize(line)), line)
        self.assertEqual(self.m.tokenize(""), [])

    def test_session_in_pieces_equals_one_text(self):
        text = " ".join(PROMPTS)
        words = text.split(" ")
        parts = [" ".join(words[:3]), " " + " ".join(words[3:8]),
                 " " + " ".join(words[8:])]
        self.assertEqual("".join(parts), text)
        # the pieces tokenize as the whole does (at spaces)
        self.assertEqual(sum((self.m.tokenize(p) for p in parts), []),
                         self.m.tokenize(text))
        s = self.m.session()
        for p in parts:
            s.feed(p)
        self.assertEqual(s.n_past, len(self.m.tokenize(text)))
        got = s.generate(n=30, temp=0)
        self.assertEqual(got, self.m.generate(text, n=30, temp=0))
        # the tokens made stay in the memory: the next call goes on
        self.assertEqual(s.n_past, len(self.m.tokenize(text)) + 30)
        more = s.generate(n=10, temp=0)
        self.assertEqual(got + more, self.m.generate(text, n=40, temp=0))

    def test_state_round_trip_and_txlgen_files(self):
        st = self.path("py.state")
        s = self.m.session()
        s.feed(PROMPTS[1])
        s.save(st)
        a = s.generate(n=25, seed=9)
        b = Session.load(self.m, st).generate(n=25, seed=9)
        c = self.m.session(state=st).generate(n=25, seed=9)
        self.assertEqual(a, b)
        self.assertEqual(a, c)
        # txlgen continues the Python state ...
        want = txlgen("--state-in", st, "-p", "", "-n", "25", "--seed", "9",
                      "--no-final-newline").stdout
        self.assertEqual(a.encode(), want)
        # ... and Python txlgen's
        st2 = self.path("cli.state")
        txlgen("-p", PROMPTS[1], "-n", "0", "--state-out", st2)
        s2 = self.m.session(state=st2)
        self.assertEqual(s2.n_past, len(self.m.tokenize(PROMPTS[1])))
        self.assertEqual(s2.generate(n=25, seed=9), a)

    def test_errors(self):
        home = self.path("home")
        os.makedirs(home, exist_ok=True)
        env = dict(os.environ)
        try:
            os.environ.pop("TXLGEN_MODEL_PATH", None)
            os.environ.pop("XDG_DATA_HOME", None)
            os.environ["HOME"] = home
            with self.assertRaises(ModelNotFoundError) as cm:
                Model("no-such-model")
        finally:
            os.environ.clear()
            os.environ.update(env)
        msg = str(cm.exception)
        self.assertIsInstance(cm.exception, FileNotFoundError)
        self.assertIn("no-such-model.bin", msg)
        self.assertIn(os.path.join(home, ".local", "share", "txlgen",
                                   "models"), msg)
        self.assertIn(os.path.join(ROOT, "models"), msg)
        with self.assertRaises(FileNotFoundError):
            Model(self.path("missing.bin"))
        # a file that is no model: libtxl's message, as txlgen says it
        bad = self.path("bad.bin")
        with open(bad, "wb") as f:
            f.write(b"\x10\x00\x00\x00\x00\x00\x00\x00{}")
        with self.assertRaises(TxlError) as cm:
            Model(bad)
        self.assertNotIsInstance(cm.exception, FileNotFoundError)
        self.assertTrue(str(cm.exception))
        err = txlgen("-m", bad, "-p", "x", check=False).stderr.decode()
        self.assertIn(str(cm.exception), err)
        with self.assertRaises(TxlError):
            self.m.generate("x", n=5, top_p=0)
        with self.assertRaises(TxlError):
            self.m.score("x")

    def test_import_is_light(self):
        # `from txlgen import Model` imports neither torch nor NumPy
        code = ("import sys; sys.path.insert(0, sys.argv[1]); "
                "from txlgen import Model; "
                "print(sorted(m for m in ('torch', 'numpy') "
                "if m in sys.modules))")
        out = subprocess.run([sys.executable, "-c", code,
                              os.path.join(ROOT, "models")],
                             capture_output=True, text=True, timeout=60,
                             check=True).stdout
        self.assertEqual(out.strip(), "[]")
        # from the source tree, without $TXLGEN_LIBTXL: the build tree's
        built = os.path.join(ROOT, "build", "lib", "libtxl.so.1")
        if os.path.exists(built):
            env = dict(os.environ)
            env.pop("TXLGEN_LIBTXL")
            code = ("import sys; sys.path.insert(0, sys.argv[1]); "
                    "from txlgen import api; print(api.library_path())")
            out = subprocess.run([sys.executable, "-c", code,
                                  os.path.join(ROOT, "models")], env=env,
                                 capture_output=True, text=True, timeout=60,
                                 check=True).stdout
            self.assertEqual(out.strip(), built)


if __name__ == "__main__":
    unittest.main(verbosity=2)
