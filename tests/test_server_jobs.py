#!/usr/bin/python3
"""txlgen-server's jobs: what a request costs and holds, and how it ends.

A long echo with logprobs answers in time linear in its tokens while
/metrics goes on; the logprobs a request may hold are limited; a stream
whose request fails ends with an error event; the limits that need no
tokens refuse at once; the server tokenizes a text as txlgen and
SentencePiece do.  The server runs the default model on 127.0.0.1.

Run:  TXLGEN=build/cmd/txlgen TXLGEN_SERVER=build/server/txlgen-server \\
      /usr/bin/python3 tests/test_server_jobs.py -v
"""

import http.client
import json
import os
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from test_server import Server, txlgen, stream  # noqa: E402

TIMEOUT = 300
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def post_raw(port, path, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
    c.request("POST", path, body=body)
    r = c.getresponse()
    out = r.read()
    c.close()
    return r.status, json.loads(out)


def timed(srv, body):
    """A request's answer and how long it took (sanitizers' builds take
    minutes)."""
    t0 = time.monotonic()
    status, r = post_raw(srv.port, "/v1/completions", json.dumps(body))
    return status, r, time.monotonic() - t0


class TestEchoLogprobs(unittest.TestCase):

    def test_long_echo_is_linear_and_metrics_answer(self):
        if os.environ.get("TXLGEN_SANITIZE", "none") != "none":
            # a cost, not a memory error: 32,000 ids take minutes there
            self.skipTest("the cost of a long echo, not under a sanitizer")
        srv = Server("--max-prompt", "40000", "--max-body", "4000000")
        try:
            status, tok = srv.post("/tokenize", {
                "content": "Fellow citizens of the Senate and House "
                "of Representatives, the state of the Union is "
                "strong. " * 40})
            self.assertEqual(status, 200, tok)
            unit = tok["tokens"]
            ids = (unit * (32000 // len(unit) + 1))[:32000]
            body = {"prompt": ids, "max_tokens": 1, "logprobs": 1,
                    "temperature": 0}
            status, r, plain = timed(srv, body)
            self.assertEqual(status, 200, r)

            worst = [0.0]
            stop = threading.Event()

            def poll():
                while not stop.is_set():
                    t0 = time.monotonic()
                    st, _ = srv.get("/metrics")
                    self.assertEqual(st, 200)
                    worst[0] = max(worst[0], time.monotonic() - t0)
                    time.sleep(0.05)

            th = threading.Thread(target=poll)
            th.start()
            try:
                status, r, echo = timed(srv, dict(body, echo=True))
            finally:
                stop.set()
                th.join()
            self.assertEqual(status, 200, r["error"] if status != 200
                             else "")
            lp = r["choices"][0]["logprobs"]
            self.assertEqual(len(lp["tokens"]), 32001)
            self.assertEqual(len(lp["top_logprobs"]), 32001)
            self.assertIsNone(lp["token_logprobs"][0])
            self.assertTrue(all(isinstance(x, float)
                                for x in lp["token_logprobs"][1:]))
            self.assertEqual(r["usage"]["prompt_tokens"], 32000)
            print(f"echo {echo:.1f} s, without {plain:.1f} s, /metrics "
                  f"at most {worst[0]:.2f} s", file=sys.stderr)
            self.assertLess(echo, 3 * plain + 5,
                            f"echo {echo:.1f} s, without {plain:.1f} s")
            self.assertLess(worst[0], 2.0,
                            f"/metrics waited {worst[0]:.1f} s")
        finally:
            srv.stop()


class TestLimits(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.srv = Server("--max-body", "32000000",
                         "--max-logprob-rows", "1000")

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()

    def error(self, body):
        status, r = self.srv.post("/v1/completions", body)
        self.assertEqual(status, 400, r)
        return r["error"]["message"]

    def test_logprob_rows_are_limited(self):
        # (prompt tokens with echo + max_tokens) x n x (1 + logprobs)
        msg = self.error({"prompt": "The Union", "max_tokens": 100, "n": 4,
                          "logprobs": 2})
        self.assertIn("'logprobs'", msg)
        self.assertIn("1000", msg)
        status, tok = self.srv.post("/tokenize", {
            "content": "the state of the Union " * 200})
        ids = tok["tokens"][:600]
        self.assertEqual(len(ids), 600)
        # 600 prompt rows, each with one alternative
        msg = self.error({"prompt": ids, "echo": True, "max_tokens": 0,
                          "logprobs": 1})
        self.assertIn("'logprobs'", msg)
        self.assertIn("1200", msg)
        # the same without logprobs, or within the limit, runs
        for body in ({"prompt": "The Union", "max_tokens": 100, "n": 4},
                     {"prompt": ids, "echo": True, "max_tokens": 0,
                      "logprobs": 0},
                     {"prompt": "The Union", "max_tokens": 20, "n": 2,
                      "logprobs": 5}):
            status, r = self.srv.post("/v1/completions", body)
            self.assertEqual(status, 200, r)
        self.assertEqual(len(r["choices"][1]["logprobs"]["tokens"]), 20)

    def test_default_limit_refuses_the_huge(self):
        srv = Server()
        try:
            status, r = srv.post("/v1/completions", {
                "prompt": "x", "n": 16, "logprobs": 20,
                "max_tokens": 65536})
            self.assertEqual(status, 400, r)
            self.assertIn("'logprobs'", r["error"]["message"])
        finally:
            srv.stop()

    def test_choices_refused_before_tokenizing(self):
        text = "the state of the Union, " * 12
        # what tokenizing a tenth of the text takes
        t0 = time.monotonic()
        status, r = post_raw(self.srv.port, "/tokenize", json.dumps(
            {"content": text * 10000}))
        tenth = time.monotonic() - t0
        self.assertEqual(status, 200)
        body = json.dumps({"prompt": [text] * 100000, "max_tokens": 1})
        t0 = time.monotonic()
        status, r = post_raw(self.srv.port, "/v1/completions", body)
        took = time.monotonic() - t0
        self.assertEqual(status, 400, r)
        self.assertIn("'n' times the prompts", r["error"]["message"])
        self.assertIn("100000", r["error"]["message"])
        # refused before the 28 MB are tokenized (ten times the tenth),
        # what reading and parsing them takes aside
        self.assertLess(took, 3 * tenth + 10,
                        f"{took:.1f} s, a tenth tokenized in {tenth:.1f} s")

    def test_infinite_number(self):
        for field in ("max_tokens", "temperature"):
            status, r = post_raw(self.srv.port, "/v1/completions",
                                 '{"prompt": "x", "%s": 1e999}' % field)
            self.assertEqual(status, 400, r)
            self.assertEqual(r["error"]["message"],
                             f"'{field}' must be a finite number")
        status, r = self.srv.post("/v1/completions", {"max_tokens": "3"})
        self.assertEqual(r["error"]["message"],
                         "'max_tokens' must be a number, not a string")


class TestStreamError(unittest.TestCase):

    def test_damaged_session_ends_with_an_error_event(self):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "broken.state"), "wb") as f:
                f.write(b"this is no state file\n" * 50)
            srv = Server("--session-dir", d)
            try:
                events, done = stream(srv.port, {
                    "prompt": "The Union", "max_tokens": 5,
                    "session": "broken", "stream": True})
                self.assertTrue(done)
                errors = [e for e in events if "error" in e]
                self.assertEqual(len(errors), 1, events)
                self.assertIs(events[-1], errors[0])
                e = errors[0]["error"]
                self.assertIn("broken", e["message"])
                self.assertEqual(e["type"], "server_error"
                                 if e["code"] >= 500
                                 else "invalid_request_error")
                self.assertGreaterEqual(e["code"], 400)
                # the same without streaming: that status and message
                status, r = srv.post("/v1/completions", {
                    "prompt": "The Union", "max_tokens": 5,
                    "session": "broken"})
                self.assertEqual(status, e["code"])
                self.assertEqual(r["error"]["message"], e["message"])
                # a good stream has none
                events, done = stream(srv.port, {
                    "prompt": "The Union", "max_tokens": 5,
                    "stream": True})
                self.assertTrue(done)
                self.assertFalse([e for e in events if "error" in e])
            finally:
                srv.stop()


def metric(srv, name):
    status, text = srv.get("/metrics")
    for line in text.splitlines():
        if line.startswith("txlgen_" + name + " "):
            return float(line.split()[1])
    raise AssertionError(f"no {name} in /metrics")


class TestChurn(unittest.TestCase):

    def test_clients_that_go_away_end_their_jobs(self):
        """Streams dropped after their first event and requests dropped
        at once, from many threads: each job ends on whichever side lets
        go last, and the server is idle again."""
        srv = Server("--parallel", "4")
        try:
            def drop(k):
                c = http.client.HTTPConnection("127.0.0.1", srv.port,
                                               timeout=60)
                c.request("POST", "/v1/completions", body=json.dumps({
                    "prompt": "The Union", "max_tokens": 200,
                    "stream": k % 2 == 0, "logprobs": 2}).encode())
                if k % 2 == 0:
                    r = c.getresponse()
                    r.fp.readline()
                c.close()

            for _ in range(3):
                ths = [threading.Thread(target=drop, args=(k,))
                       for k in range(16)]
                for t in ths:
                    t.start()
                for t in ths:
                    t.join()
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and (
                    metric(srv, "requests_running") or
                    metric(srv, "queue_length")):
                time.sleep(0.2)
            self.assertEqual(metric(srv, "requests_running"), 0)
            self.assertEqual(metric(srv, "queue_length"), 0)
            self.assertGreater(metric(srv, "cancelled_total"), 0)
            status, r = srv.post("/v1/completions", {
                "prompt": "The Union", "max_tokens": 3})
            self.assertEqual(status, 200, r)
        finally:
            self.assertEqual(srv.stop(), 0)


class TestWakeups(unittest.TestCase):
    """With TXLGEN_SERVER_WAIT_MS=-1 a waiting request never looks up on
    its own: it goes on only when its job wakes it, and a wake-up lost
    hangs it until the client's timeout."""

    @classmethod
    def setUpClass(cls):
        cls.srv = Server("--parallel", "3", "--max-tokens", "1000000000",
                         env={"TXLGEN_SERVER_WAIT_MS": "-1"})

    @classmethod
    def tearDownClass(cls):
        rc = cls.srv.stop()
        if rc != 0:
            raise AssertionError(f"exit {rc}: {''.join(cls.srv.log)}")

    def test_a_stream_has_its_tokens_before_its_end(self):
        """A stream of a billion tokens: its first ones come while the
        job runs (a stream woken only at its end would wait for ever),
        and the client that then goes away ends the job."""
        srv = self.srv
        # the first token comes in seconds, under a sanitizer too
        c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=120)
        c.request("POST", "/v1/completions", body=json.dumps({
            "prompt": "The Union", "max_tokens": 1000000000,
            "ignore_eos": True, "stream": True}).encode())
        r = c.getresponse()
        self.assertEqual(r.status, 200)
        text = ""
        while not text:
            line = r.fp.readline()
            self.assertTrue(line, "the stream ended")
            if line.startswith(b"data: {"):
                ev = json.loads(line[6:])
                text = "".join(ch["text"] for ch in ev["choices"])
        c.close()
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline and \
                metric(srv, "requests_running"):
            time.sleep(0.2)
        self.assertEqual(metric(srv, "requests_running"), 0)

    def test_every_request_ends(self):
        """Streams (more than the slots: some wait in the queue and join
        the batch late), a stream of two choices, one that continues a
        named session and a plain request all end, each stream with
        every token and the text the same request gives unstreamed."""
        srv = self.srv
        st, _ = srv.post("/v1/completions", {
            "prompt": "The state of the Union", "max_tokens": 0,
            "session": "w"})
        self.assertEqual(st, 200)
        bodies = [dict(prompt=f"The Union {k}", max_tokens=24 + k,
                       ignore_eos=True, seed=k, logprobs=0)
                  for k in range(6)]
        bodies.append(dict(prompt="We", max_tokens=20, n=2,
                           ignore_eos=True, seed=7, logprobs=0))
        bodies.append(dict(prompt=" is", max_tokens=16, session="w",
                           ignore_eos=True, seed=8, logprobs=0))
        got = [None] * len(bodies)

        def run(k):
            got[k] = stream(srv.port, dict(bodies[k], stream=True))

        ths = [threading.Thread(target=run, args=(k,))
               for k in range(len(bodies))]
        for t in ths:
            t.start()
        st, plain = srv.post("/v1/completions", bodies[0])
        for t in ths:
            t.join()
        self.assertEqual(st, 200, plain)
        for k, body in enumerate(bodies):
            events, done = got[k]
            self.assertTrue(done, k)
            for i in range(body.get("n", 1)):
                ch = [c for e in events for c in e["choices"]
                      if c["index"] == i]
                toks = sum(len(c["logprobs"]["tokens"]) for c in ch)
                self.assertEqual(toks, body["max_tokens"], (k, i))
                self.assertEqual(ch[-1]["finish_reason"], "length")
        text0 = "".join(c["text"] for e in got[0][0] for c in e["choices"])
        self.assertEqual(text0, plain["choices"][0]["text"])


class TestOneTokenization(unittest.TestCase):
    """/tokenize, txlgen --tokenize and SentencePiece give the same ids:
    a text line by line, each line with its newline, as spm_encode reads
    a file and the model's training read its corpus."""

    TEXTS = ["2,333", "x\n2,333", "It was 2,333 dollars.\n",
             "The sum 2,333 and 1,333.\nNext 2,333\n\n2,333 ",
             "caf\u00e9 \U0001f642\tand 1,000,000\n\n  spaces  \n"]

    def test_same_ids(self):
        try:
            import sentencepiece
        except ImportError:
            self.skipTest("no sentencepiece module")
        import srctree  # noqa: F401 (models/ on sys.path)
        from txlgen import txlfile
        _, t = txlfile.read(os.path.join(ROOT, "models", "sotu.bin"))
        sp = sentencepiece.SentencePieceProcessor(
            model_proto=bytes(t["tokenizer.model"]))
        srv = Server()
        try:
            for text in self.TEXTS:
                want = [i for line in text.splitlines(keepends=True)
                        for i in sp.encode(line)]
                status, r = srv.post("/tokenize", {"content": text})
                self.assertEqual(status, 200, r)
                self.assertEqual(r["tokens"], want, repr(text))
                with tempfile.NamedTemporaryFile("w", suffix=".txt") as f:
                    f.write(text)
                    f.flush()
                    got = [int(x) for x in
                           txlgen("--tokenize", f.name).split()]
                self.assertEqual(got, want, repr(text))
                # a prompt of that text reads those tokens
                status, r = srv.post("/v1/completions", {
                    "prompt": text, "max_tokens": 0, "echo": True})
                self.assertEqual(status, 200, r)
                self.assertEqual(r["usage"]["prompt_tokens"], len(want))
                self.assertEqual(r["choices"][0]["text"], text)
        finally:
            srv.stop()


if __name__ == "__main__":
    unittest.main()
