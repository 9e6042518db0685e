#!/usr/bin/python3
"""txlgen-server's HTTP side against hostile clients: slow clients that
hold connections, signals that come twice, IPv6, half-closed sockets,
request bodies and request lines that are not what they seem.

Everything talks to 127.0.0.1, other addresses of 127.0.0.0/8 (as
distinct clients) and ::1; every wait is bounded.

Run:  TXLGEN=build/cmd/txlgen TXLGEN_SERVER=build/server/txlgen-server \\
      /usr/bin/python3 tests/test_server_http.py -v
"""

import http.client
import json
import os
import re
import select
import signal
import socket
import subprocess
import tempfile
import threading
import time
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVER = os.environ.get("TXLGEN_SERVER", os.path.join(
    ROOT, "build", "server", "txlgen-server"))
MODEL = os.path.join(ROOT, "models", "sotu.bin")
TIMEOUT = 120

# the server keeps an ignored SIGHUP ignored (as nohup asks): the hangup
# test needs its default in the server, whatever ran the tests
signal.signal(signal.SIGHUP, signal.SIG_DFL)


class Server:
    """txlgen-server on a free port (of 127.0.0.1, or --host), stopped at
    exit."""

    def __init__(self, *args, wait=True, preexec=None):
        self.proc = subprocess.Popen(
            [SERVER, "-m", MODEL, "--port", "0", *args],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            preexec_fn=preexec)
        self.log = []
        for line in self.proc.stderr:
            self.log.append(line)
            m = re.search(r"listening on http://(\[[0-9a-f:]+\]|"
                          r"[0-9.]+):(\d+)/", line)
            if m:
                break
        else:
            self.proc.kill()
            raise AssertionError(f"no port in {self.log!r}")
        self.bound = m.group(1).strip("[]")
        self.port = int(m.group(2))
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

    def request(self, method, path, body=None, headers=None, raw=None,
                timeout=TIMEOUT):
        c = http.client.HTTPConnection(self.bound, self.port,
                                       timeout=timeout)
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

    def raw(self, data, shut=False, timeout=10, src=None):
        """Send @data on a socket of its own; everything it gets back
        until the server closes (or @timeout)."""
        fam = socket.AF_INET6 if ":" in self.bound else socket.AF_INET
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.settimeout(timeout)
        if src:
            s.bind((src, 0))
        s.connect((self.bound, self.port))
        out = b""
        try:
            s.sendall(data)
            if shut:
                s.shutdown(socket.SHUT_WR)
            while True:
                b = s.recv(65536)
                if not b:
                    break
                out += b
        except OSError:
            pass
        s.close()
        return out

    def metric(self, name, **kw):
        _, m = self.get("/metrics", **kw)
        found = re.search(r"^" + re.escape(name) + r" (\d+)", m, re.M)
        return int(found.group(1)) if found else None

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=60)
        finally:
            self._drain.join(timeout=5)
            self.proc.stderr.close()


def request_bytes(method, path, body=b"", extra=b"", version=b"1.1"):
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
    return (b"%s %s HTTP/%s\r\nHost: x\r\n%sContent-Length: %d\r\n\r\n%s"
            % (method.encode(), path.encode(), version, extra, len(body),
               body))


def status_of(answer):
    """The final status of a raw answer (1xx interim ones skipped)."""
    codes = re.findall(rb"^HTTP/1\.[01] (\d{3})", answer, re.M)
    final = [int(c) for c in codes if not c.startswith(b"1")]
    return final[0] if final else None


def ipv6_loopback():
    try:
        s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        s.bind(("::1", 0))
        s.close()
        return True
    except OSError:
        return False


