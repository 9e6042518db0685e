#!/usr/bin/python3
"""txlgen-server's page at / in a real browser: Debian's chromium driven
by puppeteer-core (tests/node, installed by setup.sh) through
tests/page.mjs, against a server started here on 127.0.0.1 with the
default model.  What the page shows is checked against txlgen: the text
it generates at temperature 0, the log-probs of a text it scores
(txlgen --score --json) and the lines it exports; and the page's own
rules: no console error, no request to another host, a popover by mouse
and by keyboard, a session made through the API listed and continued,
a server with an API key that the page asks for.  Also, over plain
HTTP: / and HEAD / without the key, with their Content-Security-Policy.
And txlgen --score --html's report opened from its file: its spans and
plot, with --json's numbers.

Skipped, saying why, without chromium or tests/node's puppeteer-core.

Run:  TXLGEN=build/cmd/txlgen TXLGEN_SERVER=build/server/txlgen-server \\
      /usr/bin/python3 tests/test_page.py -v
"""

import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from test_server import ROOT, Server, txlgen

CHROMIUM = os.environ.get("TXLGEN_CHROMIUM", "/usr/bin/chromium")
PUPPETEER = os.path.join(ROOT, "tests", "node", "node_modules",
                         "puppeteer-core")
NODE = shutil.which("node")
PROMPT = "Fellow citizens of the Senate and House of Representatives,"
# ASCII, an emoji (byte tokens) and an accent, over two lines
SCORE_TEXT = ("The Congress shall have power to lay and collect taxes.\n"
              "A caf\u00e9 \U0001F600 in the Union.")
KEY = "page-key-5678"


def missing():
    if not os.access(CHROMIUM, os.X_OK):
        return f"no {CHROMIUM} (setup.sh installs Debian's chromium)"
    if not NODE:
        return "no node"
    if not os.path.isdir(PUPPETEER):
        return "no tests/node/node_modules/puppeteer-core (setup.sh " \
            "runs npm ci there)"
    return None


def drive(plan):
    """tests/page.mjs with @plan; what the page showed."""
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump(plan, f)
        f.flush()
        r = subprocess.run([NODE, os.path.join(ROOT, "tests", "page.mjs"),
                            f.name], capture_output=True, text=True,
                           timeout=90)
    if r.returncode != 0:
        raise AssertionError(f"page.mjs: exit {r.returncode}: {r.stderr}")
    return json.loads(r.stdout.splitlines()[-1])


def only_local(test, requests, base):
    test.assertTrue(requests)
    for url in requests:
        test.assertTrue(url.startswith(base + "/"), url)


