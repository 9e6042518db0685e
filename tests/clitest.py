"""What the tests that drive the txlgen binary share (test_cli.py,
test_engines.py, test_streams.py; test_parity.py and test_span.py: their
report)."""

import os
import select
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# the binary and the test model (unset: each test module makes its own)
TXLGEN = os.environ.get("TXLGEN", os.path.join(ROOT, "build", "cmd",
                                               "txlgen"))
MODEL = os.environ.get("TXLGEN_TEST_MODEL")


def model_and_tmp(model, prefix):
    """(model, tmp): a new temporary folder, and model (the test model
    of $TXLGEN_TEST_MODEL) or, if that is unset, a small random-weight
    model made in it."""
    tmp = tempfile.mkdtemp(prefix=prefix)
    return model or random_model(tmp, seed=11), tmp


def random_model(folder, *args, seed):
    """@folder/m.bin, a small random-weight model that
    make_random_model.py makes with @args."""
    os.makedirs(folder, exist_ok=True)
    subprocess.run([sys.executable, os.path.join(HERE, "make_random_model.py"),
                    "-o", folder, "--seed", str(seed), *args],
                   check=True, stdout=subprocess.DEVNULL, timeout=300)
    return os.path.join(folder, "m.bin")


def read_pipe(f, done, timeout=30):
    """Read from the pipe @f until done(bytes read) or its end; fails
    after @timeout seconds rather than waiting for ever."""
    fd, got, end = f.fileno(), b"", time.time() + timeout
    while not done(got):
        left = end - time.time()
        if left <= 0:
            raise AssertionError(f"pipe: nothing more after {got[-200:]!r}")
        if select.select([fd], [], [], left)[0]:
            b = os.read(fd, 65536)
            if not b:
                break
            got += b
    return got


def wait_stdin_open(p, timeout=30):
    """(stdout, stderr) of @p once it has ended, its stdin left open:
    communicate() would close it, and an end of input that comes with a
    signal races it."""
    pipes, got = {p.stdout.fileno(): b"", p.stderr.fileno(): b""}, {}
    end = time.time() + timeout
    while pipes:
        left = end - time.time()
        if left <= 0:
            raise AssertionError("still running after a signal")
        for fd in select.select(list(pipes), [], [], left)[0]:
            b = os.read(fd, 65536)
            if b:
                pipes[fd] += b
            else:
                got[fd] = pipes.pop(fd)
    p.wait(timeout=max(end - time.time(), 1))
    return got[p.stdout.fileno()], got[p.stderr.fileno()]


def parity_report(report):
    """With TXL_PARITY_REPORT set, print the lines of @report (the
    largest difference from the reference of each case) after the
    tests."""
    if report and os.environ.get("TXL_PARITY_REPORT"):
        print("\nmax |txlgen - reference| per case:", file=sys.stderr)
        for line in report:
            print("  " + line, file=sys.stderr)