class TestSlowClients(unittest.TestCase):

    def test_slow_clients_lock_nobody_out(self):
        """150 connections that send a byte every 3 s: the first 32 of
        one address are held, the rest of it answered 503; /health and
        a completion from 127.0.0.1 are answered at once, and the slow
        ones are all closed by --request-timeout."""
        srv = Server("--request-timeout", "6")
        socks = []
        try:
            t0 = time.monotonic()
            # 60 from one address (past its share), 90 from nine others
            srcs = ["127.0.0.2"] * 60 + \
                [f"127.0.0.{3 + i // 10}" for i in range(90)]
            for src in srcs:
                s = socket.socket()
                s.bind((src, 0))
                s.connect(("127.0.0.1", srv.port))
                s.setblocking(False)
                s.sendall(b"P")
                socks.append(s)
            refused = set()
            closed = {}
            ok_health = ok_completion = None
            last_drip = time.monotonic()
            while time.monotonic() - t0 < 25 and len(closed) < len(socks):
                if ok_health is None and time.monotonic() - t0 > 1:
                    t = time.monotonic()
                    self.assertEqual(srv.get("/health", timeout=10)[0], 200)
                    st, r = srv.post("/v1/completions", dict(
                        prompt="We", max_tokens=1), timeout=10)
                    self.assertEqual(st, 200, r)
                    ok_health = ok_completion = time.monotonic() - t
                if time.monotonic() - last_drip > 3:
                    last_drip = time.monotonic()
                    for i, s in enumerate(socks):
                        if i not in closed:
                            try:
                                s.send(b"O")
                            except OSError:
                                closed[i] = time.monotonic() - t0
                live = [s for i, s in enumerate(socks) if i not in closed]
                r, _, _ = select.select(live, [], [], 0.5)
                for s in r:
                    i = socks.index(s)
                    try:
                        b = s.recv(4096)
                    except OSError:
                        b = b""
                    if b.startswith(b"HTTP/1.1 503"):
                        refused.add(i)
                    if not b or i in refused:
                        closed.setdefault(i, time.monotonic() - t0)
            self.assertIsNotNone(ok_health)
            self.assertLess(ok_completion, 10)
            # one address holds at most its 32
            self.assertEqual(len([i for i in refused if i < 60]), 28,
                             sorted(refused))
            self.assertEqual([i for i in refused if i >= 60], [])
            # every slow one was closed, the held ones by their deadline
            self.assertEqual(len(closed), 150)
            held = [t for i, t in closed.items() if i not in refused]
            self.assertGreater(min(held), 4)
            self.assertLess(max(held), 20)
            self.assertGreaterEqual(
                srv.metric('txlgen_http_responses_total{code="503"}'), 28)
            self.assertEqual(srv.get("/health")[0], 200)
        finally:
            for s in socks:
                s.close()
            self.assertEqual(srv.stop(), 0)

    def test_slow_clients_make_room(self):
        """All connections taken by slow clients from many addresses:
        the oldest makes room for a new one."""
        srv = Server("--max-connections", "8", "--request-timeout", "60")
        socks = []
        try:
            for i in range(30):
                s = socket.socket()
                s.bind((f"127.0.1.{i + 1}", 0))
                s.connect(("127.0.0.1", srv.port))
                s.sendall(b"GET /heal")
                socks.append(s)
            time.sleep(1.5)
            t = time.monotonic()
            self.assertEqual(srv.get("/health", timeout=10)[0], 200)
            st, _ = srv.post("/v1/completions", dict(prompt="We",
                                                     max_tokens=1),
                             timeout=10)
            self.assertEqual(st, 200)
            self.assertLess(time.monotonic() - t, 10)
        finally:
            for s in socks:
                s.close()
            self.assertEqual(srv.stop(), 0)

    def test_chunked_body_past_the_limit(self):
        """A chunked body gets its 413 when it passes --max-body, not
        when it ends."""
        srv = Server("--max-body", "65536")
        try:
            s = socket.create_connection(("127.0.0.1", srv.port))
            s.settimeout(10)
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                      b"Transfer-Encoding: chunked\r\n\r\n")
            chunk = b"a" * 40000
            for _ in range(2):
                s.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.assertTrue(s.recv(4096).startswith(b"HTTP/1.1 413"))
            s.close()
            self.assertEqual(
                srv.metric('txlgen_http_responses_total{code="413"}'), 1)
        finally:
            self.assertEqual(srv.stop(), 0)