class TestPageHTTP(unittest.TestCase):
    """What the server sends at /, and that it needs no key."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        key_file = os.path.join(cls.dir.name, "key")
        with open(key_file, "w") as f:
            f.write(KEY + "\n")
        cls.srv = Server("--api-key-file", key_file)

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()
        cls.dir.cleanup()

    def get(self, method, path, headers=None):
        import http.client
        c = http.client.HTTPConnection("127.0.0.1", self.srv.port,
                                       timeout=30)
        c.request(method, path, headers=headers or {})
        r = c.getresponse()
        body = r.read()
        c.close()
        return r, body

    def test_page_and_head_without_key(self):
        r, body = self.get("GET", "/")
        self.assertEqual(r.status, 200)
        self.assertEqual(r.getheader("Content-Type"),
                         "text/html; charset=utf-8")
        csp = r.getheader("Content-Security-Policy")
        self.assertIn("default-src 'self'", csp)
        self.assertIn("connect-src 'self'", csp)
        self.assertNotIn("unsafe", csp)
        self.assertIn("script-src 'sha256-", csp)
        self.assertEqual(r.getheader("X-Content-Type-Options"), "nosniff")
        self.assertTrue(body.startswith(b"<!doctype html>"))
        self.assertIn(b'id="generate"', body)
        # nothing fetched from elsewhere, nor from here but the API
        links = re.findall(rb'\b(?:src|href|action)\s*=\s*"([^"]*)"', body)
        self.assertTrue(all(x.startswith(b"data:") for x in links), links)
        h, hbody = self.get("HEAD", "/")
        self.assertEqual(h.status, 200)
        self.assertEqual(hbody, b"")
        self.assertEqual(h.getheader("Content-Length"), str(len(body)))
        self.assertEqual(h.getheader("Content-Security-Policy"), csp)
        # the API still wants the key
        r, _ = self.get("GET", "/props")
        self.assertEqual(r.status, 401)
        r, body = self.get("GET", "/props",
                           {"Authorization": "Bearer " + KEY})
        self.assertEqual(r.status, 200)
        props = json.loads(body)
        self.assertEqual(props["model"], "sotu")
        # the settings a request without them gets: txlgen's
        cfg = json.loads(txlgen("--print-config"))
        d = props["default_generation_settings"]
        for key, opt in (("temperature", "temp"), ("top_k", "top_k"),
                         ("top_p", "top_p"), ("min_p", "min_p"),
                         ("repeat_penalty", "repeat_penalty")):
            self.assertAlmostEqual(d[key], cfg[opt], places=6, msg=key)
        # another path is no page
        r, _ = self.get("GET", "/index.html",
                        {"Authorization": "Bearer " + KEY})
        self.assertEqual(r.status, 404)


@unittest.skipIf(missing(), missing())
class TestPage(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.srv = Server("--parallel", "2")
        cls.base = f"http://127.0.0.1:{cls.srv.port}"

    @classmethod
    def tearDownClass(cls):
        rc = cls.srv.stop()
        if rc != 0:
            raise AssertionError(f"exit {rc}: {''.join(cls.srv.log)}")

    def test_page(self):
        # two sessions of the same text: one continued on the page, the
        # other through the API, which must agree
        first = {"prompt": "The state of the Union is", "max_tokens": 6,
                 "temperature": 0}
        for name in ("page-a", "page-b"):
            status, r = self.srv.post("/v1/completions",
                                      {**first, "session": name})
            self.assertEqual(status, 200, r)
        more = " We must"
        status, want_cont = self.srv.post("/v1/completions", {
            "prompt": more, "max_tokens": 7, "temperature": 0,
            "session": "page-b"})
        self.assertEqual(status, 200, want_cont)
        status, listed = self.srv.get("/sessions")
        listed = {s["id"]: s for s in listed["data"]}
        len_a, total_b = listed["page-a"]["n_past"], listed["page-b"]["n_past"]

        with tempfile.TemporaryDirectory() as d:
            out = drive({"base": self.base, "prompt": PROMPT, "n": 24,
                         "session": "page-a", "more": more, "n_more": 7,
                         "score_text": SCORE_TEXT, "download_dir": d})

        self.assertEqual(out["errors"], [])
        only_local(self, out["requests"], self.base)

        # the text txlgen gives, a span a token
        want = txlgen("-p", PROMPT, "-n", "24", "--temp", "0")
        self.assertEqual(out["gen"]["text"], want.rstrip("\n"))
        self.assertGreaterEqual(out["gen"]["n"], 20)
        self.assertIn("24 tokens generated", out["gen"]["status"])
        # the popover: by mouse, by focus, gone after each
        for how in ("hover", "focus"):
            self.assertTrue(out[how]["shown"], how)
            self.assertIn("log-prob", out[how]["text"])
            self.assertEqual(out[how]["rows"], 5, how)
        self.assertFalse(out["after_hover"]["shown"])
        self.assertFalse(out["after_escape"]["shown"])

        # the session: listed with its length, continued, only the new
        # text read
        rows = {r["id"]: r["cells"] for r in out["sessions"]}
        self.assertIn("page-a", rows)
        self.assertEqual(rows["page-a"][1], str(len_a))
        self.assertEqual(out["session_field"], "page-a")
        self.assertEqual(out["cont"]["text"],
                         want_cont["choices"][0]["text"])
        self.assertEqual(out["cont"]["read"],
                         str(want_cont["usage"]["prompt_tokens"]))
        self.assertEqual(out["cont"]["total"], str(total_b))

        # the score: the dropped text, span by span, with txlgen's numbers
        self.assertEqual(out["score_input"], SCORE_TEXT)
        spans = out["score"]
        self.assertEqual("".join(s["text"] for s in spans), SCORE_TEXT)
        with tempfile.NamedTemporaryFile("w", suffix=".txt") as f:
            f.write(SCORE_TEXT)
            f.flush()
            rows = [json.loads(x) for x in
                    txlgen("--score", f.name, "--json").splitlines()]
        scored, summary = rows[:-1], rows[-1]
        self.assertEqual(len(spans), len(scored) + 1)
        self.assertEqual(spans[0]["logprob"], "")
        self.assertEqual(spans[0]["rank"], "")
        for s, w in zip(spans[1:], scored):
            self.assertAlmostEqual(float(s["logprob"]), w["logprob"],
                                   delta=1e-5)
            self.assertEqual(s["text"], w["text"])
            rank = int(s["rank"])
            self.assertGreaterEqual(rank, 1)
            band = "r10" if rank <= 10 else "r100" if rank <= 100 else \
                "r1000" if rank <= 1000 else "rmore"
            self.assertIn(band, s["cls"].split())
        # the likeliest token has rank 1 and nothing likelier in the list
        self.assertTrue(any(s["rank"] == "1" for s in spans))
        self.assertTrue(all(s["bg"] for s in out["score_bits"][1:]))
        self.assertFalse(any(s["cls"] != "tok" for s in out["score_bits"]))
        self.assertIn("top 10", out["legend_rank"])
        self.assertIn("bits", out["legend_bits"])
        self.assertIn(f"tokens{summary['tokens']}", out["summary"])
        self.assertIn(f"bytes{summary['bytes']}", out["summary"])
        for name, key in (("bits per byte", "bpb"),
                          ("bits per character", "bpc"), ("perplexity", "ppl")):
            shown = re.search(name + r"([0-9.]+)", out["summary"])
            self.assertAlmostEqual(float(shown.group(1)) / summary[key], 1,
                                   delta=1e-4, msg=name)
        self.assertEqual(out["plot_points"], [len(scored)] * 2)
        self.assertTrue(out["score_hover"]["shown"])

        # the export: txlgen --score --json's lines
        self.assertIsNotNone(out["export"])
        got = [json.loads(x) for x in out["export"].splitlines()]
        self.assertEqual(len(got), len(rows))
        for g, w in zip(got, rows):
            self.assertEqual(list(g), list(w))
            for k, v in w.items():
                if isinstance(v, float):  # ppl: relative
                    self.assertAlmostEqual(g[k], v, msg=k,
                                           delta=1e-5 * max(1, abs(v)))
                else:
                    self.assertEqual(g[k], v, k)

        self.assertLessEqual(out["narrow"]["scroll"], out["narrow"]["width"])

    def test_api_key(self):
        with tempfile.TemporaryDirectory() as d:
            key_file = os.path.join(d, "key")
            with open(key_file, "w") as f:
                f.write(KEY + "\n")
            srv = Server("--api-key-file", key_file)
            base = f"http://127.0.0.1:{srv.port}"
            try:
                out = drive({"base": base, "key": KEY, "prompt": PROMPT,
                             "n": 8})
            finally:
                self.assertEqual(srv.stop(), 0)
        self.assertTrue(out["asked"])
        self.assertFalse(out["asked_again"])
        want = txlgen("-p", PROMPT, "-n", "8", "--temp", "0")
        self.assertEqual(out["gen"]["text"], want.rstrip("\n"))
        # the one 401 that made the page ask, and nothing else
        self.assertTrue(all("401" in e for e in out["errors"]),
                        out["errors"])
        only_local(self, out["requests"], base)


class TestReport(unittest.TestCase):
    """txlgen --score --html's file in the same browser: its spans and
    plot, and its numbers those of --json."""

    def setUp(self):
        why = missing()
        if why:
            self.skipTest(why)

    def test_report(self):
        with tempfile.TemporaryDirectory() as d:
            text = os.path.join(d, "text.txt")
            with open(text, "w") as f:
                f.write(SCORE_TEXT)
            out_html = os.path.join(d, "report.html")
            txlgen("--score", text, "--html", out_html)
            rows = [json.loads(x) for x in
                    txlgen("--score", text, "--json").splitlines()][:-1]
            out = drive({"report": out_html})
        self.assertEqual(out["errors"], [])
        self.assertEqual([r for r in out["requests"]
                          if not r.startswith("file://")], [])
        spans = out["spans"]
        self.assertEqual(len(spans), len(rows) + 1)
        self.assertEqual((spans[0]["logprob"], spans[0]["rank"]), ("", ""))
        for s, w in zip(spans[1:], rows):
            self.assertEqual(s["text"], w["text"])
            self.assertAlmostEqual(float(s["logprob"]), w["logprob"],
                                   delta=1e-5)
            self.assertEqual(int(s["rank"]), w["rank"])
        self.assertEqual(out["points"], [len(rows)])
        self.assertGreater(out["plot_height"], 0)


if __name__ == "__main__":
    unittest.main()
