#!/usr/bin/python3
"""txlgen-server against txlgen's own numbers, over plain HTTP (Python's
standard library; tests/server-openai.mjs drives it with the official
openai client).

The server runs the default model (models/sotu.bin) on 127.0.0.1, a free
port.  What it answers is checked against what txlgen computes for the
same text: greedy text, sampled text of the same seed (choice k as
txlgen --n-samples' sample k), echo log-probs against --score --json, a
session continued over three requests against one run over the whole
text, a session across a restart (--session-dir); and the server's own
rules: errors naming the field, limits, the API key, a client that goes
away, SIGTERM with a request in flight, many clients at once.

Run:  TXLGEN=build/cmd/txlgen TXLGEN_SERVER=build/server/txlgen-server \\
      /usr/bin/python3 tests/test_server.py -v
"""

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TXLGEN = os.environ.get("TXLGEN", os.path.join(ROOT, "build", "cmd",
                                                "txlgen"))
SERVER = os.environ.get("TXLGEN_SERVER", os.path.join(
    ROOT, "build", "server", "txlgen-server"))
MODEL = os.path.join(ROOT, "models", "sotu.bin")
TIMEOUT = 120


class Server:
    """txlgen-server on a free port of 127.0.0.1, stopped at exit."""

    def __init__(self, *args, wait=True, env=None):
        self.proc = subprocess.Popen(
            [SERVER, "-m", MODEL, "--port", "0", *args],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            env=dict(os.environ, **env) if env else None)
        self.log = []
        m = None
        # "loading MODEL", then "listening on URL"
        for line in self.proc.stderr:
            self.log.append(line)
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)/",
                          line)
            if m or len(self.log) > 1:
                break
        if not m:
            self.proc.kill()
            raise AssertionError(f"no port in {self.log!r}")
        self.port = int(m.group(1))
        self._drain = threading.Thread(target=self._read, daemon=True)
        self._drain.start()
        if wait:
            self.wait_ready()

    def _read(self):
        for line in self.proc.stderr:
            self.log.append(line)

    def wait_ready(self):
        for _ in range(600):
            status, _ = self.get("/health")
            if status == 200:
                return
            time.sleep(0.05)
        raise AssertionError("the server never became ready")

    def request(self, method, path, body=None, headers=None, raw=None):
        c = http.client.HTTPConnection("127.0.0.1", self.port,
                                       timeout=TIMEOUT)
        data = raw if raw is not None else \
            None if body is None else json.dumps(body).encode()
        c.request(method, path, body=data, headers=headers or {})
        r = c.getresponse()
        out = r.read()
        c.close()
        try:
            return r.status, json.loads(out)
        except ValueError:
            return r.status, out.decode()

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, body=None, **kw):
        return self.request("POST", path, body, **kw)

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=60)
        finally:
            self._drain.join(timeout=5)
            self.proc.stderr.close()


def txlgen(*args, text=None):
    r = subprocess.run([TXLGEN, "-m", MODEL, *args], input=text,
                       capture_output=True, text=True, timeout=TIMEOUT)
    if r.returncode != 0:
        raise AssertionError(f"txlgen {args}: {r.stderr}")
    return r.stdout


