#!/usr/bin/python3
"""Choose the default model's shape by measurement: train several shapes on
the train split for the same number of epochs (the same token budget) and
compare their bits per byte on the validation addresses.

  /usr/bin/python3 models/sweep.py --out runs/sweep --tokenizer spm.model \\
      [--device cuda] [--epochs 8] [--batch 64] [--jobs 4] [--only NAME ...]
      [--max-minutes M]

Each shape is one models/train.py run (--out OUT/NAME), run --jobs at a
time; every run evaluates the whole validation file every --eval-every
steps.  At the end (or after --max-minutes, when the runs still going are
stopped and reported as they stand) it writes OUT/sweep.json (per run:
shape, parameters, the validation curve, the best and final bits per byte,
minutes) and prints a Markdown table, best first, with every run's figure
at the last evaluation step that all runs reached (the fair comparison
when some were stopped early).  The shapes are SHAPES below; the
training recipe (data, schedule, typographic augmentation) is COMMON, the
one the default model is trained with (models/retrain.sh).
"""

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# name: train.py options of the shape (heads of 64 dimensions)
SHAPES = {
    "L6-d256-p0.1": "--layers 6 --d-model 256 --heads 4 --d-inner 1024 "
                    "--dropout 0.1 --mem-len 128",
    "L8-d384-p0.2": "--layers 8 --d-model 384 --heads 6 --d-inner 1536 "
                    "--dropout 0.2 --mem-len 128",
    "L8-d384-p0.3": "--layers 8 --d-model 384 --heads 6 --d-inner 1536 "
                    "--dropout 0.3 --mem-len 128",
    "L8-d384-p0.3-m256": "--layers 8 --d-model 384 --heads 6 "
                         "--d-inner 1536 --dropout 0.3 --mem-len 256",
    "L12-d384-p0.3": "--layers 12 --d-model 384 --heads 6 --d-inner 1536 "
                     "--dropout 0.3 --mem-len 128",
    "L16-d256-p0.2": "--layers 16 --d-model 256 --heads 4 --d-inner 1024 "
                     "--dropout 0.2 --mem-len 128",
}

COMMON = ("--seg-len 128 --lr 1e-3 --warmup 200 --dropatt 0.0 "
          "--weight-decay 0.01 --clip 0.25 --typographic 0.5 --seed 1 "
          "--eval-tokens 0 --save-every 100000")


def run_dir(out, name):
    return os.path.join(out, name)


def start(a, name):
    d = run_dir(a.out, name)
    os.makedirs(d, exist_ok=True)
    cmd = [sys.executable, os.path.join(HERE, "train.py"),
           "--train", a.train, "--valid", a.valid, "--tokenizer", a.tokenizer,
           "--out", d, "--device", a.device, "--epochs", str(a.epochs),
           "--eval-every", str(a.eval_every), "--threads", str(a.threads),
           "--batch", str(a.batch)]
    cmd += (SHAPES[name] + " " + COMMON).split()
    log = open(os.path.join(d, "stderr.log"), "w")
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)


def collect(a, name, minutes):
    d = run_dir(a.out, name)
    curve, params = [], None
    try:
        with open(os.path.join(d, "train_log.jsonl")) as f:
            for line in f:
                r = json.loads(line)
                if "valid_bpb" in r:
                    curve.append([r["step"], round(r["valid_bpb"], 4)])
    except OSError:
        pass
    try:
        with open(os.path.join(d, "stderr.log")) as f:
            for line in f:
                if line.startswith("model: "):
                    params = float(line.split()[1].rstrip("M")) * 1e6
    except OSError:
        pass
    best = min((b for _, b in curve), default=None)
    return {"name": name, "options": SHAPES[name], "params": params,
            "curve": curve, "best_bpb": best,
            "final_bpb": curve[-1][1] if curve else None,
            "minutes": round(minutes, 1)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--train", default=os.path.join(HERE, "data/train.txt"))
    ap.add_argument("--valid", default=os.path.join(HERE, "data/valid.txt"))
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--epochs", type=float, default=8)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--max-minutes", type=float, default=0,
                    help="stop the runs still going after this long")
    ap.add_argument("--eval-every", type=int, default=500)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--only", nargs="*", choices=sorted(SHAPES))
    a = ap.parse_args()

    names = a.only or list(SHAPES)
    pending, running, results = list(names), {}, []
    t_start = time.time()
    while pending or running:
        if a.max_minutes and time.time() - t_start > a.max_minutes * 60:
            pending = []
            for p, _ in running.values():
                p.terminate()
        while pending and len(running) < a.jobs:
            name = pending.pop(0)
            running[name] = (start(a, name), time.time())
        time.sleep(2)
        for name, (p, t0) in list(running.items()):
            if p.poll() is not None:
                del running[name]
                r = collect(a, name, (time.time() - t0) / 60)
                r["exit"] = p.returncode
                r["stopped_early"] = p.returncode < 0
                results.append(r)
                print(f"sweep: {name}: exit {p.returncode}, best "
                      f"{r['best_bpb']} in {r['minutes']} min", flush=True)
    results.sort(key=lambda r: (r["best_bpb"] is None, r["best_bpb"]))
    common = min((r["curve"][-1][0] for r in results if r["curve"]),
                  default=0)
    for r in results:
        r["bpb_at_common"] = min((b for s, b in r["curve"] if s <= common),
                                 default=None)
    with open(os.path.join(a.out, "sweep.json"), "w") as f:
        json.dump({"epochs": a.epochs, "batch": a.batch, "common": COMMON,
                   "device": a.device, "common_step": common,
                   "runs": results}, f, indent=1)
    print(f"| shape | parameters | valid bpb at step {common} | best "
          "| last step | minutes |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for r in results:
        p = f"{r['params'] / 1e6:.1f}M" if r["params"] else "?"
        last = r["curve"][-1][0] if r["curve"] else 0
        print(f"| {r['name']} | {p} | {r['bpb_at_common']} | "
              f"{r['best_bpb']} | {last} | {r['minutes']} |")
    return 0 if all(r["exit"] == 0 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