def stream_events(port, body, host="127.0.0.1"):
    c = http.client.HTTPConnection(host, port, timeout=TIMEOUT)
    c.request("POST", "/v1/completions", body=json.dumps(body).encode())
    r = c.getresponse()
    assert r.status == 200, r.status
    events, done = [], False
    for line in r.read().decode().split("\n"):
        if line == "data: [DONE]":
            done = True
        elif line.startswith("data: "):
            events.append(json.loads(line[6:]))
    c.close()
    return events, done


class TestSignals(unittest.TestCase):

    def test_two_sigterms_during_a_stream(self):
        srv = Server("--grace", "2")
        out = []
        t = threading.Thread(target=lambda: out.append(stream_events(
            srv.port, dict(prompt="We", stream=True, max_tokens=60000,
                           ignore_eos=True))))
        t.start()
        time.sleep(1.0)
        srv.proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        srv.proc.send_signal(signal.SIGTERM)
        rc = srv.stop()
        t.join(TIMEOUT)
        self.assertEqual(rc, 0, "".join(srv.log))
        evs, done = out[0]
        self.assertTrue(done, "the stream did not end with [DONE]")
        self.assertEqual(evs[-1]["choices"][0]["finish_reason"], "length")
        self.assertIn("already stopping", "".join(srv.log))

    def test_sigterm_while_loading(self):
        for sig, want in ((signal.SIGTERM, 0), (signal.SIGHUP, 129)):
            srv = Server(wait=False)
            srv.proc.send_signal(sig)
            srv.proc.send_signal(sig)
            rc = srv.proc.wait(timeout=60)
            srv.stop()
            self.assertEqual(rc, want, "".join(srv.log))


    def test_ignored_sighup_stays_ignored(self):
        srv = Server(wait=True, preexec=lambda: signal.signal(
            signal.SIGHUP, signal.SIG_IGN))
        srv.proc.send_signal(signal.SIGHUP)
        time.sleep(0.5)
        self.assertEqual(srv.get("/health")[0], 200)
        self.assertEqual(srv.stop(), 0)


class TestAddresses(unittest.TestCase):

    @unittest.skipUnless(ipv6_loopback(), "no IPv6 loopback here")
    def test_ipv6(self):
        srv = Server("--host", "::1")
        try:
            self.assertEqual(srv.bound, "::1")
            st, r = srv.post("/v1/completions", dict(prompt="We",
                                                     max_tokens=2))
            self.assertEqual(st, 200, r)
            self.assertEqual(r["usage"]["completion_tokens"], 2)
        finally:
            self.assertEqual(srv.stop(), 0)

    def test_localhost(self):
        """A name: whichever of its addresses binds first, and the URL
        printed is that address."""
        srv = Server("--host", "localhost")
        try:
            self.assertIn(srv.bound, ("127.0.0.1", "::1"))
            self.assertEqual(srv.get("/health")[0], 200)
        finally:
            self.assertEqual(srv.stop(), 0)


