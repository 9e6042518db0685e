#!/usr/bin/python3
"""make-model.py OUT ARGS...: the random-weight model that
tests/make_random_model.py makes with ARGS, written as OUT.

make_random_model.py writes m.bin (and its sources) into a directory; the
C tests' models are built side by side in one meson directory, so each
is made in a directory of its own next to OUT and only its m.bin kept,
under OUT's name.  Run with PYTHONPATH=models, as meson does."""

import os
import shutil
import sys

from txlgen.random_model import main


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
