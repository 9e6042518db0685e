#!/usr/bin/python3
"""Draw bench/README.md's figures from the JSON records beside it.

    /usr/bin/python3 bench/plot.py [--out DIR]

reads bench/gen_memory.json (generation against the positions of memory,
and a cached token against recomputing the window) and bench/streams.json
(tokens/s against --n-samples) and writes bench/gen_memory.svg and
bench/streams.svg.  The SVGs keep their text as text (svg.fonttype
none), carry no date and a fixed id salt, so that a rerun on the same
records writes the same bytes.  Needs matplotlib (Debian:
`apt install python3-matplotlib`).
"""

import argparse
import json
import os

import matplotlib

matplotlib.use("svg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd"]


def load(name):
    with open(os.path.join(HERE, name), encoding="utf-8") as f:
        return json.load(f)


def save(fig, path):
    fig.savefig(path, format="svg", metadata={"Date": None,
                                              "Creator": None})
    plt.close(fig)
    print(path)


def gen_memory(rec, path):
    """ms per token against positions of memory, a panel per run, with
    the recomputed window's cost per token at 3,800 positions."""
    runs = rec["runs"]
    x = rec["positions"]
    fig, axes = plt.subplots(1, len(runs), figsize=(9, 3.8), sharey=True)
    for ax, run in zip(axes, runs):
        for c, (name, tok_s) in zip(COLOURS, run["tok_s"].items()):
            ax.plot(x, [1000 / t for t in tok_s], "o-", color=c, ms=3,
                    lw=1.2, label=f"{name} (XL memory)")
        for i, (w, s) in enumerate(sorted(run["recompute_3800_s"].items())):
            ax.plot([x[-1]], [s * 1000], "x", color="k", ms=7,
                    label="recomputing the window, per token"
                    if i == 0 else None)
        cached = run["cached_3800_ms"]["Q4_0/Q4_0"]
        rec_ms = run["recompute_3800_s"]["Q4_0"] * 1000
        # the ratio as measured (the times above are rounded)
        ratio = run["recompute_over_cached"]
        ax.annotate(f"\u00d7{ratio:,}", (x[-1], rec_ms ** 0.5 *
                    cached ** 0.5), xytext=(-34, 0),
                    textcoords="offset points", va="center")
        ax.annotate("", (x[-1], cached), (x[-1], rec_ms),
                    arrowprops=dict(arrowstyle="<->", color="#888", lw=0.8))
        ax.set_yscale("log")
        ax.set_xticks(x)
        ax.set_xticklabels([f"{v:,}" for v in x])
        ax.set_title(f"{run['name']}, {run['commit']}", fontsize=10)
        ax.set_xlabel("positions of memory")
        ax.grid(True, which="both", color="#e5e5e5", lw=0.6)
    axes[0].set_ylabel("ms per generated token (log)")
    axes[0].legend(fontsize=7.5, loc="upper left", frameon=False)
    fig.suptitle("14.6M shape, weights/memory types: " + rec["cpu"] +
                 f", {rec['threads']} threads", fontsize=10)
    fig.tight_layout()
    save(fig, path)


def streams(rec, path):
    """tokens/s of all samples against --n-samples N, with N times one
    stream for scale."""
    n = rec["streams"]
    fig, ax = plt.subplots(figsize=(6, 3.8))
    for c, (name, ratios) in zip(COLOURS, rec["against_one"].items()):
        one = rec["one_stream_tok_s"][name]
        ax.plot(n, [one * r for r in ratios], "o-", color=c, ms=3, lw=1.2,
                label=name)
        ax.plot(n, [one * k for k in n], ":", color=c, lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(n)
    ax.set_xticklabels([str(k) for k in n])
    ax.set_xlabel("streams (--n-samples N)")
    ax.set_ylabel("tokens/s, every sample counted (log)")
    ax.set_title(f"14.6M shape: {rec['cpu']}, {rec['commit']}\n"
                 "(dotted: N times one stream)", fontsize=9)
    ax.grid(True, which="both", color="#e5e5e5", lw=0.6)
    ax.legend(fontsize=8, frameon=False)
    fig.tight_layout()
    save(fig, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=HERE, help="folder of the SVGs "
                    "(default: bench/)")
    a = ap.parse_args()
    plt.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "txlgen",
                         "font.size": 9})
    gen_memory(load("gen_memory.json"), os.path.join(a.out,
                                                      "gen_memory.svg"))
    streams(load("streams.json"), os.path.join(a.out, "streams.svg"))


if __name__ == "__main__":
    main()
