#!/usr/bin/python3
"""txlgen --score --html: the page read back with html.parser.

The spans of the page add up to the text the tokens stand for; their
log-probs are --json's; their ranks are --json's and, on a full and an
adaptive softmax, those of the PyTorch reference's full distributions
(models/txlgen/txl_ref.py); the plot has one point per prediction, at
the height of its surprisal; the summary is the text summary's; `--html
-` writes the same page to stdout; a bad path, a bad combination or bad
input fail with one line and leave no file behind.
Run: TXLGEN=build/cmd/txlgen /usr/bin/python3 tests/test_html.py
"""

import json
import math
import os
import shutil
import subprocess
import unittest
from html.parser import HTMLParser

import srctree  # noqa: F401 (models/ on sys.path)
import clitest
from clitest import MODEL, TXLGEN

TMP = None
# single spaces and no newline: what the tests' tokenizer (SentencePiece,
# whose normalisation folds runs of blanks) gives back as it was
TEXT = ("The state of the <Union> & \"strong\": it's 'é' > ü, and we will "
        "build a better future for our children, for the nation.")


def setUpModule():
    global MODEL, TMP
    MODEL, TMP = clitest.model_and_tmp(MODEL, "txlgen-html-")


def tearDownModule():
    shutil.rmtree(TMP, ignore_errors=True)


def run(*args, model=None, input=None):
    p = subprocess.run([TXLGEN, "-m", model or MODEL, *args],
                       input=input, capture_output=True, timeout=120,
                       stdin=None if input is not None else
                       subprocess.DEVNULL)
    return p.returncode, p.stdout, p.stderr.decode("utf-8", "replace")


def tmpfile(name, data):
    path = os.path.join(TMP, name)
    with open(path, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)
    return path


class Page(HTMLParser):
    """The tokens (text and attributes), the tables and the plot."""

    def __init__(self, html):
        super().__init__(convert_charrefs=True)
        self.tokens, self.cells, self.points = [], {}, None
        self.in_tok = self.in_cell = None
        self.tags = []
        self.feed(html)
        self.close()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append((tag, a))
        if tag == "span" and "tok" in a.get("class", "").split():
            self.tokens.append(dict(a, text=""))
            self.in_tok = True
        elif tag == "td" and "id" in a:
            self.in_cell = a["id"]
            self.cells[self.in_cell] = ""
        elif tag == "polyline" and a.get("id") == "surprisal":
            self.points = [tuple(map(float, p.split(",")))
                           for p in a["points"].split()]

    def handle_endtag(self, tag):
        if tag == "span":
            self.in_tok = False
        elif tag == "td":
            self.in_cell = None

    def handle_data(self, data):
        if self.in_tok:
            self.tokens[-1]["text"] += data
        elif self.in_cell:
            self.cells[self.in_cell] += data


def jsonl(out):
    ev = [json.loads(x) for x in out.decode().splitlines()]
    return ev[:-1], ev[-1]


