#!/usr/bin/python3
"""What each storage type costs a model: its weights re-stored in every
type (models/txlfile.py), and its memory in every --kv-type, each scored
against the model in F32 with txlgen --score --kl-ref, side by side in
one pass: file size, bits per weight, bits per byte, KL(F32 || type)
mean and 99th percentile, the share of tokens whose top token is F32's,
and generation tokens/s (txlgen --stats, the best of --runs runs, taken
round-robin).
Prints a Markdown table (bench/README.md, "Storage types against F32").

    bench/kl_table.py --text models/data/test.txt [--bytes N]
        [--model models/sotu.bin] [--threads 2] [--calibrate TEXT]
        [--weights F32,Q4_0,Q4_K] [--memory F16,Q8_0]

--bytes N scores the text's first N bytes (cut at the line before, or in
a text of one line at a space).  --calibrate TEXT re-stores Q4_K with
txlfile.py --calibrate TEXT.  --weights and --memory choose the rows
(every type by default; a memory type of blocks longer than d_head is
left out).
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TYPES = ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_K")
KV_TYPES = ("F16", "BF16", "Q8_0", "Q4_0")  # d_head 64: blocks of 32
# bits per value of each type: 32 values in a block of 34 bytes (Q8_0)
# or 18 bytes (Q4_0), one 16-bit scale each; 128 in 72 bytes (Q4_K)
BITS = {"F32": 32, "F16": 16, "BF16": 16, "Q8_0": 8.5, "Q4_0": 4.5,
        "Q4_K": 4.5}


def txlgen(args, *argv):
    p = subprocess.run([args.txlgen, "-t", str(args.threads), *argv],
                       capture_output=True, text=True, check=True)
    return p.stdout, p.stderr


def gen_speed(args, model, kv):
    _, err = txlgen(args, "-m", model, "--kv-type", kv, "-p",
                    "My fellow Americans,", "-n", str(args.n),
                    "--ignore-eos", "--seed", "1", "--stats")
    m = re.search(r"generated: \d+ tokens in [\d.]+ s \(([\d.]+) "
                  r"tokens/s\)", err)
    return float(m.group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--text", required=True)
    ap.add_argument("--bytes", type=int)
    ap.add_argument("--model", default=os.path.join(ROOT, "models",
                                                    "sotu.bin"))
    ap.add_argument("--txlgen", default=os.path.join(ROOT, "build", "cmd",
                                                     "txlgen"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("-n", type=int, default=256,
                    help="tokens generated per run")
    ap.add_argument("--calibrate", metavar="TEXT")
    ap.add_argument("--weights", default=",".join(TYPES))
    ap.add_argument("--memory", default=",".join(KV_TYPES))
    args = ap.parse_args()
    weights = [t for t in args.weights.split(",") if t]
    memory = [t for t in args.memory.split(",") if t]

    with tempfile.TemporaryDirectory(prefix="kl-table-") as tmp:
        text = args.text
        if args.bytes:
            with open(args.text, "rb") as f:
                data = f.read(args.bytes)
            cut = data.rfind(b"\n")
            data = data[:(cut if cut >= 0 else data.rfind(b" ")) + 1]
            text = os.path.join(tmp, "text.txt")
            with open(text, "wb") as f:
                f.write(data)
        size = os.path.getsize(text)
        files = {}
        for t in sorted(set(["F32"] + weights)):
            files[t] = os.path.join(tmp, f"{t}.bin")
            cal = ["--calibrate", args.calibrate] \
                if t == "Q4_K" and args.calibrate else []
            subprocess.run([sys.executable, os.path.join(
                ROOT, "models", "txlfile.py"), "--dtype", t, *cal,
                args.model, files[t]], check=True, stdout=subprocess.DEVNULL)
        print(f"text: {os.path.basename(args.text)}, {size:,} bytes; "
              f"{args.threads} threads", file=sys.stderr)
        print("| weights | memory | file MB | bits/weight | bits per byte "
              "| KL mean | KL p99 | same top | generation tok/s |")
        print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        rows = [(t, "F32") for t in weights] + \
            [("F32", k) for k in memory]
        got = []
        for w, kv in rows:
            out, _ = txlgen(args, "-m", files[w], "--kv-type", kv,
                            "--score", text, "--kl-ref", files["F32"],
                            "--json")
            got.append(json.loads(out.splitlines()[-1]))
        # round-robin, the best of each: noise on a shared machine only
        # ever slows a run down, and comes and goes
        speed = [0.0] * len(rows)
        for _ in range(args.runs):
            for i, (w, kv) in enumerate(rows):
                speed[i] = max(speed[i], gen_speed(args, files[w], kv))
        for (w, kv), s, v in zip(rows, got, speed):
            print(f"| {w} | {kv} | {os.path.getsize(files[w]) / 1e6:.1f} "
                  f"| {BITS[w]:g} | {s['bpb']:.4f} | {s['kl_mean']:.1e} "
                  f"| {s['kl_p99']:.1e} | {100 * s['same_top']:.2f}% "
                  f"| {v:.0f} |")
        print(f"({s['predicted']:,} predictions)", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
