#!/usr/bin/python3
"""txlgen-server's named sessions: never lost, whatever the disk does
(a full --session-dir answers 507 and keeps the session in memory),
state files the size of what they hold, a request cut mid-prompt
leaving its session as it was, the repeat penalty's window carried
across requests that only read, the memory given back after sessions
end, and the sessions' memory weighed against the machine's.

Run:  TXLGEN=build/cmd/txlgen TXLGEN_SERVER=build/server/txlgen-server \\
      /usr/bin/python3 tests/test_server_sessions.py -v
"""

import http.client
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from test_server import MODEL, SERVER, TIMEOUT, Server, txlgen  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEXT = os.path.join(ROOT, "tests", "data", "text.txt")
HEADER = 72                 # a state file's header (txl-state.h)


def info():
    return json.loads(txlgen("--info", "--json"))


def sessions(srv):
    status, lst = srv.get("/sessions")
    assert status == 200, lst
    return {x["id"]: x for x in lst["data"]}


class TestFullDisk(unittest.TestCase):

    def test_no_session_is_lost(self):
        """--session-dir on a 2 MB filesystem, 2 sessions in memory, 30
        sessions of a few hundred kB each: the writes that do not fit
        answer 507, and every session continues with its memory."""
        d = tempfile.mkdtemp()
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m",
                            "tmpfs", d], capture_output=True)
        if r.returncode != 0:
            os.rmdir(d)
            self.skipTest("cannot mount a tmpfs: " + r.stderr.decode())
        try:
            srv = Server("--session-dir", d, "--max-sessions", "2",
                         "--parallel", "2")
            try:
                first = {}
                n = 30
                _, tok = srv.post("/tokenize", {"prompt": " and"})
                and_n = len(tok["tokens"])
                for i in range(n):
                    status, r = srv.post("/v1/completions", dict(
                        prompt=f"Session {i} of the Union is strong",
                        max_tokens=4, temperature=0, session=f"s{i}"))
                    self.assertIn(status, (200, 507), r)
                    if status == 507:
                        self.assertIn("could not be saved",
                                      r["error"]["message"])
                    first[i] = status, sessions(srv)[f"s{i}"]["n_past"]
                self.assertIn(507, [v[0] for v in first.values()],
                              "the filesystem never filled")
                for i in range(n):
                    status, r = srv.post("/v1/completions", dict(
                        prompt=" and", max_tokens=0, session=f"s{i}"))
                    self.assertIn(status, (200, 507), r)
                    s = sessions(srv)[f"s{i}"]
                    self.assertTrue(s["in_memory"], s)
                    # the memory of the first request went on
                    self.assertGreater(first[i][1], 4)
                    self.assertEqual(s["n_past"], first[i][1] + and_n,
                                     (i, first[i]))
            finally:
                rc = srv.stop()
            self.assertEqual(rc, 0)
            log = "".join(srv.log)
            self.assertIn("could not be saved", log)
        finally:
            subprocess.run(["umount", d])
            os.rmdir(d)


