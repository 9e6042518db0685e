#!/usr/bin/python3
"""A long prompt: the time to its first token, reading only its receptive
field against reading every token (--read-all).

  env -u OPENBLAS_CORETYPE bench/bench_prompt.py [--text FILE] [--mb 2]
      [--model MODEL] [--whole] [--reps 3] [--work DIR]

The prompt is --mb megabytes of FILE, repeated as needed (default: the
source tree's own documentation, README.md, CONTRIBUTING.md, the man
pages and bench/README.md, which the default model tokenizes at about 2
bytes per token, its markup in short pieces; prose such as the State of
the Union addresses takes about 3).  Measured, each the median of --reps
runs, on the default model unless --model:

  tokenize  `txlgen --tokenize` of the prompt to /dev/null: what
            tokenizing the whole prompt costs (a run always does);
  field     `txlgen -f PROMPT -n 1 --stats`: the wall time of the whole
            run (loading the model, tokenizing, the field's segments, one
            token) and the prompt's time as --stats gives it, with the
            tokens computed;
  whole     with --whole, once: the same with --read-all, every token
            computed (minutes for 2 MB), and the state files of the two
            runs (--state-out) and their 30 greedy tokens compared byte
            for byte.

The CPU, the load average before and after, and the kernels libtxl chose
are printed: run it on an idle machine.
"""

import argparse
import filecmp
import glob
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

from machine import cpu_name  # bench/, beside this script

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)



def default_text():
    names = ["README.md", "CONTRIBUTING.md", "bench/README.md"] + \
        sorted(glob.glob(os.path.join(ROOT, "man", "*.[15]")))
    out = []
    for n in names:
        with open(os.path.join(ROOT, n), "rb") as f:
            out.append(f.read())
    return b"\n".join(out)


def make_prompt(src, mb, path):
    n = int(mb * 1e6)
    text = src * (n // len(src) + 1)
    # cut at a line's end, whole UTF-8 characters
    cut = text.rfind(b"\n", 0, n) + 1 or n
    with open(path, "wb") as f:
        f.write(text[:cut])
    return cut


def timed(argv, **kw):
    t0 = time.monotonic()
    r = subprocess.run(argv, capture_output=True, **kw)
    wall = time.monotonic() - t0
    if r.returncode != 0:
        sys.exit(f"bench_prompt: {' '.join(argv)}: "
                 f"{r.stderr.decode(errors='replace')}")
    return wall, r


def prompt_stats(err):
    m = re.search(r"prompt: (\d+) tokens in ([\d.]+) s \(([\d.]+) tokens/s"
                  r"(?:; the last (\d+) computed)?", err)
    if not m:
        sys.exit(f"bench_prompt: no prompt statistics in {err}")
    n = int(m.group(1))
    return n, float(m.group(2)), int(m.group(4) or n)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--txlgen", default=os.path.join(ROOT, "build", "cmd",
                                                     "txlgen"))
    ap.add_argument("--model", help="default: txlgen's default model")
    ap.add_argument("--text", help="the prompt's text, repeated to --mb")
    ap.add_argument("--mb", type=float, default=2.0)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--whole", action="store_true",
                    help="also read every token once (--read-all) and "
                    "compare the states")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--work", help="directory for the prompt and states "
                    "(default: a temporary one)")
    a = ap.parse_args()

    work = a.work or tempfile.mkdtemp(prefix="txl-bench-prompt-")
    os.makedirs(work, exist_ok=True)
    src = open(a.text, "rb").read() if a.text else default_text()
    prompt = os.path.join(work, "prompt.txt")
    nbytes = make_prompt(src, a.mb, prompt)
    base = [a.txlgen] + (["-m", a.model] if a.model else []) + \
        ["-t", str(a.threads)]

    version = subprocess.run([a.txlgen, "--version"], capture_output=True,
                             text=True).stdout.strip().replace("\n", "; ")
    print(f"CPU: {cpu_name(cpus=True)}")
    print(f"txlgen: {version}")
    print(f"load average before: {os.getloadavg()}")
    print(f"prompt: {nbytes:,} bytes")

    tok = statistics.median(timed(base + ["--tokenize", prompt])[0]
                            for _ in range(a.reps))
    walls, prompts = [], []
    for _ in range(a.reps):
        wall, r = timed(base + ["-f", prompt, "-n", "1", "--stats"])
        n, t_prompt, computed = prompt_stats(r.stderr.decode())
        walls.append(wall)
        prompts.append(t_prompt)
    print(f"tokens: {n:,}, of them computed: {computed:,}")
    print(f"tokenize the whole prompt: {tok:.2f} s")
    print(f"field:  run {statistics.median(walls):.2f} s, prompt "
          f"{statistics.median(prompts):.2f} s (median of {a.reps})")

    if a.whole:
        states = []
        for extra in ([], ["--read-all"]):
            st = os.path.join(work, f"state{len(states)}")
            wall, r = timed(base + ["-f", prompt, "-n", "30", "--temp", "0",
                                    "--stats", "--state-out", st] + extra)
            states.append((st, r.stdout))
            if extra:
                _, t_prompt, _ = prompt_stats(r.stderr.decode())
                print(f"whole:  run {wall:.2f} s, prompt {t_prompt:.2f} s "
                      f"({n / t_prompt:.0f} tokens/s)")
        same = filecmp.cmp(states[0][0], states[1][0], shallow=False)
        print(f"state files identical: {same}; 30 greedy tokens "
              f"identical: {states[0][1] == states[1][1]}")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
