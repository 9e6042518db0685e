#!/usr/bin/python3
"""Score one long text with txlgen --score --part K/N on Dask.

Each of the N parts is a task that runs `txlgen --score FILE --part K/N
--json` on a Dask worker and hands back its summary line; `txlgen
--score-merge` then joins them into the summary of one `txlgen --score
FILE` run (the same figures, to the rounding of their sums), printed on
standard output.  A part costs its share of the text plus, once, what its
first token can see (txlgen --info: part_context).

  tools/dask_score.py text.txt -m sotu --parts 8
  tools/dask_score.py text.txt -m wt103 --parts 64 \\
      --scheduler tcp://head:8786 --json -- --mem-init zeros

Without --scheduler, a LocalCluster of --workers processes on this
machine (on 127.0.0.1).  With one, every worker must read FILE at the
same path (a shared filesystem) and run txlgen with the model.  The
arguments after `--` go to every part's txlgen.  A part whose txlgen
fails ends the run with its message and exit status 1.
Needs Dask's distributed (Debian: python3-distributed).
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile


def score_part(argv, k, n):
    """Run part k of n: the summary line of its --json output."""
    p = subprocess.run(argv + ["--part", f"{k}/{n}", "--json"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        raise RuntimeError(f"part {k}/{n}: txlgen exit status "
                           f"{p.returncode}: "
                           f"{p.stderr.decode(errors='replace').strip()}")
    lines = p.stdout.rstrip(b"\n").rsplit(b"\n", 1)
    return lines[-1] + b"\n", p.stderr


def main():
    ap = argparse.ArgumentParser(
        usage="%(prog)s FILE -m MODEL --parts N [OPTION]... "
              "[-- TXLGEN_OPTION...]",
        description="txlgen --score of one text, in parts, over a Dask "
                    "cluster",
        epilog="Arguments after -- go to each part's txlgen.")
    ap.add_argument("file", help="the text")
    ap.add_argument("-m", "--model", required=True,
                    help="txlgen's -m: a model file or name")
    ap.add_argument("--parts", type=int, required=True,
                    help="parts of the text, each a task")
    ap.add_argument("--scheduler", help="address of a running cluster's "
                    "scheduler (default: a local cluster)")
    ap.add_argument("--workers", type=int, default=2,
                    help="local cluster: worker processes (default 2)")
    ap.add_argument("--threads", type=int, default=1,
                    help="txlgen's threads per part (default 1)")
    ap.add_argument("--json", action="store_true",
                    help="the summary as txlgen --json writes it")
    ap.add_argument("--txlgen", default=os.environ.get("TXLGEN") or
                    shutil.which("txlgen") or "txlgen",
                    help="the program (default $TXLGEN, else on PATH)")
    ours = sys.argv[1:]
    extra = []
    if "--" in ours:
        at = ours.index("--")
        ours, extra = ours[:at], ours[at + 1:]
    a = ap.parse_args(ours)
    if a.parts < 1:
        ap.error("--parts: at least 1")
    txlgen = os.path.abspath(a.txlgen) if os.sep in a.txlgen else a.txlgen
    model = (os.path.abspath(a.model) if os.path.exists(a.model)
             else a.model)
    argv = [txlgen, "-m", model, "-t", str(a.threads), "--score",
            os.path.abspath(a.file)] + extra

    from dask.distributed import Client, LocalCluster

    if a.scheduler:
        client, cluster = Client(a.scheduler), None
    else:
        cluster = LocalCluster(n_workers=a.workers, threads_per_worker=1,
                               processes=True, host="127.0.0.1",
                               dashboard_address=None)
        client = Client(cluster)
    try:
        futures = [client.submit(score_part, argv, k, a.parts, pure=False)
                   for k in range(1, a.parts + 1)]
        with tempfile.TemporaryDirectory(prefix="dask-score-") as tmp:
            paths = []
            for k, f in enumerate(futures, 1):
                summary, err = f.result()
                sys.stderr.buffer.write(err)
                paths.append(os.path.join(tmp, f"part{k}.json"))
                with open(paths[-1], "wb") as out:
                    out.write(summary)
            merge = subprocess.run([txlgen, "--score-merge", *paths] +
                                   (["--json"] if a.json else []))
            return 1 if merge.returncode else 0
    except RuntimeError as e:
        print(f"dask_score: {e}", file=sys.stderr)
        return 1
    finally:
        client.close()
        if cluster:
            cluster.close()


if __name__ == "__main__":
    sys.exit(main())