class TestStateFiles(unittest.TestCase):

    def test_a_state_holds_what_it_holds(self):
        """A 2-token session's file is its 2 positions' K and V (per
        layer, d_model values each, in the memory's type), the last
        output, the window's ids and a header: not the memory's room."""
        m = info()
        a = m["architecture"]
        width = {"F32": 4, "F16": 2, "BF16": 2}[m["session"]["kv_type"]]
        with tempfile.TemporaryDirectory() as d:
            srv = Server("--session-dir", d)
            try:
                status, r = srv.post("/v1/completions", dict(
                    prompt=[100, 200], max_tokens=0, session="two"))
                self.assertEqual(status, 200, r)
            finally:
                self.assertEqual(srv.stop(), 0)
            size = os.path.getsize(os.path.join(d, "two.state"))
            kv = 2 * a["n_layer"] * 2 * a["d_model"] * width
            rest = a["d_model"] * 4 + 2 * 4 + 8
            self.assertLess(size, 100_000)
            self.assertGreaterEqual(size, kv + rest)
            self.assertLessEqual(size, kv + rest + HEADER)

            # and it loads: the session goes on from it
            srv = Server("--session-dir", d)
            try:
                status, r = srv.post("/v1/completions", dict(
                    prompt=[300], max_tokens=0, session="two"))
                self.assertEqual(status, 200, r)
                self.assertEqual(sessions(srv)["two"]["n_past"], 3)
            finally:
                self.assertEqual(srv.stop(), 0)

    def test_max_session_bytes(self):
        """A state larger than --max-session-bytes is not written: its
        request gets 507, the session goes on in memory, the file on
        disk stays the last that fitted."""
        with tempfile.TemporaryDirectory() as d:
            srv = Server("--session-dir", d, "--max-session-bytes", "60000")
            path = os.path.join(d, "b.state")
            try:
                status, r = srv.post("/v1/completions", dict(
                    prompt=[100, 200], max_tokens=0, session="b"))
                self.assertEqual(status, 200, r)
                size = os.path.getsize(path)
                status, r = srv.post("/v1/completions", dict(
                    prompt=list(range(300, 310)), max_tokens=0,
                    session="b"))
                self.assertEqual(status, 507, r)
                self.assertIn("--max-session-bytes 60000",
                              r["error"]["message"])
                self.assertEqual(sessions(srv)["b"]["n_past"], 12)
                self.assertEqual(os.path.getsize(path), size)
            finally:
                self.assertEqual(srv.stop(), 0)
            self.assertIn("session b could not be saved", "".join(srv.log))

    def test_max_disk_sessions(self):
        """--max-disk-sessions 3: a fourth file removes the least
        recently used file of a session not in memory, saying so."""
        with tempfile.TemporaryDirectory() as d:
            srv = Server("--session-dir", d, "--max-disk-sessions", "3",
                         "--max-sessions", "1")
            try:
                for i in range(5):
                    status, r = srv.post("/v1/completions", dict(
                        prompt=[100 + i, 200], max_tokens=0,
                        session=f"d{i}"))
                    self.assertEqual(status, 200, r)
                    time.sleep(0.02)
                self.assertEqual(sorted(os.listdir(d)),
                                 ["d2.state", "d3.state", "d4.state"])
                # d2 is used: d3 is now the oldest
                status, r = srv.post("/v1/completions", dict(
                    prompt=[300], max_tokens=0, session="d2"))
                self.assertEqual(status, 200, r)
                self.assertEqual(sessions(srv)["d2"]["n_past"], 3)
                status, r = srv.post("/v1/completions", dict(
                    prompt=[300], max_tokens=0, session="d5"))
                self.assertEqual(status, 200, r)
                self.assertEqual(sorted(os.listdir(d)),
                                 ["d2.state", "d4.state", "d5.state"])
            finally:
                self.assertEqual(srv.stop(), 0)
            log = "".join(srv.log)
            for i in (0, 1, 3):
                self.assertIn(f"removed session d{i},", log)

    def test_mem_init_is_named(self):
        """A state of --mem-init zeros loaded by a server without it
        says so, rather than that the file is damaged."""
        with tempfile.TemporaryDirectory() as d:
            srv = Server("--session-dir", d, "--mem-init", "zeros")
            try:
                status, r = srv.post("/v1/completions", dict(
                    prompt="We the people", max_tokens=0, session="z"))
                self.assertEqual(status, 200, r)
            finally:
                self.assertEqual(srv.stop(), 0)
            srv = Server("--session-dir", d)
            try:
                status, r = srv.post("/v1/completions", dict(
                    prompt=" of", max_tokens=0, session="z"))
                self.assertEqual(status, 500, r)
                msg = r["error"]["message"]
                self.assertIn("mem-init zeros", msg)
                self.assertNotIn("damaged", msg)
            finally:
                self.assertEqual(srv.stop(), 0)


