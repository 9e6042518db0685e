#!/usr/bin/python3
"""make-model.py OUT ARGS...: the random-weight model that
tests/make_random_model.py makes with ARGS, written as OUT.

make_random_model.py writes m.bin (and its sources) into a directory; the
C tests' models are built side by side in one meson directory, so each
is made in a directory of its own next to OUT and only its m.bin kept,
under OUT's name."""

import os
import shutil
import sys

# tests/srctree.py puts models/ (the txlgen package) on sys.path
sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))
import srctree  # noqa: F401,E402
from txlgen.random_model import main  # noqa: E402


def make(out, args):
    work = out + ".d"
    shutil.rmtree(work, ignore_errors=True)
    status = main(["-o", work] + args)
    if status:
        return status
    os.replace(os.path.join(work, "m.bin"), out)
    shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    sys.exit(make(sys.argv[1], sys.argv[2:]))
