#!/usr/bin/python3
"""What each storage type costs a model: its weights re-stored in every
type (models/txlfile.py), and its memory in every --kv-type, each scored
against the model in F32 with txlgen --score --kl-ref, side by side in
one pass: file size, bits per weight, bits per byte, KL(F32 || type)
mean and 99th percentile, the share of tokens whose top token is F32's,
and generation tokens/s (txlgen --stats, the best of --runs runs, taken
round-robin).
Prints a Markdown table (bench/README.md, "kl_table.py"), after a
caption naming the model (its sha256), the text, the CPU and the load
average around the speed runs.

    bench/kl_table.py --text models/data/test.txt [--bytes N]
        [--model models/sotu.bin] [--threads 2] [--calibrate TEXT]
        [--weights F32,Q4_0,Q4_K] [--memory F16,Q8_0]
        [--record FILE] [--no-speed]
    bench/kl_table.py --speed-only --record FILE [--runs N]

--bytes N scores the text's first N bytes (cut at the line before, or in
a text of one line at a space).  --calibrate TEXT re-stores Q4_K with
txlfile.py --calibrate TEXT.  --weights and --memory choose the rows
(every type by default; a memory type of blocks longer than d_head is
left out).  --record FILE writes every figure and what they were taken
with (JSON); --no-speed leaves the speed column empty; --speed-only
retakes only the speed column of a record (the model must be the one it
names, by sha256), updates the record and prints the whole table: the
KL figures do not depend on the machine's load, the speeds do.
"""

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time

from machine import cpu_name  # bench/, beside this script

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


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()



def sci(v):
    return "0" if v == 0 else f"{v:.1e}"


def load_average():
    return round(os.getloadavg()[0], 2)


def restore(args, model, tmp, types, calibrate):
    """{type: the model re-stored in it}, in tmp."""
    files = {}
    for t in sorted(set(["F32"] + list(types))):
        files[t] = os.path.join(tmp, f"{t}.bin")
        cal = ["--calibrate", calibrate] if t == "Q4_K" and calibrate \
            else []
        subprocess.run([sys.executable, os.path.join(
            ROOT, "models", "txlfile.py"), "--dtype", t, *cal, model,
            files[t]], check=True, stdout=subprocess.DEVNULL)
    return files


def measure_speed(args, rec, files):
    """Each row's generation tokens/s, round-robin, the best of --runs
    (noise on a shared machine only ever slows a run down, and comes and
    goes); the load average before and after."""
    rows = rec["rows"]
    before = load_average()
    speed = [0.0] * len(rows)
    for _ in range(args.runs):
        for i, r in enumerate(rows):
            speed[i] = max(speed[i], gen_speed(args, files[r["weights"]],
                                               r["memory"]))
    for r, v in zip(rows, speed):
        r["tok_s"] = v
    rec["speed"] = {"load_before": before, "load_after": load_average(),
                    "cpu": cpu_name(cpus=True), "threads": args.threads,
                    "runs": args.runs, "tokens": args.n,
                    "date": time.strftime("%Y-%m-%d %H:%M")}


def print_table(rec):
    t = rec["text"]
    print(f"model: {rec['model']['name']}, sha256 "
          f"{rec['model']['sha256']}; text: {t['name']}"
          f"{', first' if t['cut'] else ''} {t['bytes']:,} bytes "
          f"(sha256 {t['sha256'][:16]}...), {rec['predictions']:,} "
          f"predictions; {rec['threads']} threads")
    sp = rec.get("speed")
    if sp:
        print(f"generation tok/s: {sp['date']}, {sp['cpu']}, "
              f"{sp['threads']} threads, best of {sp['runs']} runs of "
              f"{sp['tokens']} tokens; load average {sp['load_before']} "
              f"before, {sp['load_after']} after")
    print()
    print("| weights | memory | file MB | bits/weight | bits per byte "
          "| KL mean | KL p99 | same top | generation tok/s |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rec["rows"]:
        w = r["weights"] + (" (calibrated)" if r.get("calibrated") else "")
        v = f"{r['tok_s']:.0f}" if r.get("tok_s") else ""
        print(f"| {w} | {r['memory']} | {r['file_mb']:.1f} "
              f"| {BITS[r['weights']]:g} | {r['bpb']:.4f} "
              f"| {sci(r['kl_mean'])} | {sci(r['kl_p99'])} "
              f"| {100 * r['same_top']:.2f}% | {v} |")


def speed_only(args):
    with open(args.record) as f:
        rec = json.load(f)
    if not os.path.isfile(args.model):
        sys.exit(f"kl_table.py: {args.model}: no such file: give the "
                 f"record's model ({rec['model']['name']}, sha256 "
                 f"{rec['model']['sha256']}) with --model")
    if sha256(args.model) != rec["model"]["sha256"]:
        sys.exit(f"kl_table.py: {args.model}: sha256 is not the record's "
                 f"{rec['model']['sha256']} ({args.record}): give the "
                 "record's model with --model")
    with tempfile.TemporaryDirectory(prefix="kl-table-") as tmp:
        # not calibrated: a calibrated Q4_K file computes the same way,
        # on as many bytes, and calibrating takes minutes
        files = restore(args, args.model, tmp,
                        [r["weights"] for r in rec["rows"]], None)
        measure_speed(args, rec, files)
    with open(args.record, "w") as f:
        json.dump(rec, f, indent=1)
        f.write("\n")
    print_table(rec)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--text")
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
    ap.add_argument("--record", metavar="FILE",
                    help="write the figures (JSON); --speed-only reads it")
    ap.add_argument("--no-speed", action="store_true",
                    help="leave the speed column empty")
    ap.add_argument("--speed-only", action="store_true",
                    help="retake the speed column of --record FILE")
    args = ap.parse_args()
    if args.speed_only:
        if not args.record or not os.path.exists(args.record):
            ap.error("--speed-only needs --record FILE, a record written "
                     "before")
        if args.model == ap.get_default("model"):
            with open(args.record) as f:
                name = json.load(f)["model"]["name"]
            args.model = os.path.join(ROOT, "models", name)
        return speed_only(args)
    if not args.text:
        ap.error("--text is required (but with --speed-only)")
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
        files = restore(args, args.model, tmp, weights, args.calibrate)
        rec = {"model": {"name": os.path.basename(args.model),
                         "sha256": sha256(args.model)},
               "text": {"name": os.path.basename(args.text),
                        "bytes": os.path.getsize(text),
                        "sha256": sha256(text), "cut": bool(args.bytes)},
               "threads": args.threads, "calibrate": args.calibrate,
               "rows": []}
        for w, kv in [(t, "F32") for t in weights] + \
                [("F32", k) for k in memory]:
            out, _ = txlgen(args, "-m", files[w], "--kv-type", kv,
                            "--score", text, "--kl-ref", files["F32"],
                            "--json")
            s = json.loads(out.splitlines()[-1])
            rec["predictions"] = s["predicted"]
            rec["rows"].append({
                "weights": w, "memory": kv,
                "calibrated": w == "Q4_K" and bool(args.calibrate),
                "file_mb": os.path.getsize(files[w]) / 1e6,
                **{k: s[k] for k in ("bpb", "kl_mean", "kl_p99",
                                     "same_top")}})
        if not args.no_speed:
            measure_speed(args, rec, files)
    if args.record:
        with open(args.record, "w") as f:
            json.dump(rec, f, indent=1)
            f.write("\n")
    print_table(rec)


if __name__ == "__main__":
    sys.exit(main())