class TestPrompts(unittest.TestCase):

    def test_a_cut_prompt_leaves_the_session(self):
        """A long prompt to a session whose client goes away midway:
        the session's memory is what it was before."""
        srv = Server()
        try:
            status, r = srv.post("/v1/completions", dict(
                prompt="Fellow citizens", max_tokens=0, session="c"))
            self.assertEqual(status, 200, r)
            before = sessions(srv)["c"]["n_past"]
            ids = [(i * 37) % 7000 + 100 for i in range(60000)]
            c = http.client.HTTPConnection("127.0.0.1", srv.port,
                                           timeout=TIMEOUT)
            c.request("POST", "/v1/completions", json.dumps(dict(
                prompt=ids, max_tokens=0, session="c")))
            # it is being read, then the client leaves
            for _ in range(200):
                s = sessions(srv)["c"]
                if s["busy"]:
                    break
                time.sleep(0.02)
            self.assertTrue(s["busy"], s)
            time.sleep(1.0)
            c.sock.shutdown(socket.SHUT_RDWR)
            c.close()
            for _ in range(300):
                s = sessions(srv)["c"]
                if not s["busy"]:
                    break
                time.sleep(0.05)
            self.assertFalse(s["busy"], s)
            self.assertEqual(s["n_past"], before)
            # and it goes on from there
            status, r = srv.post("/v1/completions", dict(
                prompt=[100, 200], max_tokens=0, session="c"))
            self.assertEqual(status, 200, r)
            self.assertEqual(r["usage"]["prompt_tokens"], 2)
            self.assertEqual(sessions(srv)["c"]["n_past"], before + 2)
        finally:
            self.assertEqual(srv.stop(), 0)

    def test_a_queued_session_is_listed_busy(self):
        """A session whose request waits for a slot is in GET /sessions,
        busy, before its memory is made."""
        srv = Server("--parallel", "1")
        try:
            c = http.client.HTTPConnection("127.0.0.1", srv.port,
                                           timeout=TIMEOUT)
            c.request("POST", "/v1/completions", json.dumps(dict(
                prompt="We", max_tokens=60000, ignore_eos=True,
                stream=True)))
            r = c.getresponse()
            r.readline()            # it runs: the one slot is taken
            q = http.client.HTTPConnection("127.0.0.1", srv.port,
                                           timeout=TIMEOUT)
            q.request("POST", "/v1/completions", json.dumps(dict(
                prompt="x", max_tokens=1, session="queued")))
            for _ in range(200):
                s = sessions(srv).get("queued")
                if s:
                    break
                time.sleep(0.02)
            self.assertEqual(s and (s["busy"], s["in_memory"]),
                             (True, False), s)
            c.close()
            self.assertEqual(q.getresponse().status, 200)
            q.close()
            self.assertEqual(sessions(srv)["queued"]["busy"], False)
        finally:
            self.assertEqual(srv.stop(), 0)

    def test_a_stop_counts_what_was_read(self):
        """SIGTERM with --grace 0 while a long prompt is read: the
        answer's prompt_tokens is what was read, fewer than were sent."""
        srv = Server("--grace", "0")
        ids = [(i * 37) % 7000 + 100 for i in range(60000)]
        c = http.client.HTTPConnection("127.0.0.1", srv.port,
                                       timeout=TIMEOUT)
        try:
            c.request("POST", "/v1/completions", json.dumps(dict(
                prompt=ids, max_tokens=0, session="t")))
            for _ in range(200):
                if sessions(srv).get("t", {}).get("busy"):
                    break
                time.sleep(0.02)
            time.sleep(0.5)
            srv.proc.send_signal(15)
            r = c.getresponse()
            body = json.loads(r.read())
        finally:
            c.close()
            # one signal only: the stop is under way
            self.assertEqual(srv.proc.wait(timeout=60), 0)
            srv.stop()
        self.assertEqual(r.status, 200, body)
        self.assertLess(body["usage"]["prompt_tokens"], 60000)