def stream(port, body):
    """The events of a streamed completion, as parsed JSON (and the last
    raw line, [DONE])."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
    c.request("POST", "/v1/completions", body=json.dumps(body).encode())
    r = c.getresponse()
    assert r.status == 200, r.status
    assert r.getheader("Content-Type") == "text/event-stream"
    events, done = [], False
    for line in r.read().decode().split("\n"):
        if line.startswith("data: "):
            if line == "data: [DONE]":
                done = True
            else:
                assert not done, "an event after [DONE]"
                events.append(json.loads(line[6:]))
    c.close()
    return events, done


class TestServer(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.srv = Server("--parallel", "4")

    @classmethod
    def tearDownClass(cls):
        rc = cls.srv.stop()
        if rc != 0:
            raise AssertionError(f"exit {rc}: {''.join(cls.srv.log)}")

    def complete(self, **body):
        status, r = self.srv.post("/v1/completions", body)
        self.assertEqual(status, 200, r)
        return r

    def test_health_and_models(self):
        self.assertEqual(self.srv.get("/health"), (200, {"status": "ok"}))
        status, r = self.srv.get("/v1/models")
        self.assertEqual(status, 200)
        self.assertEqual(r["data"][0]["id"], "sotu")

    def test_sampled_text_is_valid_utf8(self):
        # the default model's byte tokens: after an emoji it gave a lone
        # continuation byte (U+FFFD) for most seeds
        for seed in (1, 2, 3):
            r = self.complete(prompt="I love this country \U0001F1FA"
                              "\U0001F1F8 \u2764\ufe0f \U0001F600",
                              max_tokens=12, temperature=1.5, top_k=0,
                              top_p=1, min_p=0, n=8, seed=seed)
            for c in r["choices"]:
                self.assertNotIn("\ufffd", c["text"], f"seed {seed}")

    def test_sampling_controls_are_txlgens(self):
        prompt = "Fellow citizens"
        # OpenAI's logit_bias (ids as keys), llama-server's list form
        for bias in ({"260": -100}, [[260, False]], [[" of", -100]]):
            r = self.complete(prompt=prompt, max_tokens=10, temperature=0,
                              logit_bias=bias)
            want = txlgen("-p", prompt, "-n", "10", "--temp", "0",
                          "--logit-bias", "260=-100")
            self.assertEqual(r["choices"][0]["text"], want.rstrip("\n"),
                             bias)
        # the penalties, typical and mirostat 2 as txlgen draws them
        for fields, flags in (
                ({"frequency_penalty": 1.5, "presence_penalty": 0.5},
                 ["--frequency-penalty", "1.5", "--presence-penalty",
                  "0.5"]),
                ({"typical_p": 0.6}, ["--typical", "0.6"]),
                ({"mirostat": 2, "mirostat_tau": 3, "mirostat_eta": 0.2},
                 ["--mirostat-tau", "3", "--mirostat-eta", "0.2"])):
            r = self.complete(prompt=prompt, max_tokens=20, seed=5,
                              temperature=1, **fields)
            want = txlgen("-p", prompt, "-n", "20", "--seed", "5",
                          "--temp", "1", *flags)
            self.assertEqual(r["choices"][0]["text"], want.rstrip("\n"),
                             fields)
        for body, what in (({"mirostat": 1}, "'mirostat': 1"),
                           ({"logit_bias": {"99999": 1}}, "no token 99999"),
                           ({"logit_bias": {"12": "x"}}, "'logit_bias'"),
                           ({"typical_p": 0}, "'typical_p'"),
                           ({"frequency_penalty": 3},
                            "'frequency_penalty'")):
            status, r = self.srv.post("/v1/completions",
                                      {"prompt": "x", **body})
            self.assertEqual(status, 400, body)
            self.assertIn(what, r["error"]["message"])

    def test_fields_not_known_or_not_done_are_refused(self):
        for body, what in (
                ({"max_token": 5}, "unknown field 'max_token'; did you "
                 "mean 'max_tokens'?"),
                ({"n_predict": 5}, "unknown field 'n_predict'; did you "
                 "mean 'max_tokens'?"),
                ({"frobnicate": 1}, "unknown field 'frobnicate' "
                 "(txlgen-server --lenient"),
                ({"suffix": "the end"}, "'suffix' is not implemented"),
                ({"best_of": 3}, "'best_of' other than 'n'")):
            status, r = self.srv.post("/v1/completions",
                                      {"prompt": "x", "max_tokens": 1,
                                       **body})
            self.assertEqual(status, 400, body)
            self.assertIn(what, r["error"]["message"])
        # what OpenAI's clients send is taken
        r = self.complete(prompt="x", max_tokens=1, model="any", user="u",
                          best_of=1, suffix="", stream_options=None)
        self.assertEqual(r["usage"]["completion_tokens"], 1)

    def test_logprobs_of_byte_tokens_are_utf8_json(self):
        # an emoji spelled a byte a token: each piece as OpenAI writes a
        # part of a character, and the answer valid UTF-8 JSON
        r = self.complete(prompt="I love \U0001F600", max_tokens=2,
                          echo=True, logprobs=5, seed=1)
        lp = r["choices"][0]["logprobs"]
        self.assertIn("bytes:\\xf0", lp["tokens"])
        for t in lp["tokens"]:
            self.assertNotIn("\ufffd", t)

    def test_greedy_text_is_txlgens(self):
        prompt = "Fellow citizens of the Senate and House of Representatives,"
        r = self.complete(prompt=prompt, max_tokens=30, temperature=0)
        want = txlgen("-p", prompt, "-n", "30", "--temp", "0")
        self.assertEqual(r["choices"][0]["text"], want.rstrip("\n"))
        self.assertEqual(r["choices"][0]["finish_reason"], "length")
        self.assertEqual(r["usage"]["completion_tokens"], 30)
        self.assertEqual(r["object"], "text_completion")

    def test_choices_are_txlgens_samples(self):
        prompt = "The state of the Union"
        r = self.complete(prompt=prompt, max_tokens=12, n=3, seed=7)
        out = txlgen("-p", prompt, "-n", "12", "--seed", "7",
                     "--n-samples", "3")
        # every sample after its line, sample 0's too
        first, *samples = re.split(r"\n?--- sample \d+ ---\n",
                                   out.rstrip("\n"))
        self.assertEqual(first, "", out)
        self.assertEqual(len(samples), 3, out)
        self.assertEqual([c["text"] for c in r["choices"]], samples)

    def test_stream_is_the_same_text(self):
        body = dict(prompt="We have", max_tokens=25, temperature=0)
        whole = self.complete(**body)["choices"][0]["text"]
        events, done = stream(self.srv.port, dict(body, stream=True))
        self.assertTrue(done)
        self.assertEqual("".join(e["choices"][0]["text"] for e in events),
                         whole)
        self.assertEqual(events[-1]["choices"][0]["finish_reason"],
                         "length")
        self.assertTrue(all(e["choices"][0]["finish_reason"] is None
                            for e in events[:-1]))

    def test_echo_logprobs_are_score(self):
        text = "The Congress of the United States has the power to lay taxes."
        r = self.complete(prompt=text, max_tokens=0, echo=True, logprobs=3)
        c = r["choices"][0]
        self.assertEqual(c["text"], text)
        lp = c["logprobs"]
        with tempfile.NamedTemporaryFile("w", suffix=".txt") as f:
            f.write(text)
            f.flush()
            rows = [json.loads(x) for x in
                    txlgen("--score", f.name, "--json").splitlines()]
        scored = [x for x in rows if "pos" in x]
        self.assertIsNone(lp["token_logprobs"][0])
        self.assertIsNone(lp["top_logprobs"][0])
        self.assertEqual(len(lp["token_logprobs"]), len(scored) + 1)
        for got, want in zip(lp["token_logprobs"][1:], scored):
            self.assertAlmostEqual(got, want["logprob"], delta=1e-5)
        self.assertEqual("".join(lp["tokens"]), text)
        # each token's text starts at its offset
        for tok, off in zip(lp["tokens"], lp["text_offset"]):
            self.assertEqual(text[off:off + len(tok)], tok)
        for top, value in zip(lp["top_logprobs"][1:],
                              lp["token_logprobs"][1:]):
            self.assertLessEqual(len(top), 3)
            self.assertGreaterEqual(max(top.values()), value - 1e-6)

    def test_token_ranks(self):
        # txlgen's extension: each token's rank in the model's
        # distribution, null where its log-prob is
        text = "The Congress of the United States has the power to lay taxes."
        lp = self.complete(prompt=text, max_tokens=0, echo=True,
                           logprobs=20)["choices"][0]["logprobs"]
        ranks = lp["token_ranks"]
        self.assertEqual(len(ranks), len(lp["tokens"]))
        self.assertIsNone(ranks[0])
        for rank, value, top in zip(ranks[1:], lp["token_logprobs"][1:],
                                    lp["top_logprobs"][1:]):
            above = sum(v > value + 1e-6 for v in top.values())
            self.assertGreaterEqual(rank, 1 + above)
            if len(top) == 20 and rank <= 20:
                # the token is among the 20, as likely as the rank-th
                self.assertAlmostEqual(sorted(top.values())[-rank], value,
                                       delta=1e-5)
        self.assertIn(1, ranks)
        self.assertTrue(any(r > 20 for r in ranks[1:]))
        # greedy without a penalty picks the likeliest every time
        lp = self.complete(prompt=text, max_tokens=8, temperature=0,
                           repeat_penalty=1, logprobs=0)["choices"][0][
                               "logprobs"]
        self.assertEqual(lp["token_ranks"], [1] * 8)
        self.assertEqual(lp["top_logprobs"], [{}] * 8)

    def test_stop_strings(self):
        prompt = "Fellow citizens of the Senate and House of Representatives,"
        full = self.complete(prompt=prompt, max_tokens=30,
                             temperature=0)["choices"][0]["text"]
        word = full.split()[3]
        r = self.complete(prompt=prompt, max_tokens=30, temperature=0,
                          stop=[word])
        c = r["choices"][0]
        self.assertEqual(c["finish_reason"], "stop")
        self.assertEqual(c["text"], full[:full.index(word)])

    def test_tokenize_round_trip(self):
        text = "Government of the people, by the people, for the people"
        status, r = self.srv.post("/tokenize", {"prompt": text})
        self.assertEqual(status, 200)
        self.assertGreater(len(r["tokens"]), 5)
        status, back = self.srv.post("/detokenize", {"tokens": r["tokens"]})
        self.assertEqual((status, back["prompt"]), (200, text))
        status, info = self.srv.get("/tokenizer_info")
        self.assertEqual(status, 200)
        self.assertGreater(info["vocab_size"], 1000)
        self.assertIn("eos_token_id", info)

    def test_token_id_prompts(self):
        text = "In the course of human events"
        _, tok = self.srv.post("/tokenize", {"prompt": text})
        by_text = self.complete(prompt=text, max_tokens=8, temperature=0)
        by_ids = self.complete(prompt=tok["tokens"], max_tokens=8,
                               temperature=0)
        self.assertEqual(by_ids["choices"][0]["text"],
                         by_text["choices"][0]["text"])
        both = self.complete(prompt=[tok["tokens"], text], max_tokens=8,
                             temperature=0)
        self.assertEqual([c["text"] for c in both["choices"]],
                         [by_text["choices"][0]["text"]] * 2)

    def test_errors_name_the_field(self):
        cases = [
            ({"prompt": "x", "max_tokens": "ten"}, "max_tokens"),
            ({"prompt": "x", "temperature": -1}, "temperature"),
            ({"prompt": "x", "n": 0}, "'n'"),
            ({"prompt": "x", "logprobs": 21}, "logprobs"),
            ({"prompt": "x", "stop": 5}, "stop"),
            ({"prompt": 5}, "prompt"),
            ({"prompt": [1, -2]}, "prompt"),
            ({"prompt": "x", "echo": "yes"}, "echo"),
            ({"prompt": "x", "session": "../etc"}, "session"),
        ]
        for body, field in cases:
            status, r = self.srv.post("/v1/completions", body)
            self.assertEqual(status, 400, body)
            self.assertIn(field, r["error"]["message"], body)
        status, r = self.srv.post("/v1/completions", raw=b"{not json")
        self.assertEqual(status, 400)
        self.assertIn("not JSON", r["error"]["message"])
        status, r = self.srv.post("/v1/chat/completions",
                                  {"messages": [{"role": "user",
                                                 "content": "hi"}]})
        self.assertEqual(status, 400)
        self.assertIn("/v1/completions", r["error"]["message"])
        self.assertEqual(self.srv.get("/nothing")[0], 404)

    def test_body_limit(self):
        """A body over --max-body: 413 as soon as its length is known (from
        Content-Length, before it is sent), or once it passes the limit."""
        s = socket.create_connection(("127.0.0.1", self.srv.port))
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                  b"Content-Length: %d\r\n\r\n" % (2 << 20))
        self.assertTrue(s.recv(4096).startswith(b"HTTP/1.1 413"))
        s.close()
        s = socket.create_connection(("127.0.0.1", self.srv.port))
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\n")
        chunk = b"a" * 65536
        try:
            for _ in range(40):
                s.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            s.sendall(b"0\r\n\r\n")
        except OSError:
            pass            # it may answer and close before the end
        self.assertTrue(s.recv(4096).startswith(b"HTTP/1.1 413"))
        s.close()

    def test_client_going_away_cancels(self):
        _, before = self.srv.get("/metrics")
        s = socket.create_connection(("127.0.0.1", self.srv.port))
        body = json.dumps({"prompt": "We", "max_tokens": 60000,
                           "ignore_eos": True}).encode()
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                  b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        time.sleep(0.5)
        s.close()
        for _ in range(100):
            _, m = self.srv.get("/metrics")
            n = int(re.search(r"^txlgen_cancelled_total (\d+)", m,
                              re.M).group(1))
            running = int(re.search(r"^txlgen_requests_running (\d+)", m,
                                    re.M).group(1))
            if n >= 1 and running == 0:
                break
            time.sleep(0.1)
        self.assertGreaterEqual(n, 1, m)
        self.assertEqual(running, 0, m)

    def test_many_clients_some_hostile(self):
        """32 clients at once, a quarter of them sending garbage or going
        away: every well-formed request gets txlgen's answer."""
        prompt = "The finances of the Government"
        want = self.complete(prompt=prompt, max_tokens=10,
                             temperature=0)["choices"][0]["text"]
        results, errors = [], []

        def good():
            try:
                s, r = self.srv.post("/v1/completions",
                                     dict(prompt=prompt, max_tokens=10,
                                          temperature=0))
                results.append((s, r["choices"][0]["text"]))
            except Exception as e:      # noqa: BLE001 - reported below
                errors.append(repr(e))

        def garbage():
            s = socket.create_connection(("127.0.0.1", self.srv.port))
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nContent-Length:"
                      b" 50\r\n\r\n{\"prompt\": \x00\xff")
            s.close()

        threads = [threading.Thread(target=good if i % 4 else garbage)
                   for i in range(32)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(TIMEOUT)
        self.assertEqual(errors, [])
        self.assertEqual(results, [(200, want)] * 24)


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class TestHostileLoad(unittest.TestCase):
    """64 clients at once on a server with small limits: well-formed
    requests, garbage, slow and huge bodies, streams cut off mid-way.
    Every well-formed request gets txlgen's answer or a 503 with
    Retry-After (the queue is full), the slow ones are closed after
    --timeout, and the server's memory stays bounded."""

    def test_64_clients(self):
        srv = Server("--parallel", "4", "--timeout", "2", "--max-queue",
                     "16", "--max-body", "65536")
        try:
            prompt = "The revenue of the country"
            _, r = srv.post("/v1/completions", dict(
                prompt=prompt, max_tokens=8, temperature=0))
            want = r["choices"][0]["text"]
            rss0 = rss_kb(srv.proc.pid)
            good, errors = [], []

            def well_formed():
                try:
                    c = http.client.HTTPConnection("127.0.0.1", srv.port,
                                                   timeout=TIMEOUT)
                    c.request("POST", "/v1/completions", json.dumps(dict(
                        prompt=prompt, max_tokens=8, temperature=0)))
                    resp = c.getresponse()
                    body = json.loads(resp.read())
                    if resp.status == 503:
                        good.append((503, resp.getheader("Retry-After")))
                    else:
                        good.append((resp.status,
                                     body["choices"][0]["text"]))
                    c.close()
                except Exception as e:      # noqa: BLE001 - reported
                    errors.append(repr(e))

            def garbage():
                s = socket.create_connection(("127.0.0.1", srv.port))
                s.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"
                          + os.urandom(200))
                s.close()

            def huge():
                s = socket.create_connection(("127.0.0.1", srv.port))
                try:
                    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                              b"Content-Length: 10000000\r\n\r\n" +
                              b"a" * 100000)
                    # too large, or (on a slow machine, the queue full of
                    # the others) busy: refused before the body either way
                    got = s.recv(64)
                    if not got.startswith((b"HTTP/1.1 413",
                                           b"HTTP/1.1 503")):
                        errors.append("huge: %r" % got)
                except OSError:
                    pass        # closed on us: the answer was sent first
                s.close()

            def slow():
                s = socket.create_connection(("127.0.0.1", srv.port))
                s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                          b"Content-Length: 100\r\n\r\n{\"pro")
                s.settimeout(30)
                t0 = time.monotonic()
                try:
                    while s.recv(4096):
                        pass
                except OSError:
                    pass
                if time.monotonic() - t0 > 15:
                    errors.append("a stalled body was not closed")
                s.close()

            def cut_stream():
                s = socket.create_connection(("127.0.0.1", srv.port))
                body = json.dumps(dict(prompt="We", max_tokens=2000,
                                       stream=True, ignore_eos=True))
                s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                          b"Content-Length: %d\r\n\r\n%s" %
                          (len(body), body.encode()))
                s.recv(100)
                s.close()

            kinds = [well_formed] * 40 + [garbage] * 6 + [huge] * 6 + \
                [slow] * 6 + [cut_stream] * 6
            threads = [threading.Thread(target=k) for k in kinds]
            for t in threads:
                t.start()
            for t in threads:
                t.join(TIMEOUT)
            self.assertEqual(errors, [])
            self.assertEqual(len(good), 40)
            for status, what in good:
                if status == 503:
                    self.assertEqual(what, "1")
                else:
                    self.assertEqual((status, what), (200, want))
            self.assertGreater(sum(s == 200 for s, _ in good), 16)
            # the cut streams are cancelled, nothing runs on
            for _ in range(100):
                _, m = srv.get("/metrics")
                if re.search(r"^txlgen_requests_running 0$", m, re.M):
                    break
                time.sleep(0.1)
            self.assertRegex(m, r"(?m)^txlgen_requests_running 0$")
            self.assertLess(rss_kb(srv.proc.pid) - rss0, 64 * 1024)
        finally:
            self.assertEqual(srv.stop(), 0)

    def test_cors(self):
        srv = Server("--cors-origin", "https://example.org")
        try:
            c = http.client.HTTPConnection("127.0.0.1", srv.port,
                                           timeout=TIMEOUT)
            c.request("OPTIONS", "/v1/completions", headers={
                "Origin": "https://example.org",
                "Access-Control-Request-Method": "POST"})
            r = c.getresponse()
            r.read()
            self.assertEqual(r.status, 204)
            self.assertEqual(r.getheader("Access-Control-Allow-Origin"),
                             "https://example.org")
            c.close()
        finally:
            self.assertEqual(srv.stop(), 0)