class TestRequests(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.srv = Server()

    @classmethod
    def tearDownClass(cls):
        rc = cls.srv.stop()
        if rc != 0:
            raise AssertionError(f"exit {rc}: {''.join(cls.srv.log)}")

    def error(self, status, path="/v1/completions", **kw):
        st, r = self.srv.post(path, **kw)
        self.assertEqual(st, status, r)
        return r["error"]["message"]

    def test_half_closed_client_gets_its_answer(self):
        for version in (b"1.1", b"1.0"):
            out = self.srv.raw(request_bytes(
                "POST", "/v1/completions", dict(prompt="We", max_tokens=5),
                version=version), shut=True, timeout=30)
            self.assertEqual(status_of(out), 200, out)
            body = json.loads(out.split(b"\r\n\r\n")[-1])
            self.assertEqual(body["usage"]["completion_tokens"], 5)

    def test_body_after_the_json(self):
        msg = self.error(400, raw=b'{"prompt": "We", "max_tokens": 1} x')
        self.assertIn("goes on after", msg)
        # whitespace after it is fine
        self.assertEqual(self.srv.post("/v1/completions", raw=b'{"prompt":'
                                       b' "We", "max_tokens": 1} \r\n')[0],
                         200)

    def test_duplicate_keys(self):
        msg = self.error(400, raw=b'{"prompt": "We", "prompt": "x"}')
        self.assertIn("'prompt' twice", msg)
        msg = self.error(400, raw=b'{"prompt": "We", "stream_options": '
                         b'{"include_usage": true, "include_usage": false}}')
        self.assertIn("'include_usage' twice", msg)
        msg = self.error(400, "/tokenize",
                         raw=b'{"prompt": "a", "x": [{"k": 1, "k": 2}]}')
        self.assertIn("'k' twice", msg)

    def test_nul_escapes(self):
        msg = self.error(400, raw=b'{"prompt": "We", "max_tokens": 1, '
                         b'"session": "alice\\u0000mallory"}')
        self.assertIn("\\u0000", msg)
        msg = self.error(400, "/tokenize", raw=b'{"prompt": "a\\u0000b"}')
        self.assertIn("\\u0000", msg)
        # an escaped backslash before u0000 is no NUL
        st, r = self.srv.post("/tokenize", raw=b'{"prompt": "a\\\\u0000"}')
        self.assertEqual(st, 200, r)

    def test_nul_in_the_path(self):
        st, r = self.srv.post("/v1/completions", dict(
            prompt="We", max_tokens=1, session="alice"))
        self.assertEqual(st, 200, r)
        st, r = self.srv.request("DELETE", "/sessions/alice%00x")
        self.assertEqual(st, 400, r)
        self.assertIn("NUL", r["error"]["message"])
        out = self.srv.raw(b"DELETE /sessions/alice\x00x HTTP/1.1\r\n"
                           b"Host: x\r\n\r\n")
        self.assertEqual(status_of(out), 400, out)
        _, r = self.srv.get("/sessions")
        self.assertIn("alice", json.dumps(r))
        self.assertEqual(self.srv.request("DELETE", "/sessions/alice")[0],
                         200)

    def test_framing(self):
        body = json.dumps(dict(prompt="We", max_tokens=1)).encode()
        out = self.srv.raw(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                           b"Content-Length: %d\r\nContent-Length: %d\r\n"
                           b"\r\n%s" % (len(body), len(body), body))
        self.assertEqual(status_of(out), 400, out)
        out = self.srv.raw(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                           b"Content-Length: 5\r\nTransfer-Encoding: "
                           b"chunked\r\n\r\n0\r\n\r\n")
        self.assertEqual(status_of(out), 400, out)

    def test_garbage_request_lines(self):
        for junk in (b"HELLO\r\n\r\n", b"\x16\x03\x01\x02\x00\x01\x00",
                     b"\x00\xff\xfe binary", b"G\xc3\xa9T / HTTP/1.1\r\n"):
            t = time.monotonic()
            out = self.srv.raw(junk, timeout=10)
            self.assertEqual(status_of(out), 400, (junk, out))
            self.assertLess(time.monotonic() - t, 5)
        self.assertEqual(self.srv.get("/health")[0], 200)

    def test_detokenize_whole_numbers(self):
        msg = self.error(400, "/detokenize", body={"tokens": [1.5]})
        self.assertIn("tokens[0]", msg)
        self.assertEqual(self.srv.post("/detokenize",
                                       {"tokens": [1, 2.0]})[0], 200)


class TestKeysAndOptions(unittest.TestCase):

    def test_key_checked_before_the_body(self):
        with tempfile.NamedTemporaryFile("w") as k:
            k.write("sesame\n")
            k.flush()
            srv = Server("--api-key-file", k.name)
            try:
                s = socket.create_connection(("127.0.0.1", srv.port))
                s.settimeout(10)
                s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                          b"Content-Length: 1000000\r\n\r\n")
                self.assertTrue(s.recv(4096).startswith(b"HTTP/1.1 401"))
                s.close()
                self.assertGreaterEqual(srv.metric(
                    'txlgen_http_responses_total{code="401"}',
                    headers={"Authorization": "Bearer sesame"}), 1)
            finally:
                self.assertEqual(srv.stop(), 0)

    def run_server(self, *args):
        return subprocess.run([SERVER, "-m", MODEL, "--port", "0", *args],
                              capture_output=True, text=True,
                              timeout=TIMEOUT)

    def test_bad_key_files(self):
        with tempfile.TemporaryDirectory() as d:
            r = self.run_server("--api-key-file", d)
            self.assertEqual(r.returncode, 3, r.stderr)
            self.assertIn("is a directory", r.stderr)
            self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
            path = os.path.join(d, "key")
            with open(path, "wb") as f:
                f.write(b"ses\x00ame\n")
            r = self.run_server("--api-key-file", path)
            self.assertEqual(r.returncode, 3, r.stderr)
            self.assertIn("NUL", r.stderr)
            self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)

    def test_cors_origin_line_breaks(self):
        for bad in ("https://a.org\r\nSet-Cookie: x=1", "https://a\n"):
            r = self.run_server("--cors-origin", bad)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("--cors-origin", r.stderr)

    def test_library_messages_are_the_servers(self):
        """libmicrohttpd's complaints come as the server's lines, a few a
        second at most."""
        srv = Server()
        try:
            t0 = time.monotonic()
            for _ in range(40):
                srv.raw(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                        b"Content-Length: 12abc\r\n\r\n", timeout=5)
            elapsed = time.monotonic() - t0
        finally:
            self.assertEqual(srv.stop(), 0)
        lines = [ln for ln in srv.log if ln.strip()]
        self.assertTrue(all(ln.startswith("txlgen-server: ")
                            for ln in lines), lines)
        http_lines = [ln for ln in lines if ln.startswith(
            "txlgen-server: http: ")]
        self.assertGreater(len(http_lines), 0, lines)
        self.assertLessEqual(len(http_lines), 5 * (elapsed + 2), lines)



