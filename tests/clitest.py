"""What the tests that drive the txlgen binary share (test_cli.py,
test_engines.py, test_streams.py)."""

import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def model_and_tmp(model, prefix):
    """(model, tmp): a new temporary folder, and model (the test model
    of $TXLGEN_TEST_MODEL) or, if that is unset, a small random-weight
    model made in it."""
    tmp = tempfile.mkdtemp(prefix=prefix)
    if not model:
        subprocess.run([sys.executable, os.path.join(
            HERE, "make_random_model.py"), "-o", tmp, "--seed", "11"],
            check=True, stdout=subprocess.DEVNULL, timeout=300)
        model = os.path.join(tmp, "m.bin")
    return model, tmp