class TestSessions(unittest.TestCase):

    def test_three_requests_are_one_run(self):
        """A session read in three requests, then continued, gives what
        txlgen gives for the whole text: the memory holds it all, the
        repeat penalty's window too (the model recommends one)."""
        parts = ["Fellow citizens of the Senate and House of "
                 "Representatives:\n",
                 "The present state of the Union is good.\n",
                 "We have"]
        with tempfile.TemporaryDirectory() as d:
            srv = Server("--session-dir", d)
            try:
                for p in parts[:2]:
                    status, r = srv.post("/v1/completions",
                                         dict(prompt=p, max_tokens=0,
                                              session="s1"))
                    self.assertEqual(status, 200, r)
                    self.assertEqual(r["choices"][0]["text"], "")
                status, r = srv.post("/v1/completions",
                                     dict(prompt=parts[2], max_tokens=20,
                                          temperature=0, session="s1"))
                self.assertEqual(status, 200, r)
                got = r["choices"][0]["text"]
                # only the new text was read
                _, tok = srv.post("/tokenize", {"prompt": parts[2]})
                self.assertEqual(r["usage"]["prompt_tokens"],
                                 len(tok["tokens"]))
                status, lst = srv.get("/sessions")
                self.assertIn("s1", [x["id"] for x in lst["data"]])
            finally:
                self.assertEqual(srv.stop(), 0)
            want = txlgen("-p", "".join(parts), "-n", "20", "--temp", "0")
            self.assertEqual(got, want.rstrip("\n"))
            self.assertTrue(os.path.exists(os.path.join(d, "s1.state")))

            # a restart: the session continues from its file
            srv = Server("--session-dir", d)
            try:
                status, r2 = srv.post("/v1/completions",
                                      dict(prompt=" the", max_tokens=10,
                                           temperature=0, session="s1"))
                self.assertEqual(status, 200, r2)
                status, lst = srv.get("/sessions")
                self.assertIn("s1", [x["id"] for x in lst["data"]])
                self.assertEqual(srv.request("DELETE", "/sessions/s1")[0],
                                 200)
                self.assertEqual(srv.request("DELETE", "/sessions/s1")[0],
                                 404)
            finally:
                self.assertEqual(srv.stop(), 0)
            self.assertFalse(os.path.exists(os.path.join(d, "s1.state")))
            want2 = txlgen("-p", "".join(parts) + got + " the", "-n", "10",
                           "--temp", "0")
            self.assertEqual(r2["choices"][0]["text"], want2.rstrip("\n"))


    def test_a_busy_session_answers_409(self):
        srv = Server()
        try:
            body = dict(prompt="We", max_tokens=60000, ignore_eos=True,
                        session="busy", stream=True)
            c = http.client.HTTPConnection("127.0.0.1", srv.port,
                                           timeout=TIMEOUT)
            c.request("POST", "/v1/completions", json.dumps(body))
            r = c.getresponse()
            r.readline()            # the first event: it runs
            status, err = srv.post("/v1/completions",
                                   dict(prompt="x", session="busy"))
            self.assertEqual(status, 409)
            self.assertIn("in use", err["error"]["message"])
            self.assertEqual(srv.request("DELETE", "/sessions/busy")[0], 409)
            c.close()
            # the stream's end frees it
            for _ in range(100):
                status, _ = srv.post("/v1/completions",
                                     dict(prompt="x", max_tokens=1,
                                          session="busy"))
                if status == 200:
                    break
                time.sleep(0.1)
            self.assertEqual(status, 200)
        finally:
            self.assertEqual(srv.stop(), 0)