LOG_TEXT = re.compile(
    r"txlgen-server: (?P<time>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z) "
    r"(?P<client>\S+) (?P<method>\S+) (?P<path>\S+) (?P<status>\d+|-) "
    r"(?P<prompt_tokens>\d+|-) (?P<completion_tokens>\d+|-) "
    r"(?P<ms>\d+\.\d)ms\n")


def log_records(lines, fmt):
    """The request log's records among a server's stderr lines, as dicts
    of the JSON form (the text form's '-' as None, numbers as numbers)."""
    out = []
    for ln in lines:
        if fmt == "json" and ln.startswith("{"):
            out.append(json.loads(ln))
        elif fmt == "text" and (m := LOG_TEXT.fullmatch(ln)):
            r = {k: None if v == "-" else v for k, v in m.groupdict().items()}
            for k in ("status", "prompt_tokens", "completion_tokens"):
                if r[k] is not None:
                    r[k] = int(r[k])
            r["ms"] = float(r["ms"])
            out.append(r)
    return out


class TestLog(unittest.TestCase):

    def run_requests(self, *args):
        """A completion, a stream, a 404 and a 401 (the key unsent) on a
        server of ARGS; (its stderr lines, the two usages)."""
        with tempfile.NamedTemporaryFile("w") as k:
            k.write("sesame\n")
            k.flush()
            srv = Server("--api-key-file", k.name, *args)
            auth = {"Authorization": "Bearer sesame"}
            try:
                st, r = srv.post("/v1/completions", dict(
                    prompt="We the people", max_tokens=7, temperature=0),
                    headers=auth)
                self.assertEqual(st, 200, r)
                usage = r["usage"]
                c = http.client.HTTPConnection("127.0.0.1", srv.port,
                                               timeout=TIMEOUT)
                c.request("POST", "/v1/completions", body=json.dumps(dict(
                    prompt="Fellow citizens", max_tokens=5, stream=True,
                    stream_options={"include_usage": True})), headers=auth)
                events = [json.loads(ln[6:]) for ln in
                          c.getresponse().read().decode().split("\n")
                          if ln.startswith("data: {")]
                c.close()
                self.assertEqual(srv.get("/nowhere", headers=auth)[0], 404)
                self.assertEqual(srv.post("/v1/completions", dict(
                    prompt="x", max_tokens=1))[0], 401)
            finally:
                self.assertEqual(srv.stop(), 0, "".join(srv.log))
        return srv.log, usage, events[-1]["usage"]

    def check(self, fmt, recs, usage, stream_usage):
        self.assertEqual(len(recs), 4 + sum(
            r["path"] == "/health" for r in recs), recs)
        recs = [r for r in recs if r["path"] != "/health"]
        for r in recs:
            self.assertEqual(r["client"], "127.0.0.1", r)
            self.assertRegex(r["time"], r"^\d{4}-\d\d-\d\dT[\d:.]+Z$")
            self.assertGreaterEqual(r["ms"], 0, r)
        # a stream is logged when its connection ends, which may be after
        # the next request's line: the two in order, the others by kind
        done, streamed = [r for r in recs if r["path"] == "/v1/completions"
                          and r["status"] != 401]
        missing, = [r for r in recs if r["path"] != "/v1/completions"]
        refused, = [r for r in recs if r["status"] == 401]
        self.assertEqual((done["method"], done["path"], done["status"],
                          done["prompt_tokens"], done["completion_tokens"]),
                         ("POST", "/v1/completions", 200,
                          usage["prompt_tokens"], 7), fmt)
        # logged at its end: with every token it streamed
        self.assertEqual((streamed["status"], streamed["prompt_tokens"],
                          streamed["completion_tokens"]),
                         (200, stream_usage["prompt_tokens"], 5), fmt)
        self.assertEqual((missing["method"], missing["path"],
                          missing["status"], missing["prompt_tokens"],
                          missing["completion_tokens"]),
                         ("GET", "/nowhere", 404, None, None), fmt)
        self.assertEqual((refused["path"], refused["status"],
                          refused["prompt_tokens"],
                          refused["completion_tokens"]),
                         ("/v1/completions", 401, None, None), fmt)

    def test_text_lines(self):
        log, usage, su = self.run_requests()
        # every line the server's, the model named before the address
        self.assertTrue(all(ln.startswith("txlgen-server: ") for ln in log),
                        log)
        recs = log_records(log, "text")
        self.check("text", recs, usage, su)
        rest = [ln for ln in log if not LOG_TEXT.fullmatch(ln)]
        self.assertEqual(len(rest), 5, log)     # and the two of stopping
        self.assertTrue(rest[0].startswith("txlgen-server: loading "), log)
        self.assertIn("sotu.bin", rest[0])
        self.assertEqual(log[0], rest[0])
        self.assertTrue(rest[1].startswith(
            "txlgen-server: listening on http://127.0.0.1:"), log)
        self.assertEqual(log[1], rest[1])
        self.assertTrue(rest[2].startswith("txlgen-server: ready: "), log)

    def test_json_lines(self):
        log, usage, su = self.run_requests("--log-format", "json")
        recs = log_records(log, "json")
        for r in recs:
            self.assertEqual(set(r), {
                "time", "client", "method", "path", "status",
                "prompt_tokens", "completion_tokens", "ms"}, r)
        self.check("json", recs, usage, su)
        self.assertTrue(all(ln.startswith(("txlgen-server: ", "{"))
                            for ln in log), log)

    def test_off_and_odd_paths(self):
        log, _, _ = self.run_requests("--no-log-requests")
        self.assertEqual(log_records(log, "text"), [])
        self.assertEqual(len(log), 5, log)
        srv = Server()
        try:
            srv.raw(request_bytes("GET", '/a"b\\c\x7f\u00e9'),
                    timeout=5)
            srv.raw(b"\x16\x03\x01 not http\r\n\r\n", timeout=5)
        finally:
            self.assertEqual(srv.stop(), 0)
        recs = [r for r in log_records(srv.log, "text")
                if r["path"] != "/health"]
        self.assertEqual([(r["method"], r["path"], r["status"])
                          for r in recs],
                         [("GET", "/a\\x22b\\x5cc\\x7f\\xc3\\xa9", 404),
                          (None, None, 400)], srv.log)
        for bad in (["--log-format", "xml"], ["--log-format"]):
            r = subprocess.run([SERVER, *bad], capture_output=True,
                               text=True, timeout=60)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("--log-format", r.stderr)


if __name__ == "__main__":
    unittest.main()