class Html(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.text = tmpfile("t.txt", TEXT)
        cls.page_path = os.path.join(TMP, "t.html")
        rc, out, err = run("--score", cls.text, "--seg-len", "7", "--html",
                           cls.page_path)
        assert (rc, err) == (0, ""), err
        cls.summary_text = out.decode()
        with open(cls.page_path, encoding="utf-8") as f:
            cls.raw = f.read()
        cls.page = Page(cls.raw)
        rc, out, err = run("--score", cls.text, "--seg-len", "7", "--json")
        assert (rc, err) == (0, ""), err
        cls.rows, cls.summary = jsonl(out)

    def test_spans_are_the_text(self):
        toks = self.page.tokens
        self.assertEqual("".join(t["text"] for t in toks), TEXT)
        self.assertEqual(len(toks), self.summary["tokens"])
        # the token after the first as --json gives them
        self.assertEqual([t["text"] for t in toks[1:]],
                         [r["text"] for r in self.rows])
        # escaped, never raw markup
        body = self.raw.split('<div id="text">')[1]
        for raw, escaped in (("<", "&lt;"), ("&", "&amp;"), ('"', "&quot;"),
                             (">", "&gt;")):
            self.assertIn(escaped, body)
            self.assertNotIn(f">{raw}<", body)

    def test_logprobs_are_json_ones(self):
        first, toks = self.page.tokens[0], self.page.tokens[1:]
        self.assertEqual((first["data-logprob"], first["data-rank"]),
                         ("", ""))
        self.assertEqual(len(toks), len(self.rows))
        for t, r in zip(toks, self.rows):
            self.assertAlmostEqual(float(t["data-logprob"]), r["logprob"],
                                   delta=1e-5)
            self.assertEqual(int(t["data-rank"]), r["rank"])
            self.assertIn(f"rank {r['rank']}", t["title"])
            rank = r["rank"]
            band = 1 if rank <= 10 else 2 if rank <= 100 else \
                3 if rank <= 1000 else 4
            self.assertIn(f"b{band}", t["class"].split())

    def test_plot_has_a_point_per_prediction(self):
        pts = self.page.points
        self.assertEqual(len(pts), self.summary["predicted"])
        xs = [p[0] for p in pts]
        self.assertEqual(xs, sorted(xs))
        # the height is linear in the surprisal, higher for more bits
        bits = [-r["logprob"] / math.log(2) for r in self.rows]
        i, j = bits.index(min(bits)), bits.index(max(bits))
        slope = (pts[j][1] - pts[i][1]) / (bits[j] - bits[i])
        self.assertLess(slope, 0)
        for b, p in zip(bits, pts):
            self.assertAlmostEqual(p[1], pts[i][1] + slope * (b - bits[i]),
                                   delta=0.11)

    def test_summary_is_the_text_summary(self):
        want = dict(line.split(" ", 1)
                    for line in self.summary_text.splitlines())
        for key in ("tokens", "predicted", "bytes", "nll", "ppl", "bpb",
                    "nll_stderr", "bpb_stderr"):
            self.assertEqual(self.page.cells["summary-" + key], want[key],
                             key)
        self.assertEqual(self.page.cells["settings-seg_len"], "7")
        self.assertEqual(self.page.cells["settings-model"], MODEL)

    def test_standalone(self):
        self.assertTrue(self.raw.startswith("<!DOCTYPE html>"))
        for tag, a in self.page.tags:
            self.assertNotIn(tag, ("script", "link", "img", "iframe"))
            self.assertNotIn("src", a)
            self.assertFalse(a.get("href"), tag)
        self.assertNotIn("url(", self.raw)
        self.assertNotIn("@import", self.raw)

    def test_stdout(self):
        rc, out, err = run("--score", self.text, "--seg-len", "7", "--html",
                           "-")
        self.assertEqual((rc, err), (0, ""))
        self.assertEqual(out.decode(), self.raw)

    def test_page_from_stdin(self):
        rc, out, err = run("--score", "-", "--html", "-",
                           input=TEXT.encode())
        self.assertEqual((rc, err), (0, ""))
        page = Page(out.decode())
        self.assertEqual("".join(t["text"] for t in page.tokens), TEXT)


class Errors(unittest.TestCase):
    def one_line(self, err):
        self.assertTrue(err.startswith("txlgen: "), err)
        self.assertEqual(err.count("\n"), 1, err)

    def test_usage(self):
        text = tmpfile("u.txt", TEXT)
        for argv, msg in ((["-p", "a", "--html", "x.html"],
                           "--html needs --score"),
                          (["--score", text, "--json", "--html", "-"],
                           "--html -")):
            rc, out, err = run(*argv)
            self.assertEqual((rc, out), (2, b""), argv)
            self.assertTrue(err.startswith("txlgen: " + msg), err)

    def test_unwritable(self):
        text = tmpfile("w.txt", TEXT)
        for path in (os.path.join(TMP, "absent", "p.html"), TMP):
            rc, out, err = run("--score", text, "--html", path)
            self.assertEqual((rc, out), (1, b""), path)
            self.one_line(err)
            self.assertIn(path, err)

    def test_bad_input_leaves_the_old_page(self):
        path = tmpfile("old.html", "old")
        bad = tmpfile("bad.txt", b"ab\xff\xfecd\n")
        rc, out, err = run("--score", bad, "--html", path)
        self.assertEqual((rc, out), (1, b""))
        self.one_line(err)
        self.assertIn("not UTF-8", err)
        with open(path) as f:
            self.assertEqual(f.read(), "old")
        self.assertEqual([n for n in os.listdir(TMP)
                          if n.startswith("old.html")], ["old.html"])


class Ranks(unittest.TestCase):
    """The ranks of --json and of the page against the reference's full
    distributions, on a full and an adaptive softmax, over segments with
    the memory carried."""

    def check(self, rm, seg):
        import torch

        n = 40
        ids = [rm.cfg.n_token // 3] + list(
            __import__("txlgen.random_model").random_model.random_ids(
                n - 1, rm.cfg.n_token, seed=3))
        path = tmpfile("ids.txt", " ".join(map(str, ids)) + "\n")
        page_path = os.path.join(TMP, "ids.html")
        rc, out, err = run("--score", path, "--ids", "--json", "--seg-len",
                           str(seg), "--html", page_path, model=rm.path)
        self.assertEqual((rc, err), (0, ""))
        rows, _ = jsonl(out)
        with open(page_path, encoding="utf-8") as f:
            toks = Page(f.read()).tokens[1:]
        self.assertEqual([int(t["data-rank"]) for t in toks],
                         [r["rank"] for r in rows])
        seg_len, mem_len = rm.settings()[:2]
        self.assertGreater(mem_len, 0)
        lps, mems = [], None
        rm.model.mem_len = mem_len
        with torch.no_grad():
            for s in range(0, n - 1, seg):
                x = torch.tensor(ids[s:min(s + seg, n - 1)]).view(-1, 1)
                hidden, mems = rm.model.forward(x, mems)
                lps.append(rm.log_probs(hidden)[:, 0].double())
        lp = torch.cat(lps)
        ones = 0
        for i, r in enumerate(rows):
            row, y = lp[i], ids[i + 1]
            self.assertAlmostEqual(r["logprob"], float(row[y]), delta=1e-4)
            # the rank is 1 + the tokens above, up to the rounding of
            # the two computations (1e-4, the parity suite's tolerance)
            lo = 1 + int((row > row[y] + 1e-4).sum())
            hi = 1 + int((row > row[y] - 1e-4).sum())
            self.assertTrue(lo <= r["rank"] <= hi, (i, lo, r["rank"], hi))
            if int(row.argmax()) == y:
                self.assertEqual(r["rank"], 1)
                ones += 1
        # ranks far down the vocabulary, not all near the top
        self.assertGreater(max(r["rank"] for r in rows), 50)
        return ones

    def test_full_softmax(self):
        from txlgen import random_model
        rm = random_model.build(os.path.join(TMP, "full"), seed=31,
                                tgt_len=6, mem_len=6)
        self.check(rm, 6)

    def test_adaptive_softmax(self):
        from txlgen import random_model
        rm = random_model.build(os.path.join(TMP, "adaptive"), seed=32,
                                cutoffs=[40, 120], div_val=2, d_embed=32,
                                tgt_len=6, mem_len=6)
        self.check(rm, 6)

    def test_rank_one_of_the_most_likely(self):
        # a text where each token is the reference's most likely after
        # the ones before (greedy generation would not do: txlgen's
        # masks tokens that cannot continue UTF-8), scored in one segment
        import torch
        from txlgen import random_model
        rm = random_model.build(os.path.join(TMP, "greedy"), seed=33,
                                tgt_len=6, mem_len=6)
        ids, gaps = [rm.cfg.n_token // 3], []
        with torch.no_grad():
            for _ in range(24):
                x = torch.tensor(ids).view(-1, 1)
                hidden, _ = rm.model.forward(x, None)
                row = rm.log_probs(hidden)[-1, 0]
                top = row.topk(2).values.tolist()
                gaps.append(top[0] - top[1])
                ids.append(int(row.argmax()))
        path = tmpfile("greedy.txt", " ".join(map(str, ids)) + "\n")
        rc, out, err = run("--score", path, "--ids", "--json", "--seg-len",
                           "64", "--mem-len", "0", model=rm.path)
        self.assertEqual((rc, err), (0, ""))
        rows, _ = jsonl(out)
        self.assertEqual(len(rows), len(gaps))
        for r, gap in zip(rows, gaps):
            if gap > 1e-4:
                self.assertEqual(r["rank"], 1)


if __name__ == "__main__":
    unittest.main()
