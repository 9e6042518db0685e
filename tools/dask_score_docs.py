#!/usr/bin/python3
"""Score the documents of a corpus with txlgen --score-docs on Dask.

The corpus (a document per line, or JSON Lines with txlgen's --field) is
cut into parts of whole lines; each part is a task that runs
`txlgen --score-docs -` on a Dask worker with --first-line set to the
number of the part's first line, and the parts' outputs, joined in order,
are what one txlgen over the whole corpus writes.  Nothing here knows the
model: the arguments after `--` are txlgen's.

  tools/dask_score_docs.py corpus.txt --workers 4 -- -m m.bin > scores.jsonl
  tools/dask_score_docs.py corpus.jsonl --scheduler tcp://head:8786 \\
      --parts 512 -- -m NAME --field text > scores.jsonl

Without --scheduler, a LocalCluster of --workers processes on this
machine (on 127.0.0.1).  With one, every worker must read the corpus at
the same path (a shared filesystem) and run txlgen with the model.
Messages of txlgen (malformed lines...) come on standard error; a part
whose txlgen fails ends the run with its message and exit status 1.
Needs Dask's distributed (Debian: python3-distributed).
"""

import argparse
import os
import shutil
import subprocess
import sys


def parts_of(path, n_parts):
    """[(start byte, end byte, first line)] of about n_parts parts of
    whole lines, found in one pass over the file."""
    with open(path, "rb") as f:
        n_lines = sum(1 for _ in f)
    per = max(1, -(-n_lines // max(1, n_parts)))
    parts, start, line = [], 0, 1
    with open(path, "rb") as f:
        pos = 0
        for i, text in enumerate(f):
            pos += len(text)
            if (i + 1) % per == 0:
                parts.append((start, pos, line))
                start, line = pos, i + 2
        if pos > start:
            parts.append((start, pos, line))
    return parts


def score_part(path, start, end, first_line, argv):
    """Run txlgen on bytes [start, end) of path: its standard output."""
    with open(path, "rb") as f:
        f.seek(start)
        data = f.read(end - start)
    p = subprocess.run(argv + ["--score-docs", "-", "--first-line",
                               str(first_line)],
                       input=data, capture_output=True)
    if p.returncode != 0:
        raise RuntimeError(f"{path}: lines from {first_line}: txlgen exit "
                           f"status {p.returncode}: "
                           f"{p.stderr.decode(errors='replace').strip()}")
    return p.stdout, p.stderr


def main():
    ap = argparse.ArgumentParser(
        usage="%(prog)s CORPUS [OPTION]... [-- TXLGEN_OPTION...]",
        description="txlgen --score-docs over a Dask cluster",
        epilog="Arguments after -- go to txlgen (the model, --field...).")
    ap.add_argument("corpus", help="a file: a document per line")
    ap.add_argument("--workers", type=int, default=2,
                    help="local cluster: worker processes (default 2)")
    ap.add_argument("--scheduler", help="address of a running cluster's "
                    "scheduler (default: a local cluster)")
    ap.add_argument("--parts", type=int, default=0,
                    help="tasks (default 4 per worker)")
    ap.add_argument("--threads", type=int, default=1,
                    help="txlgen's threads per task (default 1)")
    ap.add_argument("--txlgen", default=os.environ.get("TXLGEN") or
                    shutil.which("txlgen") or "txlgen",
                    help="the program (default $TXLGEN, else on PATH)")
    ours = sys.argv[1:]
    args = []
    if "--" in ours:
        at = ours.index("--")
        ours, args = ours[:at], ours[at + 1:]
    a = ap.parse_args(ours)
    argv = [os.path.abspath(a.txlgen) if os.sep in a.txlgen else a.txlgen,
            "-t", str(a.threads)] + args

    from dask.distributed import Client, LocalCluster

    if a.scheduler:
        client, cluster = Client(a.scheduler), None
        n_workers = max(1, len(client.scheduler_info()["workers"]))
    else:
        cluster = LocalCluster(n_workers=a.workers, threads_per_worker=1,
                               processes=True, host="127.0.0.1",
                               dashboard_address=None)
        client, n_workers = Client(cluster), a.workers
    try:
        path = os.path.abspath(a.corpus)
        parts = parts_of(path, a.parts or 4 * n_workers)
        futures = [client.submit(score_part, path, s, e, line, argv,
                                 pure=False) for s, e, line in parts]
        # in order: each part's output follows the one before it
        for f in futures:
            out, err = f.result()
            sys.stderr.buffer.write(err)
            sys.stdout.buffer.write(out)
        sys.stdout.flush()
    except RuntimeError as e:
        print(f"dask_score_docs: {e}", file=sys.stderr)
        return 1
    finally:
        client.close()
        if cluster:
            cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