class TestStartAndStop(unittest.TestCase):

    def test_api_key(self):
        with tempfile.NamedTemporaryFile("w") as k:
            k.write("sesame\n")
            k.flush()
            srv = Server("--api-key-file", k.name)
            try:
                self.assertEqual(srv.get("/health")[0], 200)
                body = dict(prompt="x", max_tokens=1)
                self.assertEqual(srv.post("/v1/completions", body)[0], 401)
                self.assertEqual(srv.post("/v1/completions", body, headers={
                    "Authorization": "Bearer sesamE"})[0], 401)
                self.assertEqual(srv.post("/v1/completions", body, headers={
                    "Authorization": "Bearer sesame"})[0], 200)
            finally:
                self.assertEqual(srv.stop(), 0)

    def test_refuses_open_address_without_key(self):
        r = subprocess.run([SERVER, "-m", MODEL, "--host", "0.0.0.0",
                            "--port", "0"], capture_output=True, text=True,
                           timeout=TIMEOUT)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--api-key-file", r.stderr)

    def test_bad_options(self):
        for args, rc in [(["--port", "x"], 2), (["--frob"], 2),
                         (["--prompt", "f"], 2), (["--temp", "-1"], 2),
                         (["-m", "/nonexistent.bin"], 3)]:
            r = subprocess.run([SERVER, *args, "--port", "0"]
                               if "--port" not in args else [SERVER, *args],
                               capture_output=True, text=True,
                               timeout=TIMEOUT)
            self.assertEqual(r.returncode, rc, (args, r.stderr))
            self.assertTrue(r.stderr.startswith("txlgen-server: "), r.stderr)

    def test_sigterm_with_a_stream_in_flight(self):
        srv = Server("--grace", "1")
        events = []

        def run():
            events.append(stream(srv.port, dict(prompt="We", stream=True,
                                                max_tokens=60000,
                                                ignore_eos=True)))

        t = threading.Thread(target=run)
        t.start()
        time.sleep(1.0)
        self.assertEqual(srv.stop(), 0)
        t.join(TIMEOUT)
        evs, done = events[0]
        self.assertTrue(done, "the stream did not end with [DONE]")
        self.assertEqual(evs[-1]["choices"][0]["finish_reason"], "length")


class TestLenient(unittest.TestCase):
    def test_unknown_fields_are_let_be(self):
        srv = Server("--lenient")
        try:
            status, r = srv.post("/v1/completions", {
                "prompt": "x", "max_tokens": 1, "frobnicate": 1})
            self.assertEqual(status, 200, r)
            # what is not done is refused all the same
            status, r = srv.post("/v1/completions", {
                "prompt": "x", "suffix": "y"})
            self.assertEqual(status, 400, r)
        finally:
            self.assertEqual(srv.stop(), 0)


if __name__ == "__main__":
    unittest.main()