class TestRepeatWindow(unittest.TestCase):

    def test_reading_requests_keep_the_window(self):
        """Three prompt-only requests (each longer than the window) then
        20 greedy tokens give what one request of the whole text and
        txlgen -p give, with the model's penalty (1.2 over 64 ids)."""
        with open(TEXT) as f:
            lines = f.read().splitlines(keepends=True)
        # cut mid-sentence: what comes next repeats words of the window
        text = "".join(lines[:12]) + " ".join(lines[12].split()[:5])
        third = len(text) // 3
        cut = [text.rindex(" ", 0, third), text.rindex(" ", 0, 2 * third)]
        pieces = [text[:cut[0]], text[cut[0]:cut[1]], text[cut[1]:]]
        got = {}
        srv = Server()
        try:
            for p in pieces:
                _, tok = srv.post("/tokenize", {"prompt": p})
                self.assertGreater(len(tok["tokens"]), 64)
            for rp in (1.2, 1):
                for k, p in enumerate(pieces):
                    status, r = srv.post("/v1/completions", dict(
                        prompt=p, max_tokens=20 if k == 2 else 0,
                        temperature=0, repeat_penalty=rp,
                        session=f"w{rp}".replace(".", "")))
                    self.assertEqual(status, 200, r)
                split = r["choices"][0]["text"]
                status, r = srv.post("/v1/completions", dict(
                    prompt=text, max_tokens=20, temperature=0,
                    repeat_penalty=rp))
                self.assertEqual(status, 200, r)
                got[rp] = split, r["choices"][0]["text"]
        finally:
            self.assertEqual(srv.stop(), 0)
        # the penalty matters to this text
        self.assertNotEqual(got[1.2][1], got[1][1])
        want = txlgen("-p", text, "-n", "20", "--temp", "0")
        self.assertEqual(got[1.2][1], want.rstrip("\n"))
        self.assertEqual(got[1.2][0], got[1.2][1])
        self.assertEqual(got[1][0], got[1][1])


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


class TestMemory(unittest.TestCase):

    def test_sessions_give_their_memory_back(self):
        """200 sessions made (20 at a time, side by side) and deleted:
        the server's RSS after them is within 100 MB of what it was
        after the first 20."""
        srv = Server()
        try:
            def one(i):
                status, r = srv.post("/v1/completions", dict(
                    prompt=[100 + i % 50, 200, 300], max_tokens=2,
                    session=f"m{i}"))
                self.assertEqual(status, 200, r)

            def batch(k):
                ts = [threading.Thread(target=one, args=(k * 20 + i,))
                      for i in range(20)]
                for t in ts:
                    t.start()
                for t in ts:
                    t.join()
                for i in range(20):
                    self.assertEqual(srv.request(
                        "DELETE", f"/sessions/m{k * 20 + i}")[0], 200)
            batch(0)
            base = rss_kib(srv.proc.pid)
            for k in range(1, 10):
                batch(k)
            after = rss_kib(srv.proc.pid)
            self.assertEqual(sessions(srv), {})
            self.assertLess(after - base, 100 * 1024, (base, after))
        finally:
            self.assertEqual(srv.stop(), 0)

    def test_too_many_sessions_for_the_machine(self):
        """--max-sessions 1000000 at --mem-len 3800: capped to what the
        machine's memory holds, said on stderr."""
        srv = Server("--max-sessions", "1000000", "--mem-len", "3800")
        try:
            status, r = srv.post("/v1/completions", dict(
                prompt=[100], max_tokens=0, session="x"))
            self.assertEqual(status, 200, r)
        finally:
            self.assertEqual(srv.stop(), 0)
        log = "".join(srv.log)
        m = re.search(r"--max-sessions 1000000: .*capped to (\d+)", log)
        self.assertTrue(m, log)
        each = json.loads(txlgen("--info", "--json", "--mem-len", "3800"))[
            "session"]["bytes"]
        with open("/proc/meminfo") as f:
            avail = [int(x.split()[1]) * 1024 for x in f
                     if x.startswith("MemAvailable:")][0]
        # what the machine had then, within what others took meanwhile
        self.assertLessEqual((int(m.group(1)) + 4) * each, avail * 1.5)
        self.assertLess(int(m.group(1)), 1000000)


if __name__ == "__main__":
    unittest.main()
