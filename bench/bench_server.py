#!/usr/bin/python3
"""txlgen-server under load, side by side with txlgen, in one run.

  env -u OPENBLAS_CORETYPE bench/bench_server.py \
      [--work DIR] [--model FILE] [--clients 8] [--gen-tokens 128] [--reps 3]

On random F32 weights of the 14.6M shape of bench.py and bench_streams.py
(6 layers, d_model 384, 8,000 tokens), or the weights of --model:

  one client   generation tokens/s of one streamed request of
               --gen-tokens tokens (--ignore-eos), against txlgen's own
               rate for the same text (--stats), alternated;
  N clients    the total tokens/s of --clients such requests at once,
               with --parallel N, against one client's: x; beside it
               txlgen --n-samples N against txlgen alone, the library's
               own batch, the ratio the server's is to hold;
  latency      the time per token of each client under that load
               (each stream event carries its tokens' logprobs, so the
               tokens of an event are known): median and 99th percentile;
  session      a text of --session-tokens tokens (3,000) read into a
               session, then a request that continues it: its time to
               the first new token, against sending the whole text again
               without a session.

Every figure is the median of --reps runs.  The CPU, the load average
before and after and the kernels are printed: run it on an idle machine.
"""

import argparse
import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import types

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

import bench                # bench/bench.py, beside this script  # noqa: E402
from bench_streams import txlgen_stats  # noqa: E402
from machine import cpu_name  # noqa: E402


class Server:
    def __init__(self, exe, model, *args):
        self.p = subprocess.Popen([exe, "-m", model, "--port", "0", *args],
                                  stderr=subprocess.PIPE, text=True)
        # "loading MODEL", then "listening on URL"
        for line in self.p.stderr:
            m = re.search(r"listening on http://[^ ]*:(\d+)/", line)
            if m:
                break
        else:
            sys.exit(f"bench_server.py: {exe} did not start")
        self.port = int(m.group(1))
        threading.Thread(target=lambda: self.p.stderr.read(),
                         daemon=True).start()
        while True:
            try:
                if self.call("GET", "/health")[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.05)

    def call(self, method, path, body=None):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        c.request(method, path, body=json.dumps(body) if body else None)
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, data

    def stream(self, body):
        """[(time, tokens)] of each event of a streamed completion."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        c.request("POST", "/v1/completions",
                  json.dumps(dict(body, stream=True, logprobs=0)))
        r = c.getresponse()
        out = []
        while True:
            line = r.readline()
            if not line:
                break
            if line.startswith(b"data: {"):
                ev = json.loads(line[6:])
                lp = ev["choices"][0]["logprobs"] if ev["choices"] else None
                out.append((time.perf_counter(),
                            len(lp["tokens"]) if lp else 0))
        c.close()
        return out

    def stop(self):
        self.p.terminate()
        self.p.wait()


def gen_body(a):
    return dict(prompt="The state of the Union is", max_tokens=a.gen_tokens,
                ignore_eos=True, seed=1)


def one_client(srv, a):
    t0 = time.perf_counter()
    ev = srv.stream(gen_body(a))
    first = next(t for t, n in ev if n)
    n = sum(k for _, k in ev)
    # the rate of generation: from the first token on, as txlgen's
    # --stats counts it after the prompt
    return (n - 1) / (ev[-1][0] - first), first - t0


def many_clients(srv, a):
    res = [None] * a.clients

    def run(i):
        res[i] = srv.stream(gen_body(a))

    ts = [threading.Thread(target=run, args=(i,)) for i in range(a.clients)]
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    t1 = max(ev[-1][0] for ev in res)
    total = sum(k for ev in res for _, k in ev)
    per_token = []
    for ev in res:
        prev = None
        for t, k in ev:
            if k and prev is not None:
                per_token += [(t - prev) / k] * k
            if k:
                prev = t
    return total / (t1 - t0), per_token


def session_ttft(srv, text, a):
    """Time to the first new token: a session that holds the text, and
    the whole text sent again without one."""
    name = f"bench{time.monotonic_ns()}"
    st, _ = srv.call("POST", "/v1/completions",
                     dict(prompt=text, max_tokens=0, session=name))
    assert st == 200
    body = dict(prompt=" And", max_tokens=1, session=name)
    t0 = time.perf_counter()
    st, _ = srv.call("POST", "/v1/completions", body)
    with_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    st2, _ = srv.call("POST", "/v1/completions",
                      dict(prompt=text + " And", max_tokens=1))
    without = time.perf_counter() - t0
    assert st == 200 and st2 == 200
    srv.call("DELETE", f"/sessions/{name}")
    return with_s, without


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--work", help="keep the model here between runs")
    ap.add_argument("--model", help="these weights instead of random "
                    "ones of the 14.6M shape")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--gen-tokens", type=int, default=128)
    ap.add_argument("--session-tokens", type=int, default=3000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args()
    txlgen = os.path.join(a.build, "cmd", "txlgen")
    server = os.path.join(a.build, "server", "txlgen-server")
    work = a.work or tempfile.mkdtemp(prefix="txl-bench-server-")
    os.makedirs(work, exist_ok=True)
    shape = types.SimpleNamespace(n_token=8000, layers=6, heads=6,
                                  d_model=384, d_inner=1536, seg_len=128,
                                  mem_len=256)
    if a.model:
        model, label = a.model, os.path.basename(a.model)
    else:
        _, _, paths = bench.build_models(work, shape)
        model, label = paths["F32"], "14.6M shape, F32 weights"
    th = ["-t", str(a.threads)] if a.threads else []
    print(f"CPU: {cpu_name(cpus=True)}; OPENBLAS_CORETYPE="
          f"{os.environ.get('OPENBLAS_CORETYPE', '(unset)')}")
    print("load average before: %.2f %.2f %.2f" % os.getloadavg())

    srv = Server(server, model, "--parallel", str(a.clients), *th)
    cli, cli_n, one, many, lat = [], [], [], [], []

    def cli_rate(*more):
        return txlgen_stats(
            [txlgen, "-m", model, "-p", "The state of the Union is",
             "-n", str(a.gen_tokens), "--ignore-eos", "--seed", "1",
             *more] + th, r"generated: \d+ tokens? in [\d.]+ s "
            r"\(([\d.]+) tokens/s\)")[0]
    try:
        for _ in range(a.reps):
            cli.append(cli_rate())
            cli_n.append(cli_rate("--n-samples", str(a.clients)))
            one.append(one_client(srv, a)[0])
            tot, per = many_clients(srv, a)
            many.append(tot)
            lat += per
        # the session's text: tests/data/text.txt, as many tokens as asked
        text = open(os.path.join(ROOT, "tests", "data", "text.txt")).read()
        st, tok = srv.call("POST", "/tokenize", {"prompt": text})
        ids = json.loads(tok)["tokens"]
        while len(ids) < a.session_tokens:
            ids += ids
        st, back = srv.call("POST", "/detokenize",
                            {"tokens": ids[:a.session_tokens]})
        text = json.loads(back)["prompt"]
        ttft = [session_ttft(srv, text, a) for _ in range(a.reps)]
    finally:
        srv.stop()
    m1, mm, mc, mn = (statistics.median(one), statistics.median(many),
                      statistics.median(cli), statistics.median(cli_n))
    lat.sort()
    ws = statistics.median(t for t, _ in ttft)
    wo = statistics.median(t for _, t in ttft)
    print(f"\n{label}, -n {a.gen_tokens}, medians of {a.reps} runs")
    print(f"  txlgen, one run           {mc:9.1f} tokens/s")
    print(f"  txlgen --n-samples {a.clients:<6} {mn:9.1f} tokens/s  "
          f"(x{mn / mc:.2f} one run)")
    print(f"  server, one client        {m1:9.1f} tokens/s  "
          f"({m1 / mc:.2f} of txlgen's)")
    print(f"  server, {a.clients} clients "
          f"(--parallel {a.clients}) {mm:9.1f} tokens/s  "
          f"(x{mm / m1:.2f} one client)")
    print(f"  time per token under that load: median "
          f"{1e3 * lat[len(lat) // 2]:.2f} ms, 99th percentile "
          f"{1e3 * lat[min(len(lat) - 1, int(len(lat) * 0.99))]:.2f} ms")
    print(f"\nsession of {a.session_tokens} tokens, then one more token:")
    print(f"  continued session   {1e3 * ws:8.1f} ms")
    print(f"  whole text again    {1e3 * wo:8.1f} ms  (x{wo / ws:.1f})")
    print("load average after: %.2f %.2f %.2f" % os.getloadavg())


if __name__ == "__main__":
    sys.exit(main())
